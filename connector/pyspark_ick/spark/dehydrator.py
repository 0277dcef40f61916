"""DataSource "dehydrator": batch and streaming sink, streaming source (docs/design.md §6).

Sink: columns ``element`` (string or binary), optional ``id`` (string, integer or binary:
bytes parked as they are) and the
due time from exactly one of option ``delay``, column ``delayMs`` or column ``releaseAt``
(timestamp). Options and schema are validated and the shard count checked on the driver;
the sink of sink.py then parks each task's rows in bounded dh_push calls. Without an
``id`` column the id is a hash of the element: a retried task or a replayed micro-batch
writes the same ids, so ``onDuplicate=keep`` (the default) makes retries idempotent, and
an element already parked is not parked twice (write-folding, as in an Ick); give an
``id`` column to park equal elements separately. ``replace`` re-parks with the new element
and due time (a retry then moves the due time to the retry's); ``error`` fails the task
on an id already parked (so a retried task fails too: use it to detect id clashes).

Source: ``readStream.format("dehydrator")`` is the generic reservation stream of source.py
(docs/design.md §4) over the claim log of each shard (dehydrator.ClaimLog): ``latestOffset`` moves
the due elements of each shard into a numbered claim (they leave the live store), ``read``
returns the claims of the batch, ``commit`` deletes them; a crash replays exactly the
claimed elements. Options ``dehydrator`` (required), ``shards``, ``maxElementsPerTrigger``
(default 100000, split over the shards), ``minElementsPerPartition`` (default 100000:
as the Ick's minMembersPerPartition), ``consumerId``, ``leaseTimeout`` (default 60s),
``elementType`` and ``idType`` (``string`` | ``binary``). Schema: ``id string|binary,
element string|binary, due timestamp, shard int``. An element or id that is not UTF-8 read
as a string fails the batch naming it; its claim stays until a read as binary delivers it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..claims import ClaimLog, Entry
from ..columns import NotUtf8, buffers, utf8
from ..connection import ConnectionSpec
from ..dehydrator import Dehydrator
from ..errors import IckConfigError, IckError
from ..options import DH_STREAM, DH_WRITE, Options
from ..values import as_bytes
from .sink import BatchWriter, StreamWriter
from .source import ReservationStreamReader, StreamOptions
from .tables import require_options

FORMAT = "dehydrator"
ROWS_PER_BATCH = 65536

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


def source_schema(binary: bool = False, binary_id: bool = False) -> StructType:
    """``id string|binary, element string|binary, due timestamp, shard int``."""
    return StructType(
        [
            StructField("id", BinaryType() if binary_id else StringType(), False),
            StructField("element", BinaryType() if binary else StringType(), False),
            StructField("due", TimestampType(), False),
            StructField("shard", IntegerType(), False),
        ]
    )


def arrow_schema(binary: bool = False, binary_id: bool = False) -> pa.Schema:
    """source_schema() as Arrow (what ``read`` yields)."""
    return pa.schema(
        [
            pa.field("id", pa.binary() if binary_id else pa.string(), False),
            pa.field("element", pa.binary() if binary else pa.string(), False),
            pa.field("due", pa.timestamp("us", "UTC"), False),
            pa.field("shard", pa.int32(), False),
        ]
    )


class DefaultSource(DataSource):
    """``format("dehydrator")``: a delayed re-release store as a Spark sink and source."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        opts = Options(self.options, FORMAT)
        return source_schema(element_type(opts) == "binary", id_type(opts) == "binary")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        require_options(self.options, FORMAT)  # a SQL table's OPTIONS never arrive
        return BatchWriter(prepare(self.options, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        require_options(self.options, FORMAT)
        return StreamWriter(prepare(self.options, schema, overwrite), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return stream_reader(self.options, schema)


def element_type(opts: Options) -> str:
    return str(opts.get("elementType"))


def id_type(opts: Options) -> str:
    return str(opts.get("idType"))


# --- the sink, on the driver: options, schema, shard count ----------------------------


@dataclass
class DehydratorCommitMessage(WriterCommitMessage):
    """What one task did: rows seen, ids parked new, ids that were parked already."""

    rows: int = 0
    new: int = 0
    existing: int = 0

    def __add__(self, other: DehydratorCommitMessage) -> DehydratorCommitMessage:
        return DehydratorCommitMessage(
            self.rows + other.rows, self.new + other.new, self.existing + other.existing
        )

    def __str__(self) -> str:
        return f"{self.rows} rows: {self.new} new, {self.existing} already parked"


@dataclass(frozen=True)
class DehydratorSink:
    """A validated write plan (picklable): where to park and how to read the columns."""

    connection: ConnectionSpec
    dehydrator: str
    shards: int
    on_duplicate: str
    element: str
    id: str | None  # None: the id is a hash of the element
    delay_ms: int | None  # option delay
    delay_column: str | None
    release_column: str | None
    chunk: int

    message: ClassVar[type[DehydratorCommitMessage]] = DehydratorCommitMessage

    @property
    def label(self) -> str:
        return f"dehydrator {self.dehydrator!r} ({self.shards} shards)"

    @property
    def replay(self) -> str:
        return {
            "keep": "onDuplicate=keep keeps what is parked: writing again is safe",
            "replace": "onDuplicate=replace: writing again re-parks with new due times",
            "error": "onDuplicate=error: writing again fails on the ids parked",
        }[self.on_duplicate]

    def target(self) -> Dehydrator:
        """The logical dehydrator, through this process's client."""
        return Dehydrator(self.connection.client(), self.dehydrator, self.shards)

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
        dehydrator=opts.get("dehydrator"),
        shards=opts.get("shards"),
        on_duplicate=opts.get("onDuplicate"),
        element=found["element"],
        id=found.get("id"),
        delay_ms=delay_ms,
        delay_column=found.get("delayms"),
        release_column=found.get("releaseat"),
        chunk=opts.get("chunkSize"),
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


# --- the sink, in the tasks: Arrow batches to dh_push calls ----------------------------


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
            f"format('dehydrator') into {sink.dehydrator!r}: column {name!r} has {n} null "
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
        if n := int(pc.sum(pc.less(column, 0)).as_py() or 0):
            raise IckError(
                f"format('dehydrator') into {sink.dehydrator!r}: column "
                f"{sink.delay_column!r} has {n} negative value{'s' * (n != 1)} in a batch "
                f"of {rows} rows; a delay is a number of milliseconds >= 0"
            )
        return ids, elements, column.to_numpy().astype(np.float64), False
    assert sink.release_column is not None
    column = batch.column(sink.release_column)
    _no_nulls(column, sink.release_column, sink, rows)
    per_ms = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
    ticks = pc.cast(column, pa.int64()).to_numpy()
    due = ticks * 1000 if per_ms < 1 else ticks // int(per_ms)
    return ids, elements, due.astype(np.float64), True


# --- the source: claims as micro-batches (source.py's protocol) ----------------------


@dataclass(frozen=True)
class SourceOptions(StreamOptions):
    """The options of readStream.format("dehydrator"), validated on the driver."""

    dehydrator: str
    binary: bool  # elementType=binary
    binary_id: bool  # idType=binary

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> SourceOptions:
        o = Options(raw, FORMAT, DH_STREAM)
        return cls(
            **StreamOptions.common(o, "Elements"),
            dehydrator=o.get("dehydrator"),
            binary=element_type(o) == "binary",
            binary_id=id_type(o) == "binary",
        )

    def target(self) -> Dehydrator:
        return Dehydrator(
            self.connection.client(), self.dehydrator, self.shards, decode=not self.binary
        )


def claims_arrow(
    entries: Sequence[Entry], shard: int, binary: bool, label: str, binary_id: bool = False
) -> Iterator[pa.RecordBatch]:
    """Rows of source_schema(binary, binary_id) from ClaimLog.read's (id text, due ms,
    element bytes); read as a string, an id or element that is not UTF-8 is an error
    naming it (its claim stays: a restart with idType or elementType binary delivers it)."""
    if not entries:
        return
    ids, dues, elements = zip(*entries, strict=True)
    id_column = id_array(ids, binary_id, label)
    raw = pa.array(elements, pa.binary())
    try:
        column = raw if binary else utf8(raw)
    except NotUtf8 as bad:
        raise IckError(
            f"{label}: the element of id {ids[bad.index]!r} is not UTF-8 text, so it cannot "
            "be a string: restart the query with option elementType=binary to read it "
            "(nothing is lost: the claim stays until a batch delivers it)"
        ) from None
    table = pa.Table.from_arrays(
        [
            id_column,
            column,
            pc.cast(pa.array(dues, pa.int64()), pa.timestamp("ms", "UTC")).cast(
                pa.timestamp("us", "UTC")
            ),
            pa.array([shard] * len(ids), pa.int32()),
        ],
        schema=arrow_schema(binary, binary_id),
    )
    yield from table.to_batches(ROWS_PER_BATCH)


def id_array(ids: Sequence[str], binary: bool, label: str) -> pa.Array:
    """The id column: ids (``text`` of Redis strings) as binary, or as string, where an id
    that is not UTF-8 (a surrogate escape) is an error naming it."""
    if binary:
        return pa.array([as_bytes(id) for id in ids], pa.binary())
    try:
        return pa.array(ids, pa.string())
    except UnicodeEncodeError:
        bad = next(as_bytes(id) for id in ids if not id.isascii() and _escaped(id))
        raise IckError(
            f"{label}: id {bad!r} is not UTF-8 text, so it cannot be a string: restart the "
            "query with option idType=binary to read it (nothing is lost: the claim stays "
            "until a batch delivers it)"
        ) from None


def _escaped(id: str) -> bool:
    """Whether ``id`` holds surrogates (``text`` of bytes that are not UTF-8)."""
    try:
        id.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class DehydratorStreamReader(ReservationStreamReader):
    """``spark.readStream.format("dehydrator")``: due elements, claimed per shard."""

    opts: SourceOptions

    def prepare(self) -> None:
        self.opts.target().check_shards()

    def open_log(self, shard: int) -> ClaimLog:
        return Dehydrator(
            self.opts.connection.client(), self.opts.dehydrator, self.opts.shards, decode=False
        ).claim_log(shard)  # Arrow checks UTF-8

    def arrow(
        self, shard_log: ClaimLog, shard: int, start: int, end: int
    ) -> Iterator[pa.RecordBatch]:
        return claims_arrow(
            shard_log.read(start, end),
            shard,
            self.opts.binary,
            f"{shard_log.label} (claims {start + 1}-{end})",
            self.opts.binary_id,
        )


def stream_reader(options: Mapping[str, Any], schema: StructType) -> DehydratorStreamReader:
    """The stream reader; the schema must be source_schema() (per options elementType and
    idType)."""
    opts = SourceOptions.parse(options)
    expected = source_schema(opts.binary, opts.binary_id)
    if schema.simpleString() != expected.simpleString():
        raise IckConfigError(
            f"readStream.format('dehydrator') has the fixed schema "
            f"{expected.simpleString()} (options elementType, idType), got "
            f"{schema.simpleString()}"
        )
    return DehydratorStreamReader(opts)
