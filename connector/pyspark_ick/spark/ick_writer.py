"""The "ick" sink: ``df.write.format("ick")`` and ``df.writeStream.format("ick")``.

On the driver, ``batch_writer``/``stream_writer`` validate every option and the schema,
check the shard count recorded in Redis and (``mode("overwrite")``) empty the logical Ick,
all before any task runs. Each task then converts its Arrow batches column-wise (member
to string, score to seconds since the epoch as a double, invalid rows found by compute
kernels), groups them by shard and adds them with one pipelined round trip per Arrow batch
(ickadd calls of ``chunkSize`` members; ickadd_now, scored with Redis server time, when the
DataFrame has no score column).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from .. import scripts
from ..connection import ConnectionSpec
from ..errors import IckConfigError, IckError
from ..ick import ShardedIck, pack_buffers
from ..keys import shard_of
from ..options import ICK_WRITE, Options

FORMAT = "ick"
CHUNK_SIZE = 1000  # members per ickadd call: 1000-8000 measured alike (bench_writer.py), and
# smaller calls block Redis for less time
MAX_CHUNK_SIZE = scripts.ITEMS_PER_CALL  # bounded work per call: Redis is shared

log = logging.getLogger("pyspark_ick")

# Types whose Arrow string form equals Spark's CAST(... AS STRING)
MEMBER_TYPES = (StringType, ByteType, ShortType, IntegerType, LongType, BooleanType,
                DecimalType, DateType, BinaryType, NullType)
NUMERIC_SCORES = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType,
                  DecimalType)
TIME_SCORES = (TimestampType, TimestampNTZType)


@dataclass(frozen=True)
class IckSink:
    """A validated write plan: where to write and how to read the columns (picklable)."""

    connection: ConnectionSpec
    ick: str
    shards: int
    member: str
    score: str | None  # None: Redis server time at the add
    skip_invalid: bool
    chunk: int

    def sharded(self) -> ShardedIck:
        """The logical Ick, through this process's client."""
        return ShardedIck(self.connection.client(), self.ick, self.shards)


@dataclass
class IckCommitMessage(WriterCommitMessage):
    """What one task did: rows seen, members new to a pset, lowered scores, rows skipped."""

    rows: int = 0
    new: int = 0
    changed: int = 0
    skipped: int = 0

    def __add__(self, other: IckCommitMessage) -> IckCommitMessage:
        return IckCommitMessage(self.rows + other.rows, self.new + other.new,
                                self.changed + other.changed, self.skipped + other.skipped)

    def __str__(self) -> str:
        return (f"{self.rows} rows: {self.new} new, {self.changed} changed, "
                f"{self.skipped} skipped")


# --- the driver: options, schema, Redis checks -----------------------------------------


def _column(schema: StructType, name: str) -> str | None:
    """The schema's name for column ``name`` (exact, else case-insensitive), or None."""
    names = schema.fieldNames()
    if name in names:
        return name
    found = [n for n in names if n.lower() == name.lower()]
    return found[0] if len(found) == 1 else None


def _type(schema: StructType, column: str) -> DataType:
    return schema[column].dataType


def plan(options: Mapping[str, Any], schema: StructType) -> IckSink:
    """Validate options and schema; raises IckConfigError naming the option or column."""
    opts = Options(options, FORMAT, ICK_WRITE)
    connection = opts.connection()
    ick = opts.name("ick")
    shards = opts.integer("shards", minimum=1, maximum=16384)
    skip = opts.choice("onInvalid", ("fail", "skip"), "fail") == "skip"
    chunk = opts.integer("chunkSize", minimum=1, maximum=MAX_CHUNK_SIZE)
    columns = ", ".join(schema.fieldNames()) or "none"

    wanted = opts.string("memberColumn", "member") or "member"
    member = _column(schema, wanted)
    if member is None:
        raise IckConfigError(
            f"format('ick'): member column {wanted!r} not found (columns: {columns}); "
            "set option 'memberColumn'"
        )
    kind = _type(schema, member)
    if not isinstance(kind, MEMBER_TYPES):
        raise IckConfigError(
            f"format('ick'): member column {member!r} has type {kind.simpleString()}; "
            "expected string, integer, boolean, decimal, date or binary: cast it first, "
            f"e.g. selectExpr(\"CAST({member} AS STRING) AS {member}\")"
        )

    wanted_score = opts.string("scoreColumn")
    score = _column(schema, wanted_score or "score")
    if score is None and wanted_score:
        raise IckConfigError(
            f"format('ick'): score column {wanted_score!r} not found (columns: {columns}); "
            "leave option 'scoreColumn' out to score with Redis server time"
        )
    if score is not None:
        kind = _type(schema, score)
        if not isinstance(kind, NUMERIC_SCORES + TIME_SCORES):
            raise IckConfigError(
                f"format('ick'): score column {score!r} has type {kind.simpleString()}; "
                "expected a numeric or timestamp column"
            )
    return IckSink(connection, ick, shards, member, score, skip, chunk)


