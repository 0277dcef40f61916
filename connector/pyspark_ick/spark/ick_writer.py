"""The "ick" sink: ``df.write.format("ick")`` and ``df.writeStream.format("ick")``.

On the driver, ``batch_writer``/``stream_writer`` validate every option and the schema
into an ``IckSink`` plan, check the shard count recorded in Redis and
(``mode("overwrite")``) empty the logical Ick, all before any task runs. The sink of
sink.py runs the tasks: each Arrow batch is converted column-wise (member to string, a
binary member as it is; score to seconds since the epoch as a double; invalid rows found
by compute kernels), grouped by shard and added in bounded calls (ickadd of ``chunkSize``
members; ickadd_now, scored with Redis server time, when the DataFrame has no score
column). Option ``lane=backfill`` moves the scores into the backfill lane's band
(lanes.py; ickadd_backfill without a score column).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
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

from ..columns import pack_pairs
from ..errors import IckConfigError, IckError
from ..keys import shard_of
from ..lanes import BACKFILL_OFFSET, Lane, band_error
from ..option_table import ICK_WRITE
from ..options import Options
from ..sharded import ShardedIck
from .sink import BatchWriter, Counts, StreamWriter, Target

FORMAT = "ick"

# Types whose Arrow string form equals Spark's CAST(... AS STRING)
MEMBER_TYPES = (
    StringType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    BooleanType,
    DecimalType,
    DateType,
    BinaryType,
    NullType,
)
NUMERIC_SCORES = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)
TIME_SCORES = (TimestampType, TimestampNTZType)


@dataclass
class IckCommitMessage(Counts):
    """What one task did: rows seen, members new to a pset, lowered scores, rows skipped."""

    new: int = 0
    changed: int = 0
    skipped: int = 0

    def warning(self) -> str | None:
        if not self.skipped:
            return None
        return (
            f"{self.skipped} of {self.rows} rows skipped (onInvalid=skip: a null member, or a "
            "null or NaN score); they were not added"
        )


@dataclass(frozen=True)
class IckSink(Target):
    """A validated write plan: where to write and how to read the columns (picklable)."""

    member: str
    score: str | None  # None: Redis server time at the add
    skip_invalid: bool
    lane: Lane = "live"  # option lane

    kind: ClassVar[str] = "Ick"
    replay: ClassVar[str] = "ickadd is idempotent: writing the same rows again is safe"
    message: ClassVar[type[IckCommitMessage]] = IckCommitMessage

    def sharded(self) -> ShardedIck:
        """The logical Ick, through this process's client."""
        return ShardedIck(self.connection.client(), self.name, self.shards)

    def convert(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array | None, int, int]:
        """Members, scores (None: server time), invalid rows skipped, and rows."""
        members, scores, skipped = convert(batch, self)
        return members, scores, skipped, batch.num_rows

    def send(self, converted: tuple[pa.Array, pa.Array | None, int, int]) -> IckCommitMessage:
        members, scores, skipped, rows = converted
        return IckCommitMessage(
            rows, *add(self.sharded(), members, scores, self.chunk, self.lane), skipped
        )


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
    ick = opts.get("ick")
    skip = opts.get("onInvalid") == "skip"
    chunk = opts.get("chunkSize")
    columns = ", ".join(schema.fieldNames()) or "none"

    wanted = opts.get("memberColumn")
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
            f'e.g. selectExpr("CAST({member} AS STRING) AS {member}")'
        )

    wanted_score = opts.get("scoreColumn")
    score = _column(schema, wanted_score)
    if score is None and opts.has("scoreColumn"):
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
    lane = opts.get("lane")
    return IckSink(connection, ick, opts.shards(), chunk, member, score, skip, lane)


def prepare(sink: IckSink, overwrite: bool) -> None:
    """Check the recorded shard count; with ``overwrite``, empty every shard first."""
    sharded = sink.sharded()
    sharded.check_shards()  # a different count fails before anything is deleted
    if overwrite:
        sharded.unlink()
        sharded.check_shards()  # record the count again


def batch_writer(options: Mapping[str, Any], schema: StructType, overwrite: bool) -> BatchWriter:
    """The writer of ``df.write.format("ick")``: validated, Redis checked, on the driver."""
    sink = plan(options, schema)
    prepare(sink, overwrite)
    return BatchWriter(sink)


