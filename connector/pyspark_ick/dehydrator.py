"""Dehydrator: ReDe's operations on plain Redis structures, one Lua call per shard each.

A dehydrator shard is a sorted set ``id -> due ms`` plus a hash ``id -> element`` (keys in
keys.DehydratorKeys, one hash slot). ReDe keeps one FIFO queue per distinct TTL, which makes
push O(1) but poll and ttn O(number of TTLs); here push is O(log n), pull O(log n),
poll O(log n + m) and ttn O(1) whatever the TTLs, so nothing slows down as the number of
distinct TTLs (or absolute ``releaseAt`` times from the sink) grows, and the data replicate
and persist like any Redis data. Time is Redis server time in ms; a test ``clock`` may pass
"now" into the scripts instead.

A logical dehydrator ``name`` of ``shards`` shards routes an id by ``shard_of(id)`` (as
Icks route members); poll, xpoll and ttn combine the shards. ``ClaimLog`` is the source's
per-shard claim log (claims.py): due elements move into numbered claims that stay until
committed.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import bounds, replication, scripts
from .claims import ClaimLog, Clock
from .clients import Client
from .errors import IckConfigError
from .keys import DehydratorKeys, shard_names, shard_of
from .packing import pack_values, plain_chunks
from .pipe import run_many
from .registry import LogicalName
from .values import TEXTS, as_bytes, check_times, check_ttl, text
from .words import plural

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

ON_DUPLICATE = ("keep", "replace", "error")


def new_id() -> str:
    """A random id for gidpush: 32 hex digits, as random as uuid4().hex."""
    return os.urandom(16).hex()


class Dehydrator(LogicalName):
    """ReDe's commands on a logical dehydrator of ``shards`` shards.

    Elements are returned as ``str`` (``decode=False``: ``bytes``). ``clock`` (tests only)
    returns "now" in ms for the scripts instead of Redis server time.
    """

    kind = "dehydrator"

    def __init__(
        self,
        client: Client,
        name: str,
        shards: int = 1,
        *,
        decode: bool = True,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(client, name, shards)
        self.decode = decode
        self.clock = clock
        self._keys = [DehydratorKeys(m) for m in shard_names(self.name, self.shards)]

    # --- helpers ---------------------------------------------------------------------------

    def _now(self) -> str:
        return "" if self.clock is None else str(int(self.clock()))

    def _out(self, value: Any) -> Any:
        """A reply as the element type of this dehydrator (None stays None)."""
        if value is None:
            return None
        if self.decode:
            return text(value)
        return value if isinstance(value, bytes) else str(value).encode("utf-8")

    def keys_of(self, id: Any) -> DehydratorKeys:
        """The keys of the shard that ``id`` goes to."""
        return self._keys[self.shard_of(id)]

    def claim_log(self, i: int) -> ClaimLog:
        """The claim log of shard ``i`` (what the streaming source consumes).

        The shard count is not checked here (executors call it): see ``check_shards``.
        """
        return ClaimLog(
            self.client,
            self._keys[i],
            decode=self.decode,
            clock=self.clock,
            label=f"dehydrator {self.name!r} shard {i}",
        )

    def _by_shard(self, ids: Iterable[Any]) -> dict[int, list[tuple[int, bytes]]]:
        """(position, id as bytes) of each id, grouped by shard."""
        groups: dict[int, list[tuple[int, bytes]]] = {}
        for pos, id in enumerate(ids):
            key = as_bytes(id)
            groups.setdefault(shard_of(key, self.shards), []).append((pos, key))
        return groups

    # --- ReDe's commands -------------------------------------------------------------------

    def push(self, id: Any, element: str | bytes, ttl_ms: int) -> None:
        """Park ``element`` under ``id`` for ``ttl_ms`` ms; an id already parked raises."""
        # one dh_push call straight away, without park's grouping (docs/sizing.md)
        key = id if type(id) in TEXTS else text(id)
        row = pack_values(
            [
                str(check_ttl(ttl_ms)),
                key,  # checked before Redis
                element if type(element) in TEXTS else as_bytes(element),
            ]
        )
        self.check_shards()
        replication.write(
            self.client,
            lambda c: scripts.run(
                c,
                "dh_push",
                self._keys[0].store if self.shards == 1 else self.keys_of(key).store,
                ["error", self._now(), "delay", row],
                what=self.label,
                replay_safe=False,
            ),
            what=self.label,
            replay_safe=False,
        )  # a replay finds its id

    def gidpush(self, element: str | bytes, ttl_ms: int) -> str:
        """Park ``element`` for ``ttl_ms`` ms under a new random id (32 hex digits);
        returns the id."""
        id = new_id()
        self.push(id, element, ttl_ms)
        return id

    def park(
        self,
        ids: Sequence[Any],
        elements: Sequence[str | bytes],
        times: Sequence[int],
        *,
        at: bool = False,
        on_duplicate: str = "keep",
        chunk: int = bounds.DEHYDRATOR_CHUNK,
    ) -> tuple[int, int]:
        """Park many elements in bounded dh_push calls; returns (new, existing).

        ``times`` are delays in ms, or due times in epoch ms with ``at=True``.
        ``on_duplicate`` decides for ids already parked: keep, replace or error.
        """
        if on_duplicate not in ON_DUPLICATE:
            raise IckConfigError(
                f"on_duplicate must be one of {ON_DUPLICATE}, got {on_duplicate!r}"
            )
        if not len(ids) == len(elements) == len(times):
            raise IckConfigError(
                f"{plural(len(ids), 'id')}, {plural(len(elements), 'element')} and "
                f"{plural(len(times), 'time')}: one of each per element"
            )
        stamps = check_times(times)
        if not ids:
            return (0, 0)
        groups: dict[int, tuple[list[str], list[Any], list[float]]] = {}
        for id, element, stamp in zip(ids, elements, stamps, strict=True):
            key = id if type(id) is str else text(id)
            group = groups.setdefault(self.shard_of(key), ([], [], []))
            group[0].append(key)
            group[1].append(element)
            group[2].append(stamp)
        chunk = min(chunk, bounds.ITEMS_PER_CALL)
        return self._push(
            {shard: plain_chunks(*rows, chunk) for shard, rows in groups.items()},
            at,
            on_duplicate,
            overlap=True,
        )

    def park_arrays(
        self,
        ids: pa.Array,
        elements: pa.Array,
        times: np.ndarray,
        *,
        at: bool = False,
        on_duplicate: str = "keep",
        chunk: int = bounds.DEHYDRATOR_CHUNK,
    ) -> tuple[int, int]:
        """``park`` for columns (string or binary ids and elements, float64 times);
        what the Spark sink calls with its Arrow batches (needs numpy and pyarrow)."""
        from .columns import pack_rows, split_rows

        if not len(ids):
            return (0, 0)
        chunk = min(chunk, bounds.ITEMS_PER_CALL)
        return self._push(
            {
                shard: pack_rows(*rows, chunk)
                for shard, rows in split_rows(ids, elements, times, self.shards).items()
            },
            at,
            on_duplicate,
        )

    def _push(
        self, packed: dict[int, Iterable[bytes]], at: bool, on_duplicate: str, overlap: bool = False
    ) -> tuple[int, int]:
        """dh_push the packed arguments of each shard, a call each, taken one by one
        (``overlap``, the plain client's park: each packed while Redis runs the one before,
        pipe.run_many); (new, existing)."""
        self.check_shards()
        head = [on_duplicate, self._now(), "at" if at else "delay"]
        calls = (
            ("dh_push", self._keys[shard].store, [*head, arg])
            for shard, args in packed.items()
            for arg in args
        )
        kept = list(calls) if replication.waits(self.client) else calls  # may run again
        safe = on_duplicate != "error"  # "error" on a replay finds its own ids
        replies = replication.write(
            self.client,
            lambda c: run_many(c, kept, what=self.label, replay_safe=safe, overlap=overlap),
            what=self.label,
            replay_safe=safe,
        )
        return (
            sum(int(r[0]) for r in replies if r is not None),
            sum(int(r[1]) for r in replies if r is not None),
        )

    def pull(self, id: Any) -> Any:
        """Remove and return the element of ``id``, due or not; None when it is not parked."""
        return self._out(self._on_shard_of(id, "dh_pull", replay_safe=False)[0])

    def poll(self) -> list[Any]:
        """Remove and return every due element, earliest due first."""
        return [self._out(x) for x in self._take("poll")]

    def xpoll(self) -> list[str]:
        """The ids of every due element, earliest due first; nothing is removed."""
        return [text(x) for x in self._take("xpoll")]

    def _take(self, mode: str) -> list[Any]:
        """Due elements (poll) or ids (xpoll) of every shard, earliest due first, in calls
        of at most ``bounds.ITEMS_PER_CALL``; xpoll pages by rank, so ids that come due or
        go during the read may be missed or repeated. Due times come back only to merge
        shards (formatting them is a quarter of a poll's Redis time)."""
        self.check_shards()
        limit, due = bounds.ITEMS_PER_CALL, self.shards > 1
        runs: list[list[Any]] = []  # per call: (due, x) pairs, or x alone
        offsets = dict.fromkeys(range(self.shards), 0)
        while offsets:
            now = self._now()
            replies = run_many(
                self.client,
                [
                    (
                        "dh_take",
                        self._keys[i].store,
                        [now, limit, mode, offset, "due" if due else ""],
                    )
                    for i, offset in offsets.items()
                ],
                what=self.label,
                replay_safe=mode != "poll",
            )
            more = {}
            for (shard, offset), reply in zip(offsets.items(), replies, strict=True):
                runs.append(list(zip(reply[::2], reply[1::2], strict=True)) if due else reply)
                if len(reply) == (2 if due else 1) * limit:
                    more[shard] = offset + (limit if mode == "xpoll" else 0)
            offsets = more
        if not due:  # one shard: its runs follow one another
            return [x for run in runs for x in run]
        return [x for _, x in heapq.merge(*runs, key=lambda pair: float(pair[0]))]

    def xack(self, *ids: Any) -> list[Any]:
        """Remove and return the due elements among ``ids`` (None for the others)."""
        if not ids:
            return []
        self.check_shards()
        step = bounds.ITEMS_PER_CALL
        parts = [
            (shard, rows[i : i + step])
            for shard, rows in self._by_shard(ids).items()
            for i in range(0, len(rows), step)
        ]
        now = self._now()
        replies = run_many(
            self.client,
            [
                ("dh_xack", self._keys[shard].store, [now, *(id for _, id in rows)])
                for shard, rows in parts
            ],
            what=self.label,
            replay_safe=False,
        )
        out: list[Any] = [None] * len(ids)
        for (_, rows), reply in zip(parts, replies, strict=True):
            for (pos, _), element in zip(rows, reply, strict=True):
                out[pos] = self._out(element)
        return out

    def look(self, id: Any) -> Any:
        """The element of ``id`` without removing it; None when it is not parked."""
        elements, key = self.keys_of(id).elements, as_bytes(id)
        return self._out(
            scripts.command(self.client, lambda: self.client.hget(elements, key), what=self.label)
        )

    def ttn(self) -> int:
        """ms until the next element is due: 0 when one is due, -1 when empty (a read:
        the shard count is checked, not recorded)."""
        self.check_shards(record=False)
        now = self._now()
        waits = [
            int(r)
            for r in run_many(
                self.client, [("dh_ttn", k.store[:1], [now]) for k in self._keys], what=self.label
            )
        ]
        pending = [w for w in waits if w >= 0]
        return min(pending) if pending else -1

    def update(self, id: Any, element: str | bytes) -> Any:
        """Replace the element of parked ``id`` (keeping its due time); returns the old one."""
        return self._out(self._on_shard_of(id, "dh_update", element))

    def _on_shard_of(self, id: Any, script: str, *more: Any, replay_safe: bool = True) -> Any:
        """The reply of ``script`` on the shard of ``id`` with ARGV ``id, *more`` (bytes)."""
        self.check_shards()
        args = [as_bytes(id), *map(as_bytes, more)]
        return scripts.run(
            self.client,
            script,
            self.keys_of(id).store,
            args,
            what=self.label,
            replay_safe=replay_safe,
        )

    # --- operations ------------------------------------------------------------------------

    def size(self) -> int:
        """How many elements are parked (due or not; claimed ones not counted)."""

        def count() -> int:
            pipe = self.client.pipeline(transaction=False)
            for keys in self._keys:
                pipe.zcard(keys.due)
            counts = pipe.execute(raise_on_error=False)  # errors as redis-py raised them
            for count in counts:
                if isinstance(count, Exception):
                    raise count
            return sum(int(n) for n in counts)

        return int(scripts.command(self.client, count, what=self.label))

    def delete(self) -> int:
        """Remove every key of every shard (open claims too) and the recorded shard count."""
        removed = 0
        for keys in self._keys:
            claimed, committed = ClaimLog(self.client, keys).counters()
            claims = [keys.claim(n) for n in range(committed + 1, claimed + 1)]
            removed += int(
                scripts.run(self.client, "delete_keys", keys.fixed_keys() + claims, what=self.label)
            )
        return removed + self.forget()