def prepare(sink: IckSink, overwrite: bool) -> None:
    """Check the recorded shard count; with ``overwrite``, empty every shard first."""
    sharded = sink.sharded()
    sharded.check_shards()  # a different count fails before anything is deleted
    if overwrite:
        sharded.unlink()
        sharded.check_shards()  # record the count again


def batch_writer(options: Mapping[str, Any], schema: StructType, overwrite: bool
                 ) -> DataSourceArrowWriter:
    """The writer of ``df.write.format("ick")``: validated, Redis checked, on the driver."""
    sink = plan(options, schema)
    prepare(sink, overwrite)
    return IckBatchWriter(sink)


def stream_writer(options: Mapping[str, Any], schema: StructType, overwrite: bool
                  ) -> DataSourceStreamArrowWriter:
    """The writer of ``df.writeStream.format("ick")`` (output modes append and update)."""
    if overwrite:
        raise IckConfigError(
            "format('ick'): outputMode('complete') is not supported: it would empty the "
            "Ick on every micro-batch; use append or update"
        )
    sink = plan(options, schema)
    prepare(sink, False)
    return IckStreamWriter(sink)


# --- the tasks: Arrow batches to pipelined ickadd --------------------------------------


def member_strings(column: pa.Array, name: str) -> pa.Array:
    """The members' string form (binary must be UTF-8)."""
    if pa.types.is_string(column.type):
        return column
    if pa.types.is_large_string(column.type):
        return column.cast(pa.string())
    try:
        return pc.cast(column, pa.string())
    except pa.ArrowInvalid as exc:
        raise IckError(f"format('ick'): member column {name!r}: {exc}") from None


def score_seconds(column: pa.Array) -> pa.Array:
    """Scores as float64; timestamps as seconds since the epoch."""
    if pa.types.is_timestamp(column.type):
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
        ticks = pc.cast(pc.cast(column, pa.int64()), pa.float64())
        return pc.divide(ticks, float(per_second[column.type.unit]))
    return pc.cast(column, pa.float64())


def _count(mask: pa.Array) -> int:
    return int(pc.sum(mask).as_py() or 0)


def convert(batch: pa.RecordBatch, sink: IckSink) -> tuple[pa.Array, pa.Array | None, int]:
    """Members (string), scores (float64 or None) and how many invalid rows were dropped.

    Raises IckError naming the column and the count when invalid rows are not skipped,
    before anything of the batch is written.
    """
    members = member_strings(batch.column(sink.member), sink.member)
    bad_member = pc.is_null(members)
    problems = []
    if n := _count(bad_member):
        problems.append(f"column {sink.member!r} has {n} null value{'s' * (n != 1)}")
    bad = bad_member
    scores = None
    if sink.score is not None:
        scores = score_seconds(batch.column(sink.score))
        bad_score = pc.invert(pc.fill_null(pc.is_finite(scores), False))
        if n := _count(bad_score):
            problems.append(f"column {sink.score!r} has {n} null, NaN or infinite "
                            f"value{'s' * (n != 1)}")
        bad = pc.or_(bad, bad_score)
    if not problems:
        return members, scores, 0
    if not sink.skip_invalid:
        raise IckError(
            f"format('ick') into Ick {sink.ick!r}: {'; '.join(problems)} in a batch of "
            f"{batch.num_rows} rows (onInvalid=fail; set onInvalid=skip to drop them)"
        )
    keep = pc.invert(bad)
    skipped = batch.num_rows - _count(keep)
    return (members.filter(keep), scores.filter(keep) if scores is not None else None,
            skipped)


