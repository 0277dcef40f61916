"""Readers of format("ick"): the stream reader (reservations as micro-batches), and the
columns and options of both readers.

``spark.readStream.format("ick")`` yields ``member string, score double, shard int,
reservation long`` (STREAM_SCHEMA; ``member binary`` with option ``memberType=binary``:
members are binary-safe Redis strings, and one that is not UTF-8 fails a string read,
naming it, before anything of its batch is committed); the protocol is the generic one of
source.py over the reservation log of reservations.py.

``spark.read.format("ick")`` is a non-destructive snapshot of both sets (ick_snapshot.py).
Spark asks the data source for its schema without saying whether it reads a batch or a
stream, so the default schema is STREAM_SCHEMA; a batch read returns whichever of the
columns ``member, score, shard, reservation, state`` (SNAPSHOT_SCHEMA) the schema names.

Options: connection options (redis.*), ``ick`` (required), ``shards`` (default: the count
recorded in Redis, else 1),
``memberType`` (``string`` | ``binary``),
``maxMembersPerTrigger`` (default 500000, split across shards), ``consumerId``,
``leaseTimeout`` (default ``60s``), ``minMembersPerPartition`` (default 100000: a
micro-batch is read in ``max(1, members // this)`` tasks, a shard's big batch by several),
``backfillShare`` (default 0.1: the part of a batch kept for the backfill lane while live
members wait, docs/design.md §2.1).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from .. import freshness
from ..columns import utf8
from ..errors import IckConfigError, ShardCountError
from ..keys import shard_names
from ..numbered_log import Manifest
from ..observe import age, server_time
from ..option_table import ICK_STREAM
from ..options import Options
from ..reservations import ReservationLog
from ..retries import RetryPolicy
from ..sharded import ShardedIck
from ..words import plural
from .source import Offset, ReservationStreamReader, StreamOptions


def member_type(binary: bool) -> DataType:
    """The type of the member column: binary with ``memberType=binary``, else string."""
    return BinaryType() if binary else StringType()


def stream_schema(binary: bool = False) -> StructType:
    """``member string|binary, score double, shard int, reservation long, deliveries int,
    attempt int``."""
    return StructType(
        [
            StructField("member", member_type(binary), False),
            StructField("score", DoubleType(), False),
            StructField("shard", IntegerType(), False),
            StructField("reservation", LongType(), True),  # a snapshot's queued members: null
            StructField("deliveries", IntegerType(), False),
            StructField("attempt", IntegerType(), False),
        ]
    )


def snapshot_columns(binary: bool = False) -> dict[str, DataType]:
    """The columns a batch read can return, by name."""
    return {
        "member": member_type(binary),
        "score": DoubleType(),
        "shard": IntegerType(),
        "reservation": LongType(),
        "deliveries": IntegerType(),
        "attempt": IntegerType(),
        "state": StringType(),
    }


def snapshot_schema(binary: bool = False) -> StructType:
    """Every column of a batch read (``state`` too), all nullable."""
    return StructType([StructField(n, t, True) for n, t in snapshot_columns(binary).items()])


STREAM_SCHEMA = stream_schema()
SNAPSHOT_SCHEMA = snapshot_schema()
ARROW_TYPES = {
    "member": pa.string(),
    "score": pa.float64(),
    "shard": pa.int32(),
    "reservation": pa.int64(),
    "deliveries": pa.int32(),
    "attempt": pa.int32(),
    "state": pa.string(),
}
ROWS_PER_BATCH = 65536


def options_binary(opts: Options) -> bool:
    """Whether option ``memberType`` is ``binary``."""
    return bool(opts.get("memberType") == "binary")


def retry_policy(o: Options) -> RetryPolicy:
    """Options ``maxAttempts``, ``retryBackoff`` and ``retryBackoffMax`` as a RetryPolicy
    (IckConfigError naming the option for a value it cannot take, e.g. ``"0"``)."""
    return RetryPolicy(o.get("maxAttempts"), o.get("retryBackoff"), o.get("retryBackoffMax"))


@dataclass(frozen=True)
class ReaderOptions(StreamOptions):
    """The options of the ick readers, validated on the driver."""

    ick: str
    binary: bool  # memberType=binary
    policy: RetryPolicy  # maxAttempts, retryBackoff, retryBackoffMax
    backfill_share: float = 0.1  # backfillShare

    @classmethod
    def parse(cls, raw: Any, use: str | tuple[str, ...] = ICK_STREAM) -> ReaderOptions:
        o = Options(raw, "ick", use)
        stream = Options(raw, "ick")  # checked as ``use``: a batch read has no stream options
        ick, binary = o.get("ick"), options_binary(o)
        policy = retry_policy(stream)
        share = stream.get("backfillShare")
        return cls(
            **StreamOptions.common(stream, "Members"),
            ick=ick,
            binary=binary,
            policy=policy,
            backfill_share=share,
        )

    def sharded(self) -> ShardedIck:
        return ShardedIck(self.connection.client(), self.ick, self.shards)

    def label(self, shard: int) -> str:
        key = shard_names(self.ick, self.shards)[shard]
        return f"Ick {self.ick!r} shard {shard}" + (f" (key {key!r})" if key != self.ick else "")


def arrow_batches(
    entries: Sequence[Manifest],
    shard: int,
    binary: bool = False,
    label: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """Rows of ``stream_schema(binary)`` from the reservations of a range, by score.

    A member in several reservations of the range (re-added while in flight and reserved
    again) appears once: with its lowest score, the first dirty time this delivery covers,
    and the highest reservation, the one made after its latest add. ``attempt`` is 1 plus
    the member's failed attempts. Without ``binary``, a member that is not UTF-8 raises
    IckError (``label`` names the shard) before any row is yielded: the batch fails, so
    its reservations stay until a read delivers them.
    """
    members: list[Any] = []
    scores: list[Any] = []
    for entry in entries:
        members += entry.items[0::2]
        scores += entry.items[1::2]
    if not members:
        return
    counts = [len(entry.items) // 2 for entry in entries]
    numbers = np.repeat(np.array([e.number for e in entries], np.int64), counts)
    column = pa.array(members, pa.binary())
    if not binary:
        column = utf8(
            column,
            label or f"Ick shard {shard}",
            lambda i, member: f"member {member!r} (reservation {numbers[i]})",
            "memberType",
            "reservation",
        )
    table = pa.table(
        {
            "member": column,
            "score": pc.cast(pa.array(scores, pa.binary()).cast(pa.string()), pa.float64()),
            "reservation": pa.array(numbers),
            "deliveries": pa.array(
                np.repeat(np.array([e.deliveries for e in entries], np.int32), counts)
            ),
            "attempt": pa.array(attempts(entries, counts)),
        }
    )
    if len(entries) > 1 and len(set(members)) < len(members):
        highest = ("reservation", "deliveries", "attempt")
        folded = table.group_by("member", use_threads=False).aggregate(
            [("score", "min"), *((name, "max") for name in highest)]
        )
        table = pa.table(
            {
                "member": folded["member"],
                "score": folded["score_min"],
                **{name: folded[f"{name}_max"] for name in highest},
            }
        )
    if len(entries) > 1:
        table = table.sort_by([("score", "ascending"), ("member", "ascending")])
    table = table.add_column(2, "shard", pa.array(np.full(table.num_rows, shard, np.int32)))
    yield from table.cast(arrow_schema(stream_schema(binary))).to_batches(ROWS_PER_BATCH)


def attempts(entries: Sequence[Manifest], counts: list[int]) -> Any:
    """The ``attempt`` column of ``entries`` (``counts`` rows each): 1 plus each member's
    failed attempts."""
    if not any(entry.attempts for entry in entries):
        return np.ones(sum(counts), np.int32)
    failed = [entry.attempts or [0] * count for entry, count in zip(entries, counts, strict=True)]
    return np.concatenate([np.array(f, np.int32) for f in failed]) + 1


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of ``schema`` (columns of ``snapshot_columns``), nullability
    included: Spark refuses batches whose nullability differs from the schema it asked for."""
    return pa.schema(
        [
            (
                f.name,
                pa.binary() if isinstance(f.dataType, BinaryType) else ARROW_TYPES[f.name],
                f.nullable,
            )
            for f in schema.fields
        ]
    )


