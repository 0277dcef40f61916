"""Resharding a logical Ick: every member, queued or reserved, moved to its shard under a
new shard count, the lowest score kept, in bounded calls (``pyspark-ick reshard``; the
runbook is in docs/operations.md).

The steps, each safe to run again after a crash (nothing lost, nothing doubled):

1. the marker ``NAME/ick/reshard`` records the target count next to the recorded one;
   from then on every reader and writer of the connector refuses the Ick (registry.py);
2. the lease of every shard of both layouts is taken (holds.py), refusing a consumer
   that holds one: a query must be stopped first;
3. each shard's reserved members go back to its queue and its reservation log is closed
   (requeue.py): reservations are a consumer's, of the old layout;
4. each old shard's pset is read in ZSCAN pages; a member whose shard under the new count
   is another key is added there (ickadd: the lower score wins), then removed here
   (lua/ick_moved.lua), so a crash between the two leaves a copy that the next run folds;
   then its retries, attempt records and dead letters go the same way (carry.py: copied,
   folded with what the new shard holds, then removed as they were copied);
5. the old shards that the new layout lacks are deleted, once they hold nothing: no
   member queued, reserved, retrying, dead or with an attempt record;
6. the new count is recorded, the marker removed, the leases given back.

A reshard to the count the Ick has moves nothing but the strays: retries and dead letters
that a reshard before this release left in a shard that is not their member's.

A run that stopped half-way leaves the marker (readers and writers keep refusing): run it
again with the same target. Producers that do not read the recorded count (the redis-ick
gem, code with a fixed count) must be stopped first and restarted with the new count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from . import bounds, scripts
from .carry import sweep
from .clients import Client
from .errors import IckConfigError, IckError, ShardCountError
from .holds import Hold, holders, in_use
from .ick import Ick
from .keys import IckKeys, check_name, check_shards, reshard_key, shard_count_key, shard_names
from .keys import shard_of as route
from .numbered_log import fence_args
from .packing import pack_checked
from .registry import mismatch, recorded, register, resharding
from .requeue import Progress, requeue
from .sharded import ShardedIck
from .words import plural

OWNER = "pyspark-ick reshard"
T = TypeVar("T")


@dataclass
class Resharded:
    """What a reshard did: the counts, members moved to another shard, members whose
    retry, attempt record or dead letter was carried to another shard, reserved members
    put back into the queue, reservations closed, shard keys deleted, and its bounded
    calls (how many, the longest round trip)."""

    name: str
    before: int
    after: int
    moved: int = 0
    carried: int = 0
    requeued: int = 0
    closed: int = 0
    dropped: list[str] = field(default_factory=list)
    calls: int = 0
    longest_ms: float = 0.0
    seconds: float = 0.0


def reshard(
    client: Client,
    name: str,
    to: int,
    shards: int | None = None,
    *,
    progress: Progress | None = None,
) -> Resharded:
    """Move every member of logical Ick ``name`` to its shard under ``to`` shards (see the
    module docstring). ``shards``: the current count when none is recorded (the gem's
    producers record none). ``progress(what, items)`` is called after each bounded call.
    LeaseError when a consumer holds a lease; ShardCountError when another reshard did not
    finish."""
    return Reshard(client, name, to, progress).run(shards)


class Reshard:
    """One reshard of logical Ick ``name`` to ``to`` shards."""

    def __init__(
        self, client: Client, name: str, to: int, progress: Progress | None = None
    ) -> None:
        self.client = client
        self.name = check_name(name)
        self.to = check_shards(to)
        self.label = f"Ick {name!r}"
        self.progress = progress
        self.targets = shard_names(self.name, self.to)

    def run(self, given: int | None = None) -> Resharded:
        started = time.monotonic()
        target = resharding(self.client, self.name)
        if target is not None and target != self.to:
            raise ShardCountError(
                f"{self.label}: a reshard to {plural(target, 'shard')} did not finish: finish it "
                f"first (pyspark-ick reshard {self.name} --to {target}), then reshard again"
            )
        before = self.current(given)
        self.report = Resharded(self.name, before, self.to)
        if before == self.to and target is None:
            for key in self.targets:  # no member moves: only strays are carried home
                self.report.carried += sweep(
                    self.client, key, self.targets, self.shard_label(key), call=self.call
                )
            self.report.seconds = round(time.monotonic() - started, 3)
            return self.report
        sources = shard_names(self.name, before)
        every = sources + [k for k in self.targets if k not in sources]
        fresh = self.mark()
        leases = [(IckKeys(k).lease, self.shard_label(k)) for k in every]
        try:
            busy = [h for h in holders(self.client, leases) if h.owner != OWNER]
            if busy:
                raise in_use(
                    f"{self.label} is being consumed", busy, self.name, "Nothing was moved"
                )
            self.hold = Hold(self.client, leases, OWNER)
            self.hold.take()
        except BaseException:
            if fresh:
                self.unmark()
            raise
        try:
            for key in every:
                self.requeue(key)
            for key in sources:
                self.move_out(key)
                self.carry_out(key)
            for key in sources:
                if key not in self.targets:
                    self.drop(key)
            self.record()
        finally:
            self.hold.give_back()
        self.report.seconds = round(time.monotonic() - started, 3)
        return self.report

    # --- the steps -----------------------------------------------------------------------

    def current(self, given: int | None) -> int:
        """The shard count now: the recorded one, else ``given``, checked against the keys
        and recorded first (so that a run again after a crash knows it)."""
        found = recorded(self.client, self.name, "ick", self.label)
        if found is not None:
            if given is not None and given != found:
                raise mismatch("ick", self.name, found, f"--shards {given}")
            return found
        if given is None:
            raise IckConfigError(
                f"{self.label}: no shard count is recorded in Redis (its producers record "
                "none): give the count they use (--shards N, or shards=N)"
            )
        ShardedIck(self.client, self.name, check_shards(given)).check_shards()
        return given

    def mark(self) -> bool:
        """Record the target next to the count (the marker); whether this run set it."""
        return bool(
            self.redis("SET", 0, partial(self.client.set, reshard_key(self.name), self.to, nx=True))
        )

    def unmark(self) -> None:
        self.redis("UNLINK", 0, partial(self.client.unlink, reshard_key(self.name)))

    def requeue(self, key: str) -> None:
        keys = IckKeys(key)
        moved, closed = requeue(
            self.client, keys, self.hold.fence(keys.lease), self.shard_label(key), self.tick
        )
        self.report.requeued += moved
        self.report.closed += closed
        self.hold.renew()

    def move_out(self, key: str) -> None:
        """Move every queued member of shard ``key`` whose shard is another key now."""
        keys = IckKeys(key)
        waiting: dict[str, tuple[list[Any], list[float]]] = {}
        cursor = 0
        while True:
            cursor, page = self.redis(
                "ZSCAN",
                bounds.ITEMS_PER_CALL,
                partial(self.client.zscan, keys.pset, cursor, count=bounds.ITEMS_PER_CALL),
            )
            for member, score in page:
                to = self.targets[route(member, self.to)]
                if to != key:
                    members, scores = waiting.setdefault(to, ([], []))
                    members.append(member)
                    scores.append(float(score))
                    if len(members) >= bounds.ITEMS_PER_CALL:
                        self.move(keys, to, *waiting.pop(to))
            self.hold.renew()
            if int(cursor) == 0:
                break
        for to, (members, scores) in waiting.items():
            self.move(keys, to, members, scores)

    def carry_out(self, key: str) -> None:
        """Carry the retries, attempt records and dead letters of shard ``key`` whose member's
        shard is another key now to that key (carry.py)."""
        self.report.carried += sweep(
            self.client, key, self.targets, self.shard_label(key), call=self.call
        )
        self.hold.renew()

    def move(self, source: IckKeys, to: str, members: list[Any], scores: list[float]) -> None:
        """Add ``members`` to shard ``to`` (the lower score wins), then remove them from
        ``source`` (unless a producer lowered a score since: copied again)."""
        fence = self.hold.fence(source.lease)
        for _ in range(5):
            packed = pack_checked(members, scores)
            self.call(
                "ickadd",
                len(members),
                partial(scripts.run, self.client, "ickadd", IckKeys(to).base, [packed]),
            )
            removed, kept = self.call(
                "ick_moved",
                len(members),
                partial(
                    scripts.run,
                    self.client,
                    "ick_moved",
                    [*source.base, source.lease],
                    [*fence_args(fence), packed],
                    what=self.shard_label(source.master),
                ),
            )
            self.report.moved += int(removed)
            if not kept:
                return
            members, scores = list(kept[1::2]), [float(s) for s in kept[0::2]]
        raise IckError(
            f"{self.shard_label(source.master)}: producers keep lowering the scores of the "
            "members being moved: stop the producers, then run the reshard again"
        )

    def drop(self, key: str) -> None:
        """Delete shard ``key`` of the old layout, once nothing is left in it: no member
        queued, reserved, retrying, dead or with an attempt record."""
        ick = Ick(self.client, key)
        for _ in range(3):
            stats = ick.stats() or {"pset_size": 0, "cset_size": 0}
            if not stats["pset_size"] and not stats["cset_size"] and not self.fates_left(key):
                self.report.dropped.append(key)
                self.call(
                    "delete_keys",
                    0,
                    partial(
                        scripts.run,
                        self.client,
                        "delete_keys",
                        IckKeys(key).fixed_keys(),
                        what=self.label,
                    ),
                )
                return
            self.requeue(key)  # a producer with the old count wrote meanwhile
            self.move_out(key)
            self.carry_out(key)
        raise IckError(
            f"{self.shard_label(key)}: members keep arriving in a shard the new layout does "
            f"not have: a producer still writes with the old count ({self.report.before}). "
            "Stop it, then run the reshard again"
        )

    def fates_left(self, key: str) -> int:
        """Retries, attempt records and dead letters shard ``key`` still holds."""
        keys = IckKeys(key)
        sizes = {"retry": self.client.zcard, "attempts": self.client.hlen}
        sizes.update(dead=self.client.zcard, deadinfo=self.client.hlen)
        return sum(
            int(self.redis("ZCARD", 0, partial(size, getattr(keys, part))))
            for part, size in sizes.items()
        )

    def record(self) -> None:
        """Record the new count, then remove the marker (the last step)."""
        self.redis("SET", 0, partial(self.client.set, shard_count_key(self.name, "ick"), self.to))
        register(self.client, self.name, "ick", self.label)
        self.unmark()

    # --- bookkeeping ---------------------------------------------------------------------

    def shard_label(self, key: str) -> str:
        return f"{self.label} shard key {key!r}"

    def call(self, what: str, items: int, fn: Callable[[], T]) -> T:
        """One bounded call (a script, retried by scripts.run), timed and reported to
        ``progress``."""
        began = time.perf_counter()
        result = fn()
        self.tick(what, items, (time.perf_counter() - began) * 1000)
        return result

    def redis(self, what: str, items: int, fn: Callable[[], T]) -> T:
        """One bounded redis-py command, retried like a script (scripts.command)."""
        return self.call(what, items, partial(scripts.command, self.client, fn, what=self.label))

    def tick(self, what: str, items: int, ms: float = 0.0) -> None:
        self.report.calls += 1
        self.report.longest_ms = max(self.report.longest_ms, round(ms, 3))
        if self.progress is not None:
            self.progress(what, items)
