"""The generic reservation-log stream reader (DESIGN §4), shared by the Ick and dehydrator
sources: micro-batches are numbered reservations (claims) per shard.

A source subclasses ``ReservationStreamReader``: ``open_log(shard)`` returns the client
log of one shard (``reservations.ReservationLog``, ``dehydrator.ClaimLog``: the ``ShardLog``
protocol below: a label, the shard's ``lease``, fenced ``reserve`` and ``commit``,
``last_committed``, ``repeated``), ``arrow(shard_log, shard, start, end)`` turns reservations
``start < r <= end`` into RecordBatches of the source's schema (on the executors), and
``backlog(shard_log)`` counts the items waiting (Trigger.AvailableNow).

The protocol: offsets are ``{"<shard>": last reservation number}``; ``initialOffset`` is
the last committed number of each shard, so a new query first re-delivers what an earlier
one left open; ``latestOffset(start, limit)`` reserves per shard its share of the limit
(``ReadMaxRows`` split evenly, what a shard leaves unused goes to the others); nothing
reserved leaves the offset as it is, so Spark runs no batch; ``partitions`` gives the
shards whose number moved, grouped into partitions of at least ``min_per_partition`` items
(sizes as reserved by the last ``latestOffset``; a batch it did not reserve, e.g. a replay
after a restart, gets one partition per shard): a small batch is one task, not one wave of
tasks per shard, and a shard's big batch is read by several tasks, cut between
reservations, unless a member of it repeats (``repeated``: one task folds the copies);
``commit(end)`` commits through ``end`` per shard.
Spark calls ``commit`` of batch N after ``latestOffset`` of batch N+1, so two batches can
be open at once: that is why reservations are numbered. Spark asks ``latestOffset(start)``
only once the batch ending at ``start`` is done (its commit log written), so that call
commits through ``start`` first: the last batch is acknowledged at the next trigger
instead of waiting for the next non-empty batch (and Trigger.AvailableNow ends clean).
While a backlog drains (a batch cut by the read limit, more waiting), a job ahead in a
background thread commits instead, then reserves the next batch while the executors read
this one, so Redis and Spark work at once (bench_neighbour's 1-shard drain went from
0.61-0.69x the raw loop to 0.79-1.04x). Its reservations are past the last offset Spark
logged, as after a crash between reserve and offset log, so the next ``latestOffset``
delivers them, topped up to its limit. Two batches are then reserved at once (the cset
holds both).

The lease of every shard is taken on the first driver call, renewed by every reserve and
commit and by a heartbeat thread, and released by ``stop()``. A lease that its holder
renews while this reader looks (about one heartbeat) is a live query: this one fails. A
lease whose holder stopped renewing it for 3 heartbeats and a second is a crashed query:
taken over with a new fencing token, so the crashed one's zombies can change nothing
(I5); a restart from the checkpoint resumes within seconds. Redis outages up to
redis.retryTimeout are ridden out by every call (retry.py); the heartbeat keeps trying.
Protocol points, each a call of the documented no-op hook ``protocol_point``:
after_reserve, before_read, during_read, before_commit (the crash tests kill there).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
import time
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..errors import LeaseBusy, LeaseError
from ..lease import Fence, Lease
from ..numbered_log import Reserved

logger = logging.getLogger("pyspark_ick.stream")

Offset = dict[str, int]


HOOK = "PYSPARK_ICK_HOOK"


@cache
def _hook() -> Callable[[str], None] | None:
    spec = os.environ.get(HOOK)
    if not spec:
        return None
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def protocol_point(point: str) -> None:
    """A no-op at each point of the protocol, unless the environment variable
    PYSPARK_ICK_HOOK names a function (``module:function``) to call with the point's
    name: the crash tests kill the process there (tests/crash/faults.py)."""
    hook = _hook()
    if hook is not None:
        hook(point)


RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


_in_stop = threading.Event()  # a reader of this process is in stop()


def _exit(signum: int, frame: Any) -> None:
    if not _in_stop.is_set():  # Spark may close the socket first: stop() runs already
        raise SystemExit(128 + signum)


def stop_on_sigterm() -> None:
    """In Spark's Python stream runner, make SIGTERM run the reader's ``stop()``.

    ``query.stop()`` ends the runner process with SIGTERM, whose default action skips the
    runner's ``finally: reader.stop()``, so the leases stayed in Redis and the next query
    waited to take them over. SystemExit unwinds through that ``finally`` instead. Only in
    that process's main thread, and only if nobody handles SIGTERM already.
    """
    main = sys.modules.get("__main__")
    if (getattr(getattr(main, "__spec__", None), "name", None) == RUNNER
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _exit)


class ShardLog(Protocol):
    """One shard's reservation or claim log (see the module docstring)."""

    label: str
    lease: Lease

    def reserve(self, limit: int | None, after: int, fence: Fence) -> Reserved: ...
    def commit(self, through: int, fence: Fence) -> int: ...
    def last_committed(self) -> int: ...
    def repeated(self) -> int: ...


