"""What operators and progress reports read, changing nothing: per-shard sizes with the
age of the oldest score, reservations and leases, the lowest members, and the logical
Icks and dehydrators a Redis holds (from the registry, not a keyspace scan). The CLI, the
Prometheus exporter and the stream reader's progress report all read through here.
"""

from __future__ import annotations

from typing import Any

from . import bounds, freshness, scripts
from .clients import Client
from .dead_letters import DeadLetters
from .keys import shard_names
from .lanes import LANES, TIME_MIN, time_of
from .reservations import describe
from .sharded import ShardedIck
from .values import pairs


def server_time(client: Client) -> float:
    """Redis server time in seconds (any node of a cluster)."""
    reply = client.time()
    if isinstance(reply, dict):  # a cluster client may answer per node
        reply = next(iter(reply.values()))
    return int(reply[0]) + int(reply[1]) / 1e6


def stats(client: Client, name: str, shards: int) -> dict[str, Any]:
    """Per-shard sizes, oldest score and its age, reservations and lease, members
    committed in all (``done``), how long the members committed waited (freshness.py:
    the last window's p50 and p99, the histograms under ``freshness``); plus totals."""
    sharded = ShardedIck(client, name, shards)
    now = server_time(client)
    rows, fresh = [], []
    for i in range(shards):
        ick = sharded.shard(i)
        fresh.append(freshness.read(client, ick.key, now, sharded.label))
        st = ick.stats() or {}
        lows = [st[k] for k in ("pset_min", "cset_min") if st.get(k) is not None]
        oldest = min(lows) if lows else None
        res = describe(client, ick.key)
        backfill, first_backfill = st.get("backfill_size", 0), st.get("backfill_min")
        live_min = st.get("pset_min") if st.get("pset_size", 0) > backfill else None
        rows.append(
            {
                "shard": i,
                "key": ick.key,
                "exists": bool(st),
                "queued": st.get("pset_size", 0),
                "reserved": st.get("cset_size", 0),
                "oldest_score": oldest,
                "age_s": age(now, oldest),
                "oldest_queued_age_s": age(now, live_min),
                "lanes": {
                    "live": lane(st.get("pset_size", 0) - backfill, now, live_min),
                    "backfill": lane(backfill, now, first_backfill),
                },
                "open_reservations": res.get("open_reservations"),
                "lease_owner": res.get("lease_owner"),
                "lease_expires_in_ms": res.get("lease_expires_in_ms"),
                "lease_idle_ms": res["lease_idle_ms"],
                "done": res["done"],
                **fresh[-1].summary(),
                "freshness": fresh[-1].json(),
            }
        )
    opens = [r["open_reservations"] for r in rows if r["open_reservations"] is not None]
    olds = [r["oldest_score"] for r in rows if r["oldest_score"] is not None]
    totals = {
        "queued": sum(r["queued"] for r in rows),
        "reserved": sum(r["reserved"] for r in rows),
        "open_reservations": sum(opens) if opens else None,
        "oldest_score": min(olds) if olds else None,
        "age_s": age(now, min(olds) if olds else None),
        "done": sum(r["done"] for r in rows),
        **freshness.combined(fresh).summary(),
        "lanes": {name: lane_total([r["lanes"][name] for r in rows]) for name in LANES},
    }
    return {"name": name, "shards": shards, "server_time": now, "rows": rows, "totals": totals}


def freshness_of(client: Client, name: str, shards: int) -> freshness.Freshness:
    """Logical Ick ``name``'s freshness histograms: the sum over its shards, its window as
    of Redis time now (one bounded read per shard)."""
    now = server_time(client)
    return freshness.combined(
        freshness.read(client, master, now) for master in shard_names(name, shards)
    )


def summary(client: Client, name: str, shards: int) -> dict[str, Any]:
    """``stats`` with the members waiting for a retry and the dead letters, per shard and
    in the totals (``retrying``, ``dead``): the CLI's stats and the console's pages."""
    report = stats(client, name, shards)
    letters = DeadLetters(ShardedIck(client, name, shards))
    for row, dead, retrying in zip(
        report["rows"], letters.count(), letters.retrying(), strict=True
    ):
        row["dead"], row["retrying"] = dead, retrying
    totals = report["totals"]
    totals["dead"] = sum(row["dead"] for row in report["rows"])
    totals["retrying"] = sum(row["retrying"] for row in report["rows"])
    return report


def lane(queued: int, now: float, first: float | None) -> dict[str, Any]:
    """One lane of a shard: members queued, the score of its first and that member's
    age (its own time's, lanes.time_of; None unless a Unix time)."""
    own = None if first is None else time_of(first)
    return {"queued": queued, "oldest_score": first, "age_s": age(now, own)}


def lane_total(shards: list[dict[str, Any]]) -> dict[str, Any]:
    """One lane over every shard: members queued, the oldest member's age."""
    ages = [s["age_s"] for s in shards if s["age_s"] is not None]
    return {"queued": sum(s["queued"] for s in shards), "age_s": max(ages) if ages else None}


def age(now: float, score: float | None) -> float | None:
    """Seconds since ``score`` when it reads as a Unix time (from ``lanes.TIME_MIN``, at
    most a day ahead), else None: the one age rule of the CLI, the console and Spark."""
    if score is None or not TIME_MIN <= score <= now + 86400:
        return None
    return round(now - score, 3)


def peek(client: Client, name: str, shards: int, n: int) -> dict[str, list[tuple[str, float, int]]]:
    """The ``n`` lowest members of the psets and of the csets, changing nothing."""
    sharded = ShardedIck(client, name, shards)
    queued: list[tuple[str, float, int]] = []
    reserved: list[tuple[str, float, int]] = []
    step = bounds.ITEMS_PER_CALL  # pages: no call holds Redis long, whatever n is
    for i in range(shards):
        for skip in range(0, n, step):
            pset, cset = scripts.run(
                client,
                "ickpeek",
                sharded.shard(i).keys.base,
                [min(step, n - skip), skip],
                what=sharded.label,
            )
            queued += [(m, s, i) for m, s in pairs(pset)]
            reserved += [(m, s, i) for m, s in pairs(cset)]
            if len(pset) < 2 * step and len(cset) < 2 * step:
                break

    def lowest(found: list[tuple[str, float, int]]) -> list[tuple[str, float, int]]:
        return sorted(found, key=lambda row: (row[1], row[0]))[:n]

    return {"queued": lowest(queued), "reserved": lowest(reserved)}
