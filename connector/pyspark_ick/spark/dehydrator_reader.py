"""The "dehydrator" stream source: ``spark.readStream.format("dehydrator")``.

The generic reservation stream of source.py (docs/design.md §4) over the claim log of each
shard (claims.ClaimLog): ``latestOffset`` moves the due elements of each shard into a
numbered claim (they leave the live store), ``read`` returns the claims of the batch,
``commit`` deletes them; a crash replays exactly the claimed elements. Options
``dehydrator`` (required), ``shards``, ``maxElementsPerTrigger`` (default 100000, split
over the shards), ``minElementsPerPartition`` (default 100000: as the Ick's
minMembersPerPartition), ``consumerId``, ``leaseTimeout`` (default 60s), ``elementType``
and ``idType`` (``string`` | ``binary``). Schema: ``id string|binary, element
string|binary, due timestamp, shard int, deliveries int`` (1 on a batch's first
delivery, 2 when a restarted query replays it...). An element or id that is not UTF-8 read as a
string fails the batch naming it; its claim stays until a read as binary delivers it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..claims import ClaimLog, Entry
from ..columns import utf8
from ..dehydrator import Dehydrator
from ..errors import IckConfigError
from ..option_table import DH_STREAM
from ..options import Options
from ..values import as_bytes
from .source import ReservationStreamReader, StreamOptions

FORMAT = "dehydrator"
ROWS_PER_BATCH = 65536


def source_schema(binary: bool = False, binary_id: bool = False) -> StructType:
    """``id string|binary, element string|binary, due timestamp, shard int, deliveries
    int``."""
    return StructType(
        [
            StructField("id", BinaryType() if binary_id else StringType(), False),
            StructField("element", BinaryType() if binary else StringType(), False),
            StructField("due", TimestampType(), False),
            StructField("shard", IntegerType(), False),
            StructField("deliveries", IntegerType(), False),
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
            pa.field("deliveries", pa.int32(), False),
        ]
    )


def element_type(opts: Options) -> str:
    return str(opts.get("elementType"))


def id_type(opts: Options) -> str:
    return str(opts.get("idType"))


@dataclass(frozen=True)
class DehydratorRead:
    """What every read of a dehydrator takes from its options: which dehydrator, and
    whether elements (elementType) and ids (idType) are binary."""

    dehydrator: str
    binary: bool
    binary_id: bool

    @staticmethod
    def fields(o: Options) -> dict[str, Any]:
        return {
            "dehydrator": o.get("dehydrator"),
            "binary": element_type(o) == "binary",
            "binary_id": id_type(o) == "binary",
        }


@dataclass(frozen=True)
class SourceOptions(StreamOptions, DehydratorRead):
    """The options of readStream.format("dehydrator"), validated on the driver."""

    @classmethod
    def parse(cls, raw: Mapping[str, Any], use: str | tuple[str, ...] = DH_STREAM) -> SourceOptions:
        o = Options(raw, FORMAT, use)
        fields = DehydratorRead.fields(o)
        return cls(**StreamOptions.common(o, "Elements"), **fields)

    def target(self) -> Dehydrator:
        return Dehydrator(
            self.connection.client(), self.dehydrator, self.shards, decode=not self.binary
        )


def claims_arrow(
    entries: Sequence[Entry], shard: int, binary: bool, label: str, binary_id: bool = False
) -> Iterator[pa.RecordBatch]:
    """Rows of source_schema(binary, binary_id) from ClaimLog.read's (id text, due ms,
    element bytes, deliveries); read as a string, an id or element that is not UTF-8 is an error
    naming it (its claim stays: a restart with idType or elementType binary delivers it)."""
    if not entries:
        return
    ids, dues, elements, deliveries = zip(*entries, strict=True)
    id_column = id_array(ids, binary_id, label)
    raw = pa.array(elements, pa.binary())
    column = (
        raw
        if binary
        else utf8(raw, label, lambda i, _: f"the element of id {ids[i]!r}", "elementType", "claim")
    )
    table = pa.Table.from_arrays(
        [
            id_column,
            column,
            pc.cast(pa.array(dues, pa.int64()), pa.timestamp("ms", "UTC")).cast(
                pa.timestamp("us", "UTC")
            ),
            pa.array([shard] * len(ids), pa.int32()),
            pa.array(deliveries, pa.int32()),
        ],
        schema=arrow_schema(binary, binary_id),
    )
    yield from table.to_batches(ROWS_PER_BATCH)


def id_array(ids: Sequence[str], binary: bool, label: str) -> pa.Array:
    """The id column: ids (``text`` of Redis strings) as binary, or as string, where an id
    that is not UTF-8 is an error naming it."""
    raw = pa.array([as_bytes(id) for id in ids], pa.binary())
    return raw if binary else utf8(raw, label, lambda _, id: f"id {id!r}", "idType", "claim")


class DehydratorStreamReader(ReservationStreamReader):
    """``spark.readStream.format("dehydrator")``: due elements, claimed per shard."""

    opts: SourceOptions

    def prepare(self) -> None:
        self.opts.target().check_shards()

    def open_log(self, shard: int) -> ClaimLog:
        return Dehydrator(
            self.opts.connection.client(), self.opts.dehydrator, self.opts.shards, decode=False
        ).claim_log(shard)  # Arrow checks UTF-8

    def arrow(self, entries: list[Entry], shard: int, label: str) -> Iterator[pa.RecordBatch]:
        return claims_arrow(entries, shard, self.opts.binary, label, self.opts.binary_id)


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
