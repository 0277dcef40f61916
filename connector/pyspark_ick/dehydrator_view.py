"""What operators and the snapshot reader see of a dehydrator, changing nothing: per-shard
stats (parked, due, the next due time, open claims and the lease), the elements due
first, and a snapshot of every parked and claimed element read in bounded pages.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from . import bounds, scripts
from .clients import Client
from .keys import DehydratorKeys, shard_names
from .numbered_log import deliveries
from .observe import server_time
from .values import as_bytes, text

Element = tuple[bytes, int, bytes]
"""An element as Redis holds it: id, due time (ms since the epoch), element."""


def shard_keys(name: str, shards: int) -> list[DehydratorKeys]:
    return [DehydratorKeys(master) for master in shard_names(name, shards)]


def stats(client: Client, name: str, shards: int) -> dict[str, Any]:
    """Per shard: elements parked, due now (not claimed yet), ms to the next due time (-1:
    none parked), ms since the first due time (``overdue_ms``, 0: none due), open claims
    and the elements they hold, the lease and its heartbeat's age, elements committed in
    all (``done``); and totals."""
    rows: list[dict[str, Any]] = []
    for i, keys in enumerate(shard_keys(name, shards)):
        reply = scripts.run(
            client,
            "dh_info",
            [keys.due, keys.clog, keys.lease],
            [""],
            what=f"dehydrator {name!r} shard {i}",
        )
        parked, due, next_ms, claimed, committed, claimed_elements, owner, expires = reply[:8]
        rows.append(
            {
                "shard": i,
                "key": keys.master,
                "parked": int(parked),
                "due": int(due),
                "next_due_ms": int(next_ms),
                "open_claims": int(claimed) - int(committed),
                "claimed": int(claimed_elements),
                "lease_owner": text(owner) or None,
                "lease_expires_in_ms": None if int(expires) < 0 else int(expires),
                "lease_idle_ms": None if int(expires) < 0 else int(reply[10]),
                "done": int(reply[8]),
                "overdue_ms": int(reply[9]),
            }
        )
    waits = [r["next_due_ms"] for r in rows if r["next_due_ms"] >= 0]
    totals = {
        field: sum(r[field] for r in rows)
        for field in ("parked", "due", "open_claims", "claimed", "done")
    }
    return {
        "name": name,
        "shards": shards,
        "rows": rows,
        "totals": {
            **totals,
            "next_due_ms": min(waits) if waits else -1,
            "overdue_ms": max(r["overdue_ms"] for r in rows),
        },
    }


def peek(client: Client, name: str, shards: int, n: int) -> list[tuple[str, int, str, int]]:
    """The ``n`` elements due first over every shard: (id, due ms, element, shard),
    read in pages of at most ``bounds.ITEMS_PER_CALL``."""
    found: list[tuple[str, int, str, int]] = []
    step = bounds.ITEMS_PER_CALL
    for i, keys in enumerate(shard_keys(name, shards)):
        for skip in range(0, n, step):
            flat = scripts.run(
                client,
                "dh_peek",
                [keys.due, keys.elements],
                [min(step, n - skip), skip],
                what=f"dehydrator {name!r} shard {i}",
            )
            found += [
                (text(flat[k]), int(float(flat[k + 1])), text(flat[k + 2]), i)
                for k in range(0, len(flat), 3)
            ]
            if len(flat) < 3 * step:
                break
    return sorted(found, key=lambda row: (row[1], row[0]))[:n]


def due_histogram(client: Client, name: str, shards: int, buckets: int = 12) -> dict[str, Any]:
    """When the parked elements are due: ``counts[0]`` are due now, ``counts[k]`` for k >=
    1 are due in ``(edges[k - 1], edges[k]]`` (ms since the epoch; ``edges[0]`` is now),
    ``buckets`` equal spans up to the last due time. ZCOUNTs only (each O(log n)): one
    call per shard for the last due time, one per shard and bucket."""
    every = shard_keys(name, shards)
    label = f"dehydrator {name!r}"
    now = int(server_time(client) * 1000)
    last = now
    for keys in every:
        tail = scripts.command(
            client, partial(client.zrange, keys.due, -1, -1, withscores=True), what=label
        )
        if tail:
            last = max(last, int(tail[0][1]))
    span = max(1, -(-(last - now) // buckets))
    edges = [now + k * span for k in range(buckets + 1)]
    ranges = [("-inf", now)] + [(f"({edges[k - 1]}", edges[k]) for k in range(1, buckets + 1)]
    counts = [0] * len(ranges)
    for keys in every:
        for k, (low, high) in enumerate(ranges):
            counts[k] += int(
                scripts.command(client, partial(client.zcount, keys.due, low, high), what=label)
            )
    return {"now_ms": now, "edges": edges, "counts": counts}


def parked(client: Client, keys: DehydratorKeys, label: str) -> list[Element]:
    """Every parked element of one shard, by due time: ZSCAN pages of the due set of
    about ``bounds.ITEMS_PER_CALL``, each page's elements by one HMGET. Paged, not atomic:
    an element parked for the whole read appears once; one pulled or claimed during it may
    be left out."""
    found: dict[bytes, int] = {}
    out: list[Element] = []
    cursor = 0
    while True:
        cursor, page = scripts.command(
            client,
            partial(client.zscan, keys.due, cursor, count=bounds.ITEMS_PER_CALL),
            what=label,
        )
        fresh = [(as_bytes(id), int(due)) for id, due in page if as_bytes(id) not in found]
        for start in range(0, len(fresh), bounds.ITEMS_PER_CALL):
            chunk = fresh[start : start + bounds.ITEMS_PER_CALL]
            elements = scripts.command(
                client, partial(client.hmget, keys.elements, [id for id, _ in chunk]), what=label
            )
            for (id, due), element in zip(chunk, elements, strict=True):
                found[id] = due
                if element is not None:
                    out.append((id, due, as_bytes(element)))
        if int(cursor) == 0:
            break
    return sorted(out, key=lambda e: (e[1], e[0]))


def claimed(client: Client, keys: DehydratorKeys, label: str) -> list[tuple[Element, int]]:
    """Every element of the shard's open claims (claimed by a stream query, not committed
    yet) with the deliveries of its claim, claim by claim (a claim holds at most
    ``bounds.MOVES_PER_CALL``)."""
    head, committed = scripts.command(
        client, partial(client.hmget, keys.clog, "claimed", "committed"), what=label
    )
    numbers = range(int(committed or 0) + 1, int(head or 0) + 1)
    counted = deliveries(client, keys.clog, numbers, label)
    out: list[tuple[Element, int]] = []
    for n in numbers:
        flat = scripts.command(client, partial(client.lrange, keys.claim(n), 0, -1), what=label)
        out += [
            ((as_bytes(flat[k]), int(float(flat[k + 1])), as_bytes(flat[k + 2])), counted[n])
            for k in range(0, len(flat), 3)
        ]
    return out
