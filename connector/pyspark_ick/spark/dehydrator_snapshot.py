"""The "dehydrator" batch reader: ``spark.read.format("dehydrator")``, a read-only snapshot
of every element a dehydrator holds, one partition per shard.

Columns ``id, element, due, shard, deliveries`` (the stream's schema, what Spark asks for
at ``load()``; deliveries: of an element's claim, 0 when parked), and ``state`` when the
schema passed with ``.schema(...)`` names it: ``parked`` (waiting in the due set, due or
not) or ``claimed`` (taken by a stream query's open claim, not committed yet: it leaves
when that batch commits). Read in bounded pages (dehydrator_view.parked, .claimed), so not
atomic: an element parked for the whole read
appears once; one claimed during the read may appear in both states or, when it was
committed too before its claim was read, in neither. Options: the connection options,
``dehydrator`` (required), ``shards``, ``elementType`` and ``idType`` (``string`` |
``binary``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from ..connection import ConnectionSpec
from ..dehydrator import Dehydrator
from ..dehydrator_view import Element, claimed, parked
from ..keys import DehydratorKeys, shard_names
from ..option_table import DH_READ
from ..options import Options
from ..values import text
from .batch import ShardPartition, check_columns, check_exists
from .dehydrator_reader import FORMAT, ROWS_PER_BATCH, DehydratorRead, id_array
from .task import start_task

STATES = ("parked", "claimed")


def columns(binary: bool, binary_id: bool) -> dict[str, DataType]:
    """The columns a batch read can return, by name."""
    return {
        "id": BinaryType() if binary_id else StringType(),
        "element": BinaryType() if binary else StringType(),
        "due": TimestampType(),
        "shard": IntegerType(),
        "deliveries": IntegerType(),
        "state": StringType(),
    }


@dataclass(frozen=True)
class SnapshotOptions(DehydratorRead):
    """The options of ``spark.read.format("dehydrator")``, validated on the driver."""

    connection: ConnectionSpec
    shards: int

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> SnapshotOptions:
        o = Options(raw, FORMAT, DH_READ)
        fields = DehydratorRead.fields(o)
        return cls(connection=o.connection(), shards=o.shards(), **fields)

    def label(self, shard: int) -> str:
        return f"dehydrator {self.dehydrator!r} shard {shard}"


class DehydratorSnapshotReader(DataSourceReader):
    """``spark.read.format("dehydrator")``: every shard's parked and claimed elements."""

    def __init__(self, opts: SnapshotOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        return [ShardPartition(i) for i in range(self.opts.shards)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        start_task()
        assert isinstance(partition, ShardPartition)
        shard, label = partition.shard, self.opts.label(partition.shard)
        keys = DehydratorKeys(shard_names(self.opts.dehydrator, self.opts.shards)[shard])
        client = self.opts.connection.client()
        rows = [(e, "parked", 0) for e in parked(client, keys, label)]
        rows += [(e, "claimed", delivered) for e, delivered in claimed(client, keys, label)]
        if rows:
            elements, states, counts = zip(*rows, strict=True)
            yield from self.arrow(elements, list(states), list(counts), shard, label)

    def arrow(
        self,
        elements: Sequence[Element],
        states: list[str],
        counts: list[int],
        shard: int,
        label: str,
    ) -> Iterator[pa.RecordBatch]:
        """The schema's columns of ``elements``; an id or element that is not UTF-8, read
        as a string, is an error naming it (read it with idType or elementType binary)."""
        names = {f.name for f in self.schema.fields}
        data: dict[str, pa.Array] = {}
        ids = [text(e[0]) for e in elements]
        if "id" in names:
            data["id"] = id_array(ids, self.opts.binary_id, label)
        if "element" in names:
            raw = pa.array([e[2] for e in elements], pa.binary())
            data["element"] = raw if self.opts.binary else element_text(raw, ids, label)
        if "due" in names:
            due = pa.array([e[1] for e in elements], pa.int64())
            data["due"] = pc.cast(due, pa.timestamp("ms", "UTC")).cast(pa.timestamp("us", "UTC"))
        if "shard" in names:
            data["shard"] = pa.array([shard] * len(elements), pa.int32())
        if "state" in names:
            data["state"] = pa.array(states, pa.string())
        if "deliveries" in names:  # of an element's claim (0: parked)
            data["deliveries"] = pa.array(counts, pa.int32())
        table = pa.table({f.name: data[f.name] for f in self.schema.fields})
        arrow = pa.schema(
            [
                (f.name, data[f.name].type, f.nullable)
                for f in self.schema.fields  # Spark wants the nullability it asked for
            ]
        )
        yield from table.cast(arrow).to_batches(ROWS_PER_BATCH)


def element_text(raw: pa.Array, ids: Sequence[str], label: str) -> pa.Array:
    """The element column as strings, naming an element that is not UTF-8 by its id."""
    from ..columns import utf8

    return utf8(raw, label, lambda i, _: f"the element of id {ids[i]!r}", "elementType")


def batch_reader(options: Mapping[str, Any], schema: StructType) -> DehydratorSnapshotReader:
    """The snapshot reader: options and schema checked, the dehydrator's existence and
    shard count too (recording nothing: a read does not write)."""
    opts = SnapshotOptions.parse(options)
    hints = {"id": "idType", "element": "elementType"}
    check_columns("dehydrator", schema, columns(opts.binary, opts.binary_id), hints)
    check_exists(opts.connection, opts.dehydrator, "dehydrator", opts.shards)
    Dehydrator(opts.connection.client(), opts.dehydrator, opts.shards).check_shards(record=False)
    return DehydratorSnapshotReader(opts, schema)