def split(members: pa.Array, scores: pa.Array | None, shards: int
          ) -> dict[int, tuple[pa.Array, pa.Array | None]]:
    """``{shard: (members, scores)}``: the columns sorted by shard and sliced (no copies)."""
    if shards == 1:
        return {0: (members, scores)}
    ids = pa.array([shard_of(m, shards) for m in members.to_pylist()], pa.int32())
    order = pc.sort_indices(ids)  # stable
    members = members.take(order)
    scores = None if scores is None else scores.take(order)
    out: dict[int, tuple[pa.Array, pa.Array | None]] = {}
    start = 0
    for shard, count in sorted(Counter(ids.to_pylist()).items()):
        out[shard] = (members.slice(start, count),
                      None if scores is None else scores.slice(start, count))
        start += count
    return out


def string_buffers(members: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and UTF-8 bytes of a string array, as numpy views of Arrow's buffers."""
    _, offsets, data = members.buffers()
    first = members.offset
    return (np.frombuffer(offsets, np.int32)[first:first + len(members) + 1],
            np.empty(0, np.uint8) if data is None else np.frombuffer(data, np.uint8))


def add(sharded: ShardedIck, members: pa.Array, scores: pa.Array | None, chunk: int
        ) -> tuple[int, int]:
    """Add one batch's rows to their shards in one round trip; returns (new, changed)."""
    parts = split(members, scores, sharded.shards)
    if scores is None:
        return sharded.add_groups({i: (m.to_pylist(), None) for i, (m, _) in parts.items()},
                                  chunk)
    return sharded.add_packed({
        i: pack_buffers(*string_buffers(m), s.to_numpy(zero_copy_only=False), chunk)
        for i, (m, s) in parts.items() if s is not None
    })


def write_batches(sink: IckSink, batches: Iterable[pa.RecordBatch]) -> IckCommitMessage:
    """Add every row of ``batches``: one pipelined round trip per Arrow batch.

    A helper thread sends each batch, so the task reads and checks the next batch while
    Redis works on the last one (at most two batches in memory).
    """
    sharded = sink.sharded()
    done = IckCommitMessage()
    with ThreadPoolExecutor(1, thread_name_prefix="ick-writer") as sender:
        last: tuple[Future[tuple[int, int]], int, int] | None = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            members, scores, skipped = convert(batch, sink)
            sent = (sender.submit(add, sharded, members, scores, sink.chunk), batch.num_rows,
                    skipped)
            if last is not None:
                done += IckCommitMessage(last[1], *last[0].result(), last[2])
            last = sent
        if last is not None:
            done += IckCommitMessage(last[1], *last[0].result(), last[2])
    return done


def totals(messages: Sequence[WriterCommitMessage | None]) -> tuple[IckCommitMessage, int]:
    """The sum of the tasks' messages and how many tasks sent none (failed)."""
    total = IckCommitMessage()
    missing = 0
    for message in messages:
        if isinstance(message, IckCommitMessage):
            total += message
        else:
            missing += 1
    return total, missing


class IckBatchWriter(DataSourceArrowWriter):
    """``df.write.format("ick")``: ickadd is idempotent, so a retried task is harmless."""

    def __init__(self, sink: IckSink) -> None:
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> IckCommitMessage:
        return write_batches(self.sink, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total, _ = totals(messages)
        log.info("format('ick') wrote to Ick %r (%d shards) in %d tasks: %s",
                 self.sink.ick, self.sink.shards, len(messages), total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total, failed = totals(messages)
        log.warning("format('ick') write to Ick %r aborted, %d of %d tasks failed; the "
                    "others wrote %s (ickadd is idempotent: running the write again is safe)",
                    self.sink.ick, failed, len(messages), total)


class IckStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("ick")``, output modes append and update.

    Replays are harmless: a micro-batch re-run after a failure or a restart from the
    checkpoint adds the same (member, score) pairs again, and ickadd is idempotent (a
    member already queued keeps the lower score), so a replay changes nothing. Rows
    scored with Redis server time (no score column) are re-added with a later time,
    which the lower-score rule folds away.
    """

    def __init__(self, sink: IckSink) -> None:
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> IckCommitMessage:
        return write_batches(self.sink, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, _ = totals(messages)
        log.info("format('ick') batch %d wrote to Ick %r (%d shards) in %d tasks: %s",
                 batchId, self.sink.ick, self.sink.shards, len(messages), total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, failed = totals(messages)
        log.warning("format('ick') batch %d to Ick %r aborted, %d of %d tasks failed; the "
                    "others wrote %s (a replay of the batch is harmless)",
                    batchId, self.sink.ick, failed, len(messages), total)