@dataclass(frozen=True)
class ShardRange(InputPartition):
    """One partition: reservations ``start < r <= end`` of ``shard``."""

    shard: int
    start: int
    end: int


@dataclass(frozen=True)
class ShardRanges(InputPartition):
    """One partition of several shards' ranges, read one after the other."""

    ranges: tuple[ShardRange, ...]


def group(sizes: dict[int, int], min_per_partition: int) -> list[list[int]]:
    """Pieces (keys of ``sizes``: items each; whole shards or runs of a shard's
    reservations) in ``max(1, total // min_per_partition)`` groups (at most one per piece),
    balanced greedily, largest first."""
    count = max(1, min(len(sizes), sum(sizes.values()) // max(min_per_partition, 1)))
    groups: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for shard in sorted(sizes, key=lambda i: (-sizes[i], i)):
        j = loads.index(min(loads))
        groups[j].append(shard)
        loads[j] += sizes[shard]
    return [sorted(g) for g in groups if g]


def shares(total: int, shards: int, first: int = 0) -> list[int]:
    """``total`` split over ``shards`` as evenly as possible; the remainder goes to the
    shards from ``first`` on (rotated per batch so no shard is always short)."""
    base, extra = divmod(total, shards)
    return [base + (1 if (i - first) % shards < extra else 0) for i in range(shards)]


class Ahead:
    """The driver's background job (``job()`` returns items reserved per shard): it
    commits through ``done`` and reserves past ``end``."""

    def __init__(self, job: Callable[[], list[int]], done: list[int], end: list[int]) -> None:
        self.done, self.end = done, end
        self._sizes: list[int] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(job,), daemon=True,
                                        name="pyspark-ick-ahead")
        self._thread.start()

    def _run(self, job: Callable[[], list[int]]) -> None:
        try:
            self._sizes = job()
        except BaseException as exc:  # noqa: BLE001 - re-raised by result()
            self._error = exc

    def result(self) -> list[int]:
        """Wait for the job; its sizes, or its error raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._sizes


class ReservationStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches as numbered reservations per shard, with leases and fencing."""

    def __init__(self, *, shards: int, max_per_trigger: int, lease_ms: int,
                 consumer_id: str | None, min_per_partition: int = 100_000) -> None:
        self.shards = shards
        self.max_per_trigger = max_per_trigger
        self.min_per_partition = min_per_partition
        self.lease_ms = lease_ms
        self.consumer_id = consumer_id
        self._reset()

    # --- what a source provides ------------------------------------------------------

    @abstractmethod
    def open_log(self, shard: int) -> ShardLog:
        """The log of ``shard`` (called on the driver and on executors)."""

    @abstractmethod
    def arrow(self, shard_log: Any, shard: int, start: int, end: int
              ) -> Iterator[pa.RecordBatch]:
        """RecordBatches of reservations ``start < r <= end`` of ``shard_log`` (executors)."""

    @abstractmethod
    def backlog(self, shard_log: Any) -> int:
        """Items waiting in the shard (not reserved yet)."""

    def prepare(self) -> None:
        """Checks run once on the driver before the first call (e.g. the shard count)."""

    # --- driver state (never pickled to executors) -----------------------------------

    def _reset(self) -> None:
        self._logs: list[ShardLog] | None = None
        self._fences: list[Fence] = []
        self._budget: list[int] | None = None
        self._rotation = 0
        self._latest: Offset | None = None
        self._sizes: list[int] = []  # items per shard in the last latestOffset's ranges
        self._committed: list[int] = []  # known committed number per shard (skip no-ops)
        self._lost: LeaseError | None = None
        self._ahead: Ahead | None = None
        self._stopping = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    @property
    def heartbeat_ms(self) -> int:
        """How often the heartbeat renews the leases."""
        return max(50, min(self.lease_ms // 4, 1000))

    def _driver(self) -> list[ShardLog]:
        """The shard logs, with every lease held (taken on the first call)."""
        if self._lost is not None:
            raise self._lost
        if self._logs is None:
            stop_on_sigterm()
            self.prepare()
            logs = [self.open_log(i) for i in range(self.shards)]
            owner = self.consumer_id or f"query-{uuid.uuid4().hex[:12]}"
            fences: list[Fence] = []
            try:
                for shard_log in logs:
                    fences.append(self._acquire(shard_log, owner))
            except BaseException:
                for shard_log, fence in zip(logs, fences, strict=False):
                    shard_log.lease.release(fence)
                raise
            self._logs, self._fences = logs, fences
            self._committed = [-1] * self.shards
            self._heartbeat = threading.Thread(target=self._beat, daemon=True,
                                               name="pyspark-ick-lease-heartbeat")
            self._heartbeat.start()
        return self._logs

    def _acquire(self, shard_log: ShardLog, owner: str) -> Fence:
        """The shard's lease with a new fencing token. A holder that renews its lease while
        we look is a live query: refused within about one of its renewal periods. One that
        does not is gone (a crashed query restarting from its checkpoint): taken over once
        it has been idle for 3 of its renewal periods and a second (lua/lease.lua)."""
        seen: int | None = None
        while True:
            try:
                return shard_log.lease.acquire(owner, self.lease_ms, self.heartbeat_ms)
            except LeaseBusy as busy:
                if seen is not None and busy.renewed_at != seen:
                    raise LeaseError(
                        f"{shard_log.label} is consumed by another query: consumer "
                        f"{busy.owner!r} holds its lease and renewed it {busy.idle_ms} ms ago. "
                        "Stop that query first (one consumer per shard)") from None
                if seen is None:
                    logger.warning("%s: consumer %r holds the lease, last renewed %d ms ago: "
                                "taking it over unless it renews it within %d ms",
                                shard_log.label, busy.owner, busy.idle_ms,
                                busy.gone_after_ms - busy.idle_ms)
                seen = busy.renewed_at
                beat = (busy.gone_after_ms - 1000) / 3
                wait = min(busy.gone_after_ms - busy.idle_ms, 1.5 * beat)
                time.sleep(max(wait, 10) / 1000 + 0.02)

    def _beat(self) -> None:
        while not self._stopping.wait(self.heartbeat_ms / 1000):
            for shard_log, fence in zip(self._logs or [], self._fences, strict=False):
                try:
                    shard_log.lease.renew(fence)
                except LeaseError as exc:
                    self._lost = exc
                    logger.error("%s", exc)
                    return
                except Exception as exc:  # noqa: BLE001 - Redis away for a moment: retry
                    logger.warning("%s: lease renewal failed: %s", shard_log.label, exc)

    # --- Spark's calls -----------------------------------------------------------------

    def initialOffset(self) -> Offset:
        offset = {str(i): log_.last_committed() for i, log_ in enumerate(self._driver())}
        logger.debug("initialOffset %s", offset)
        return offset

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Deliver at most what waits now (re-added members count once), then stop."""
        self._budget = [self.backlog(shard_log) for shard_log in self._driver()]
        logger.debug("prepareForTriggerAvailableNow %s", self._budget)

    def latestOffset(self, start: Offset, limit: ReadLimit) -> Offset:
        self._driver()
        after = [int(start.get(str(i), 0)) for i in range(self.shards)]
        # Spark asks for batch N+1 only once batch N is done (its commit log written), so
        # everything through `start` is acknowledged: commit it now rather than wait for
        # commit(N), which Spark delays until the next non-empty batch (DESIGN §4). While
        # a backlog drains, the background job commits it instead, after reserving ahead.
        ahead = self._finish_ahead(after)
        if ahead is None:
            self._commit(after)
        numbers, sizes = self._reserve(after, limit, ahead)
        if isinstance(limit, ReadMaxRows):
            self._rotation = (self._rotation + 1) % self.shards
        protocol_point("after_reserve")
        self._latest = {str(i): numbers[i] for i in range(self.shards)}
        self._sizes = sizes
        if self._backlogged(sizes, limit):
            self._start_ahead(after, numbers, limit)
        elif ahead is not None:
            self._commit(after)
        logger.debug("latestOffset %s %r %s", start, limit, self._latest)
        return self._latest

    def _reserve(self, after: list[int], limit: ReadLimit, held: list[int] | None = None
                 ) -> tuple[list[int], list[int]]:
        """Reserve each shard's share of ``limit`` past ``after`` (``held``: items of those
        ranges reserved and budgeted already, by the job ahead); returns (last numbers,
        items in the ranges past ``after``)."""
        logs = self._driver()
        if isinstance(limit, ReadMaxRows):
            share: list[int | None] = list(shares(limit.max_rows, self.shards, self._rotation))
        elif isinstance(limit, ReadAllAvailable):
            share = [None] * self.shards
        else:
            raise ValueError(f"read limit {limit!r} is not supported (use maxMembersPerTrigger)")
        numbers, sizes = list(after), [0] * self.shards

        def reserve(i: int, want: int | None) -> None:
            done = logs[i].reserve(self._cap(i, want, held[i] if held else 0), after[i],
                                   self._fences[i])
            numbers[i], sizes[i] = done.head, done.pending
            if self._budget is not None:
                self._budget[i] -= done.moved

        for i in range(self.shards):
            reserve(i, share[i])
        if isinstance(limit, ReadMaxRows):  # hand what some shards left unused to the others
            spare = limit.max_rows - sum(sizes)
            full = [i for i in range(self.shards) if sizes[i] == share[i] and sizes[i] > 0]
            for i, extra in zip(full, shares(spare, len(full)) if full else [], strict=False):
                if extra > 0:
                    reserve(i, sizes[i] + extra)
        return numbers, sizes

    def _cap(self, shard: int, share: int | None, held: int = 0) -> int | None:
        """``share`` within the Trigger.AvailableNow budget of ``shard`` (if any), ``held``
        items of it being budgeted already."""
        if self._budget is None:
            return share
        left = max(self._budget[shard], 0) + held
        return left if share is None else min(share, left)

    def _backlogged(self, sizes: list[int], limit: ReadLimit) -> bool:
        """Whether the batch just reserved was cut by ``limit`` with more to deliver."""
        if not isinstance(limit, ReadMaxRows) or sum(sizes) < limit.max_rows:
            return False
        return self._budget is None or any(b > 0 for b in self._budget)

    # --- the job ahead: while Spark runs batch N+1, commit N and reserve N+2 -----------

    def _start_ahead(self, done: list[int], end: list[int], limit: ReadLimit) -> None:
        """Start the background job: commit through ``done`` (Spark has finished those
        batches), then reserve the next batch past ``end``, so that Redis works while the
        executors read. The reservations it makes are past the last offset Spark logged,
        as after a crash between reserve and offset log: the next latestOffset delivers
        them (topped up to its limit), and nothing is lost if the query stops first."""

        def job() -> list[int]:
            self._commit(done)
            return self._reserve(end, limit)[1]

        self._ahead = Ahead(job, done, end)

    def _finish_ahead(self, after: list[int] | None = None) -> list[int] | None:
        """Wait for the job ahead (re-raising its error); None when there was none, else
        the items it reserved past ``after`` (none if it reserved past another offset)."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        sizes = ahead.result()
        return sizes if after == ahead.end else []

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The last offset and the backlog, for query.lastProgress["sources"][i]
        ["latestOffset"] (Spark only reports it)."""
        if self._latest is None:
            return None
        try:
            return {"reservations": self._latest, **self.backlog_report(self._driver())}
        except Exception as exc:  # noqa: BLE001 - a report must not fail the query
            logger.warning("backlog report failed: %s", exc)
            return {"reservations": self._latest}

    def backlog_report(self, logs: list[ShardLog]) -> dict[str, Any]:
        """What waits to be delivered (integers only: Spark's progress takes no floats)."""
        return {"backlog": sum(self.backlog(shard_log) for shard_log in logs)}

    def partitions(self, start: Offset, end: Offset) -> list[InputPartition]:
        logger.debug("partitions %s %s", start, end)
        protocol_point("before_read")
        ranges: dict[int, ShardRange] = {}
        for i in range(self.shards):
            first, last = int(start.get(str(i), 0)), int(end.get(str(i), 0))
            if last > first:
                ranges[i] = ShardRange(i, first, last)
        if end != self._latest or len(self._sizes) != self.shards:  # sizes unknown
            return list(ranges.values())
        pieces: list[ShardRange] = []
        sizes: dict[int, int] = {}
        for i, whole in ranges.items():
            for piece in self._split(whole, self._sizes[i]):
                sizes[len(pieces)] = self._sizes[i] * (piece.end - piece.start) // (
                    whole.end - whole.start)
                pieces.append(piece)
        groups = group(sizes, self.min_per_partition)
        return [pieces[g[0]] if len(g) == 1 else ShardRanges(tuple(pieces[j] for j in g))
                for g in groups]

    def _split(self, whole: ShardRange, size: int) -> list[ShardRange]:
        """``whole`` in consecutive pieces of about ``min_per_partition`` items, so that
        one shard's big batch is read by several tasks; whole when an item of it repeats
        (re-added in flight and reserved again: one reader folds the copies)."""
        numbers = whole.end - whole.start
        count = min(numbers, size // max(self.min_per_partition, 1))
        if count < 2 or self._driver()[whole.shard].repeated() > whole.start:
            return [whole]
        cuts = [whole.start + numbers * k // count for k in range(count + 1)]
        return [ShardRange(whole.shard, a, b) for a, b in pairwise(cuts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        ranges = partition.ranges if isinstance(partition, ShardRanges) else (partition,)
        for part in ranges:
            assert isinstance(part, ShardRange)
            logger.debug("read %s %s %s", part.shard, part.start, part.end)
            rows = 0
            shard_log = self.open_log(part.shard)
            for batch in self.arrow(shard_log, part.shard, part.start, part.end):
                rows += batch.num_rows
                yield batch
                protocol_point("during_read")
            logger.debug("read_done %s %s", part.shard, rows)

    def commit(self, end: Offset) -> None:
        logger.debug("commit %s", end)
        self._driver()
        protocol_point("before_commit")
        through = [int(end[str(i)]) if str(i) in end else -1 for i in range(self.shards)]
        if self._ahead is not None and all(t <= d for t, d in zip(through, self._ahead.done,
                                                                  strict=True)):
            return  # the job ahead commits it
        self._finish_ahead()
        self._commit(through)

    def _commit(self, through: list[int]) -> None:
        """Commit each shard through its number, skipping what this reader committed
        already (an idle trigger then costs no commit round trips)."""
        logs = self._driver()
        for i, shard_log in enumerate(logs):
            if through[i] > self._committed[i]:
                shard_log.commit(through[i], self._fences[i])
                self._committed[i] = through[i]

    def stop(self) -> None:
        logger.debug("stop")
        _in_stop.set()
        try:
            self._finish_ahead()
        except Exception as exc:  # noqa: BLE001 - what it did not do, the next query does
            logger.warning("reserving ahead failed: %s", exc)
        self._stopping.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
        for shard_log, fence in zip(self._logs or [], self._fences, strict=False):
            try:
                shard_log.lease.release(fence)
            except Exception as exc:  # noqa: BLE001 - it expires by itself anyway
                logger.warning("%s: could not release the lease: %s", shard_log.label, exc)
        self._reset()