def stream_writer(options: Mapping[str, Any], schema: StructType, overwrite: bool) -> StreamWriter:
    """The writer of ``df.writeStream.format("ick")`` (output modes append and update).
    A replayed micro-batch adds the same pairs again, which folds; rows scored with Redis
    server time are re-added with a later time, which the lower-score rule folds away."""
    if overwrite:
        raise IckConfigError(
            "format('ick'): outputMode('complete') is not supported: it would empty the "
            "Ick on every micro-batch; use append or update"
        )
    sink = plan(options, schema)
    prepare(sink, False)
    return StreamWriter(sink, schema)


# --- the tasks: Arrow batches to ickadd calls -------------------------------------------


def member_strings(column: pa.Array, name: str) -> pa.Array:
    """The members' string form; a binary column as it is (its bytes are the members)."""
    if pa.types.is_string(column.type) or pa.types.is_binary(column.type):
        return column
    if pa.types.is_large_string(column.type):
        return column.cast(pa.string())
    if pa.types.is_large_binary(column.type):
        return column.cast(pa.binary())
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
    """Members (string or binary), scores (float64 or None) and how many invalid rows were
    dropped.

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
        # -inf and +inf are scores ZADD (and the gem's ickadd) take; null and NaN are not
        bad_score = pc.fill_null(pc.is_nan(scores), True)
        if n := _count(bad_score):
            problems.append(f"column {sink.score!r} has {n} null or NaN value{'s' * (n != 1)}")
        bad = pc.or_(bad, bad_score)
    if scores is not None and sink.score is not None:
        scores = in_lane(scores, sink.score, sink.lane, sink.name)
    if not problems:
        return members, scores, 0
    if not sink.skip_invalid:
        raise IckError(
            f"format('ick') into Ick {sink.name!r}: {'; '.join(problems)} in a batch of "
            f"{batch.num_rows} rows (onInvalid=fail; set onInvalid=skip to drop them)"
        )
    keep = pc.invert(bad)
    skipped = batch.num_rows - _count(keep)
    return (members.filter(keep), scores.filter(keep) if scores is not None else None, skipped)


def in_lane(scores: pa.Array, column: str, lane: Lane, ick: str) -> pa.Array:
    """``scores`` (nulls and NaN still in) as queued in ``lane``: the backfill's moved into
    its band. A score the lane cannot take (lanes.band_error) raises IckError naming the
    column and option ``lane``, whatever onInvalid says: the rows are valid, the lane not."""
    live = lane == "live"
    if live:
        bad = pc.and_(pc.greater_equal(scores, BACKFILL_OFFSET), pc.is_finite(scores))
    else:
        bad = pc.invert(pc.and_(pc.greater_equal(scores, 0.0), pc.less(scores, BACKFILL_OFFSET)))
        bad = pc.and_(bad, pc.invert(pc.is_nan(scores)))  # NaN: onInvalid's
    bad = pc.fill_null(bad, False)
    if n := _count(bad):
        first = scores.filter(bad)[0].as_py()
        error = band_error(lane, first, f"format('ick') score column {column!r}", "option 'lane'")
        raise IckError(f"Ick {ick!r}: {n} row{'s' * (n != 1)}: {error}")
    return scores if live else pc.add(scores, BACKFILL_OFFSET)


def by_shard(
    members: pa.Array, scores: pa.Array | None, shards: int
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
        out[shard] = (
            members.slice(start, count),
            None if scores is None else scores.slice(start, count),
        )
        start += count
    return out


def add(
    sharded: ShardedIck,
    members: pa.Array,
    scores: pa.Array | None,
    chunk: int,
    lane: Lane = "live",
) -> tuple[int, int]:
    """Add one batch's rows to their shards (``scores`` in their lane already, ``None``:
    Redis server time in ``lane``); returns (new, changed)."""
    parts = by_shard(members, scores, sharded.shards)
    if scores is None:
        groups = {i: (m.to_pylist(), None) for i, (m, _) in parts.items()}
        return sharded.add_groups(groups, chunk, lane)
    return sharded.add_packed(
        {i: pack_pairs(m, s, chunk) for i, (m, s) in parts.items() if s is not None}
    )