class IckStreamReader(ReservationStreamReader):
    """``spark.readStream.format("ick")``."""

    opts: ReaderOptions

    def prepare(self) -> None:
        self.opts.sharded().check_shards()

    def backlog_report(self, logs: list[Any]) -> dict[str, Any]:
        """Members queued (both lanes; the backfill's apart too), the age of the oldest
        live one (when scores are Unix times), and how long the members committed in the
        last window waited (freshness.py)."""
        sharded = self.opts.sharded()
        stats = [sharded.shard(i).stats() or {} for i in range(self.shards)]
        lows = [s["pset_min"] for s in stats if s.get("pset_min") is not None]
        report: dict[str, Any] = {
            "backlog": sum(s.get("pset_size", 0) for s in stats),
            "backfillBacklog": sum(s.get("backfill_size", 0) for s in stats),
        }
        now = server_time(sharded.client)
        oldest = age(now, min(lows)) if lows else None
        if oldest is not None:
            report["oldestQueuedAgeMs"] = round(oldest * 1000)
        fresh = freshness.combined(
            freshness.read(sharded.client, sharded.shard(i).key, now, sharded.label)
            for i in range(self.shards)
        ).summary()
        report["freshnessCount"] = fresh["fresh_count"]
        for name, key in (("freshnessP50Ms", "fresh_p50_s"), ("freshnessP99Ms", "fresh_p99_s")):
            seconds = fresh[key]
            if seconds is not None:
                report[name] = round(seconds * 1000)
        return report

    def open_log(self, shard: int) -> ReservationLog:
        log = ReservationLog(
            self.opts.connection.client(),
            shard_names(self.opts.ick, self.opts.shards)[shard],
            self.opts.label(shard),
        )
        log.policy = self.opts.policy
        log.backfill_share = self.opts.backfill_share
        return log

    def arrow(self, entries: list[Manifest], shard: int, label: str) -> Iterator[pa.RecordBatch]:
        return arrow_batches(entries, shard, self.opts.binary, label)

    # Offsets of a checkpoint name reservation numbers of the shards it was written with:
    # after a reshard they name shards of another layout, whose reservations went back to
    # the queue. Refused before any of them is read or committed.

    def latestOffset(self, start: Offset | None = None, limit: Any = None) -> Offset:
        self.check_offset(start)
        return super().latestOffset(start, limit)

    def partitions(self, start: Offset, end: Offset) -> list[InputPartition]:
        self.check_offset(start)
        self.check_offset(end)
        return super().partitions(start, end)

    def commit(self, end: Offset) -> None:
        self.check_offset(end)
        super().commit(end)

    def check_offset(self, offset: Offset | None) -> None:
        """ShardCountError when ``offset`` (from the checkpoint) names other shards."""
        if offset is None or set(offset) == {str(i) for i in range(self.shards)}:
            return
        raise ShardCountError(
            f"Ick {self.opts.ick!r}: the query's checkpoint names {plural(len(offset), 'shard')} "
            f"({sorted(offset, key=int)}), but the Ick has {self.shards}: it was resharded. "
            "A checkpoint's offsets are reservation numbers of the old shards, whose "
            "reservations the reshard put back into the queue: start the query with a new "
            "checkpointLocation (it delivers them)"
        )


def stream_reader(options: Any, schema: StructType) -> IckStreamReader:
    """The stream reader; the schema must be ``stream_schema()`` (per option memberType)."""
    opts = ReaderOptions.parse(options)
    expected = stream_schema(opts.binary)
    if [f.name for f in schema.fields] != expected.fieldNames() or schema[
        "member"
    ].dataType != expected["member"].dataType:
        raise IckConfigError(
            "format('ick') readStream has the fixed schema "
            f"{expected.simpleString()} (option memberType), got "
            f"{schema.simpleString()}"
        )
    return IckStreamReader(opts)
