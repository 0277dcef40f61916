"""The generic reservation-log stream reader (docs/design.md §4), shared by the Ick and dehydrator
sources: micro-batches are numbered reservations (claims) per shard.

A source subclasses ``ReservationStreamReader``: ``open_log(shard)`` returns the client
log of one shard (``reservations.ReservationLog``, ``claims.ClaimLog``: the ``ShardLog``
protocol of driver.py: a label, the shard's ``lease``, fenced ``reserve`` and ``commit``,
``last_committed``, ``repeated``, ``backlog``, ``read``), and ``arrow(entries, shard,
label)`` turns what ``read`` gave for a range into RecordBatches of the source's schema (on
the executors), with the reader's delivery token (deliveries, docs/design.md §11).

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
this one, so Redis and Spark work at once (ahead.py). Its reservations are past the last
offset Spark logged, as after a crash between reserve and offset log, so the next
``latestOffset`` delivers them, topped up to its limit. Two batches are then reserved at
once (the cset holds both). The batch after the backlog's last gets a job that only commits.

The lease of every shard is taken on the first driver call, renewed by every reserve and
commit and by a heartbeat thread, and released by ``stop()``. A lease that its holder
renews while this reader looks (about one heartbeat) is a live query: this one fails. A
lease whose holder stopped renewing it for 3 heartbeats and a second is a crashed query:
taken over with a new fencing token, so the crashed one's zombies can change nothing
(I5); a restart from the checkpoint resumes within seconds. Redis outages up to
redis.retryTimeout are ridden out by every call (retry.py); the heartbeat keeps trying.
Protocol points, each a call of the documented no-op hook ``protocol_point``:
after_reserve, before_read, during_read, before_commit (the crash tests kill there).

Before pyspark 4.2 (compat.ADMISSION_CONTROL false) Spark calls ``latestOffset()`` with
no start and no limit and never asks for a read limit: the reader then caps each batch
itself at ``max_per_trigger`` and starts from the last offset Spark logged as far as it
has seen (the ``end`` of the last ``partitions`` call, which Spark also makes with the
latest offset of its log when a query restarts), else from what is committed (a new
query). An offset it returned that Spark has not planned yet is returned again without
reserving more. Trigger.AvailableNow there is Spark's fallback to one batch (see
``latestOffset``).

This module is Spark's adapter; the work is in leases.py (acquire, takeover, heartbeat,
release), planning.py (shares, caps, partitions: pure functions), driver.py (the fenced
reserve and commit of every shard) and ahead.py (the job ahead).
"""

from __future__ import annotations

import importlib
import logging
import os
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ..connection import ConnectionSpec
from ..errors import IckError
from ..options import Options
from . import planning
from .ahead import Ahead
from .compat import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from .driver import Driver, ShardLog, max_rows
from .leases import Leases, stop_on_sigterm
from .planning import ShardRange, ShardRanges, group
from .task import start_task

__all__ = [
    "Ahead",
    "Offset",
    "ReservationStreamReader",
    "ShardLog",
    "ShardRange",
    "ShardRanges",
    "group",
    "protocol_point",
]

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


@dataclass(frozen=True)
class StreamOptions:
    """The options every stream source takes, validated on the driver (a source's own
    options extend them)."""

    connection: ConnectionSpec
    shards: int
    max_per_trigger: int
    min_per_partition: int
    consumer_id: str | None
    lease_ms: int

    @staticmethod
    def common(o: Options, items: str) -> dict[str, Any]:
        """The fields of StreamOptions from ``o``; ``items``: ``Members`` or ``Elements``
        (options max<items>PerTrigger, min<items>PerPartition). The shard count is
        resolved last (Options.shards asks Redis), once every option has been read."""
        fields = {
            "connection": o.connection(),
            "max_per_trigger": o.get(f"max{items}PerTrigger"),
            "min_per_partition": o.get(f"min{items}PerPartition"),
            "consumer_id": o.get("consumerId"),
            "lease_ms": o.get("leaseTimeout"),
        }
        return {**fields, "shards": o.shards()}


class ReservationStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches as numbered reservations per shard, with leases and fencing."""

    def __init__(self, opts: StreamOptions) -> None:
        self.opts = opts
        self.shards = opts.shards
        self.max_per_trigger = opts.max_per_trigger
        self.min_per_partition = opts.min_per_partition
        self.lease_ms = opts.lease_ms
        self.consumer_id = opts.consumer_id
        # Counts deliveries: the first read of a batch by this query run (every copy of
        # this reader on the executors carries it) is one delivery more; a restarted
        # query, a new reader, replays it as the next delivery (lua/log_read.lua).
        self.delivery_token = uuid.uuid4().hex
        self._reset()

    # --- what a source provides ------------------------------------------------------

    @abstractmethod
    def open_log(self, shard: int) -> ShardLog:
        """The log of ``shard`` (called on the driver and on executors)."""

    @abstractmethod
    def arrow(self, entries: Any, shard: int, label: str) -> Iterator[pa.RecordBatch]:
        """RecordBatches of ``entries``: what the shard log's ``read`` gave for a range of
        ``shard`` (executors); ``label`` names the shard and range in errors."""

    def backlog(self, shard_log: ShardLog) -> int:
        """Items that reserves would take now from the shard (the AvailableNow budget)."""
        return shard_log.backlog()

    def prepare(self) -> None:
        """Checks run once on the driver before the first call (e.g. the shard count)."""

    def backlog_report(self, logs: list[ShardLog]) -> dict[str, Any]:
        """What waits to be delivered (integers only: Spark's progress takes no floats)."""
        return {"backlog": sum(self.backlog(shard_log) for shard_log in logs)}

    # --- driver state (never pickled to executors) -----------------------------------

    def _reset(self) -> None:
        self._state: Driver | None = None
        self._latest: Offset | None = None
        self._sizes: list[int] = []  # items per shard in the last latestOffset's ranges
        self._logged: Offset | None = None  # the last end offset Spark planned
        self._initial: Offset | None = None  # what initialOffset returned
        self._ahead: Ahead | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    def _open(self) -> Driver:
        """The driver side, every lease held (taken on the first call; a lost one raised)."""
        if self._state is None:
            stop_on_sigterm()
            self.prepare()
            logs = [self.open_log(i) for i in range(self.shards)]
            owner = self.consumer_id or f"query-{uuid.uuid4().hex[:12]}"
            self._state = Driver(logs, Leases.take(logs, owner, self.lease_ms))
        self._state.leases.check()
        return self._state

    def _driver(self) -> list[ShardLog]:
        """The shard logs, with every lease held."""
        return self._open().logs

    # --- Spark's calls -----------------------------------------------------------------

    def _committed(self) -> Offset:
        return {str(i): log_.last_committed() for i, log_ in enumerate(self._driver())}

    def initialOffset(self) -> Offset:
        offset = self._initial = self._committed()
        logger.debug("initialOffset %s", offset)
        return offset

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Deliver at most what waits now (re-added members count once), then stop."""
        state = self._open()
        state.budget = [self.backlog(shard_log) for shard_log in state.logs]
        logger.debug("prepareForTriggerAvailableNow %s", state.budget)

    def latestOffset(self, start: Offset | None = None, limit: ReadLimit | None = None) -> Offset:
        """Reserve the next batch past ``start`` within ``limit``; its end offset.

        Before pyspark 4.2 Spark passes neither (see the module docstring). There its
        Trigger.AvailableNow falls back to a single batch, as Trigger.Once: one call of
        this, one batch of at most ``max_per_trigger``, or only the replay of a batch the
        checkpoint logged and did not commit.
        """
        if start is None or limit is None:
            if self._latest is not None and self._latest != self._logged:
                return self._latest  # not planned yet: no second batch ahead of Spark
            if self._logged is None:
                self._logged = self._committed()
            start, limit = self._logged, self.getDefaultReadLimit()
        state = self._open()
        after = [int(start.get(str(i), 0)) for i in range(self.shards)]
        # Spark asks for batch N+1 only once batch N is done (its commit log written), so
        # everything through `start` is acknowledged: commit it now rather than wait for
        # commit(N), which Spark delays until the next non-empty batch (docs/design.md §4). While
        # a backlog drains, the background job commits it instead, after reserving ahead.
        ahead = self._finish_ahead(after)
        if ahead is None:
            state.commit(after)
        numbers, sizes = state.reserve(after, limit, ahead)
        if isinstance(limit, ReadMaxRows):
            state.rotate()
        protocol_point("after_reserve")
        self._latest = {str(i): numbers[i] for i in range(self.shards)}
        self._sizes = sizes
        if planning.backlogged(sizes, max_rows(limit), state.budget):
            self._start_ahead(after, numbers, limit)
        elif ahead is not None:
            self._start_ahead(after, numbers)  # the commit only, while the executors read
        logger.debug("latestOffset %s %r %s", start, limit, self._latest)
        return self._latest

    def _start_ahead(self, done: list[int], end: list[int], limit: ReadLimit | None = None) -> None:
        """Start the job ahead: commit through ``done`` (Spark has finished those batches),
        then, with a ``limit``, reserve the next batch past ``end`` while the executors
        read (ahead.py)."""
        state = self._open()

        def job() -> list[int] | None:
            state.commit(done)
            return None if limit is None else state.reserve(end, limit, ahead=True)[1]

        self._ahead = Ahead(job, done, end)

    def _finish_ahead(self, after: list[int] | None = None) -> list[int] | None:
        """Wait for the job ahead (re-raising its error); None when there was none or it
        only committed, else the items it reserved past ``after``."""
        ahead, self._ahead = self._ahead, None
        return None if ahead is None else ahead.past(after)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The last offset and the backlog, for query.lastProgress["sources"][i]
        ["latestOffset"] (Spark only reports it)."""
        if self._latest is None:
            return None
        try:
            logs = self._driver()
            fates = {k: sum(log_.fates[k] for log_ in logs) for k in ("retried", "dead")}
            return {
                "reservations": self._latest,
                **self.backlog_report(logs),
                "retriedMembers": fates["retried"],
                "deadLetters": fates["dead"],
            }
        except Exception as exc:  # noqa: BLE001 - a report must not fail the query
            logger.warning("backlog report failed: %s", exc)
            return {"reservations": self._latest}

    def partitions(self, start: Offset, end: Offset) -> list[InputPartition]:
        logger.debug("partitions %s %s", start, end)
        self._logged = end
        protocol_point("before_read")
        known = end == self._latest and len(self._sizes) == self.shards
        moved = planning.ranges(start, end, self.shards)
        if not moved and end != self._latest and start == self._initial:
            self._refuse_replay(end)
        return planning.partitions(
            moved,
            self._sizes if known else None,
            self.min_per_partition,
            lambda whole: self._driver()[whole.shard].repeated() > whole.start,
        )

    def _refuse_replay(self, end: Offset) -> None:
        """Raise for a replay of the query's first batch (its start: ``initialOffset``)
        that holds no reservation: Spark logged it because its numbers moved, so someone
        else committed them since (``pyspark-ick release``, a reshard, another consumer),
        and initialOffset, which starts from what is committed, now starts past them."""
        for i, number in sorted((int(k), int(v)) for k, v in end.items()):
            if number > 0 and i < self.shards:
                raise IckError(
                    f"{self._driver()[i].label}: number {number} was committed already "
                    "(pyspark-ick release, a reshard or another consumer): this query's "
                    "checkpoint replays a batch whose reservations are gone. Start the "
                    "query with a new checkpointLocation: it delivers what is queued"
                )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        start_task()
        ranges = partition.ranges if isinstance(partition, ShardRanges) else (partition,)
        for part in ranges:
            assert isinstance(part, ShardRange)
            logger.debug("read %s %s %s", part.shard, part.start, part.end)
            rows = 0
            shard_log = self.open_log(part.shard)
            entries = shard_log.read(part.start, part.end, self.delivery_token)
            label = f"{shard_log.label} ({part.start + 1}-{part.end})"
            for batch in self.arrow(entries, part.shard, label):
                rows += batch.num_rows
                yield batch
                protocol_point("during_read")
            logger.debug("read_done %s %s", part.shard, rows)

    def commit(self, end: Offset) -> None:
        logger.debug("commit %s", end)
        state = self._open()
        protocol_point("before_commit")
        through = [int(end[str(i)]) if str(i) in end else -1 for i in range(self.shards)]
        if self._ahead is not None and self._ahead.covers(through):
            return  # the job ahead commits it
        self._finish_ahead()
        state.commit(through)

    def stop(self) -> None:
        logger.debug("stop")
        try:
            self._finish_ahead()
        except Exception as exc:  # noqa: BLE001 - what it did not do, the next query does
            logger.warning("reserving ahead failed: %s", exc)
        if self._state is not None:
            self._state.leases.release()
        self._reset()
