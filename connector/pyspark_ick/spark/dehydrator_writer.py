"""The "dehydrator" sink: ``df.write.format("dehydrator")`` and its streaming twin.

Columns ``element`` (string or binary), optional ``id`` (string, integer or binary: bytes
parked as they are) and the due time from exactly one of option ``delay``, column
``delayMs`` or column ``releaseAt`` (timestamp). Options and schema are validated and the
shard count checked on the driver (``prepare``); the sink of sink.py then parks each
task's rows in bounded dh_push calls. Without an ``id`` column the id is a hash of the
element: a retried task or a replayed micro-batch writes the same ids, so
``onDuplicate=keep`` (the default) makes retries idempotent, and an element already parked
is not parked twice (write-folding, as in an Ick); give an ``id`` column to park equal
elements separately. ``replace`` re-parks with the new element and due time (a retry then
moves the due time to the retry's); ``error`` fails the task on an id already parked (so a
retried task fails too: use it to detect id clashes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from ..columns import buffers
from ..dehydrator import Dehydrator
from ..errors import IckConfigError, IckError
from ..option_table import DH_WRITE
from ..options import Options
from ..values import MAX_TTL_MS
from .sink import Counts, Target

FORMAT = "dehydrator"

INTEGERS = (ByteType, ShortType, IntegerType, LongType)
COLUMNS = {
    "id": (StringType, BinaryType, *INTEGERS),
    "element": (StringType, BinaryType),
    "delayms": INTEGERS,
    "releaseat": (TimestampType,),
}
EXPECTED = {
    "id": "string, integer or binary",
    "element": "string or binary",
    "delayms": "an integer (milliseconds)",
    "releaseat": "timestamp",
}


@dataclass
class DehydratorCommitMessage(Counts):
    """What one task did: rows seen, ids parked new, ids that were parked already."""

    new: int = 0
    already_parked: int = 0


@dataclass(frozen=True)
class DehydratorSink(Target):
    """A validated write plan (picklable): where to park and how to read the columns."""

    on_duplicate: str
    element: str
    id: str | None  # None: the id is a hash of the element
    delay_ms: int | None  # option delay
    delay_column: str | None
    release_column: str | None

    kind: ClassVar[str] = "dehydrator"
    message: ClassVar[type[DehydratorCommitMessage]] = DehydratorCommitMessage

    @property
    def replay(self) -> str:
        return {
            "keep": "onDuplicate=keep keeps what is parked: writing again is safe",
            "replace": "onDuplicate=replace: writing again re-parks with new due times",
            "error": "onDuplicate=error: writing again fails on the ids parked",
        }[self.on_duplicate]

    def target(self) -> Dehydrator:
        """The logical dehydrator, through this process's client."""
        return Dehydrator(self.connection.client(), self.name, self.shards)

    def convert(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array, np.ndarray, bool]:
        """ids, elements, times and whether they are due times (see ``convert``)."""
        return convert(batch, self)

    def send(
        self, converted: tuple[pa.Array, pa.Array, np.ndarray, bool]
    ) -> DehydratorCommitMessage:
        ids, elements, times, at = converted
        new, existing = self.target().park_arrays(
            ids, elements, times, at=at, on_duplicate=self.on_duplicate, chunk=self.chunk
        )
        return DehydratorCommitMessage(len(ids), new, existing)


def plan(options: Mapping[str, Any], schema: StructType) -> DehydratorSink:
    """Validate options and schema; raises IckConfigError naming the option or column."""
    opts = Options(options, FORMAT, DH_WRITE)
    found: dict[str, str] = {}
    for field in schema.fields:
        kind = field.name.lower()
        if kind not in COLUMNS:
            raise IckConfigError(
                f"format('dehydrator'): unexpected column {field.name!r}; expected element, "
                "an optional id and one of delayMs or releaseAt (select only those)"
            )
        if kind in found:
            raise IckConfigError(f"format('dehydrator'): two columns named {field.name!r}")
        if not isinstance(field.dataType, COLUMNS[kind]):
            raise IckConfigError(
                f"format('dehydrator'): column {field.name!r} has type "
                f"{field.dataType.simpleString()}; expected {EXPECTED[kind]}"
            )
        found[kind] = field.name
    if "element" not in found:
        raise IckConfigError(
            "format('dehydrator') needs a column 'element' (string or binary); columns: "
            + (", ".join(schema.fieldNames()) or "none")
        )
    delay_ms = opts.get("delay")
    given = [
        what
        for what, present in (
            ("option 'delay'", delay_ms is not None),
            ("column 'delayMs'", "delayms" in found),
            ("column 'releaseAt'", "releaseat" in found),
        )
        if present
    ]
    if len(given) != 1:
        which = " and ".join(given) if given else "none of them"
        raise IckConfigError(
            "format('dehydrator') needs exactly one of option 'delay' (e.g. \"30s\"), "
            f"column 'delayMs' or column 'releaseAt' to set the due time; got {which}"
        )
    return DehydratorSink(
        connection=opts.connection(),
        name=opts.get("dehydrator"),
        on_duplicate=opts.get("onDuplicate"),
        element=found["element"],
        id=found.get("id"),
        delay_ms=delay_ms,
        delay_column=found.get("delayms"),
        release_column=found.get("releaseat"),
        chunk=opts.get("chunkSize"),
        shards=opts.shards(),  # last: it asks Redis
    )


def prepare(options: Mapping[str, Any], schema: StructType, overwrite: bool) -> DehydratorSink:
    """The validated plan, with the shard count checked in Redis (driver side)."""
    if overwrite:
        raise IckConfigError(
            "format('dehydrator') supports only mode('append') (streaming: append or "
            "update); to empty a dehydrator call pyspark_ick.Dehydrator(...).delete()"
        )
    sink = plan(options, schema)
    sink.target().check_shards()
    return sink


def content_id(element: str | bytes) -> str:
    """The id of an element written without an id: 32 hex digits of its BLAKE2b hash."""
    data = element.encode("utf-8") if isinstance(element, str) else element
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def content_ids(elements: pa.Array) -> pa.Array:
    """``content_id`` of each element of a string or binary array (hashing Arrow's bytes
    in place: no Python string per element)."""
    offsets, data = buffers(elements)
    view, blake2b = memoryview(data.data), hashlib.blake2b
    bounds = offsets.tolist()
    return pa.array(
        [blake2b(view[a:b], digest_size=16).hexdigest() for a, b in pairwise(bounds)], pa.string()
    )


def _no_nulls(column: pa.Array, name: str, sink: DehydratorSink, rows: int) -> None:
    if n := column.null_count:
        raise IckError(
            f"format('dehydrator') into {sink.name!r}: column {name!r} has {n} null "
            f"value{'s' * (n != 1)} in a batch of {rows} rows; every row needs one"
        )


def _flat(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A string/binary column with 32-bit offsets, in one chunk."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_large_string(column.type):
        return column.cast(pa.string())
    if pa.types.is_large_binary(column.type):
        return column.cast(pa.binary())
    return column


def convert(
    batch: pa.RecordBatch, sink: DehydratorSink
) -> tuple[pa.Array, pa.Array, np.ndarray, bool]:
    """ids, elements, times (float64 ms) and whether the times are due times (else
    delays) of a batch, column-wise.

    Raises IckError naming the column before anything of the batch is written.
    """
    rows = batch.num_rows
    elements = _flat(batch.column(sink.element))
    _no_nulls(elements, sink.element, sink, rows)
    if sink.id is None:
        ids = content_ids(elements)
    else:
        column = batch.column(sink.id)
        _no_nulls(column, sink.id, sink, rows)
        binary = pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
        ids = _flat(column if binary else pc.cast(column, pa.string()))
    if sink.delay_ms is not None:
        return ids, elements, np.full(rows, sink.delay_ms, np.float64), False
    if sink.delay_column is not None:
        column = pc.cast(batch.column(sink.delay_column), pa.int64())
        _no_nulls(column, sink.delay_column, sink, rows)
        outside = pc.or_(pc.less(column, 0), pc.greater(column, MAX_TTL_MS))
        if n := int(pc.sum(outside).as_py() or 0):
            raise IckError(
                f"format('dehydrator') into {sink.name!r}: column "
                f"{sink.delay_column!r} has {n} value{'s' * (n != 1)} outside 0 to "
                f"{MAX_TTL_MS} in a batch of {rows} rows; a delay is a number of "
                f"milliseconds >= 0 and at most {MAX_TTL_MS} (a due time is a double of ms, "
                "exact up to there)"
            )
        return ids, elements, column.to_numpy().astype(np.float64), False
    assert sink.release_column is not None
    column = batch.column(sink.release_column)
    _no_nulls(column, sink.release_column, sink, rows)
    per_ms = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
    ticks = pc.cast(column, pa.int64()).to_numpy()
    due = ticks * 1000 if per_ms < 1 else ticks // int(per_ms)
    return ids, elements, due.astype(np.float64), True
