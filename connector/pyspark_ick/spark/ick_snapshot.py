"""``spark.read.format("ick")``: a non-destructive snapshot of both sets of every shard
(docs/design.md §5).

A read returns whichever of the columns ``member, score, shard, reservation, state`` its
schema names (default: ick_reader.STREAM_SCHEMA; ``.schema(SNAPSHOT_SCHEMA)`` adds
``state``, ``queued`` | ``reserved``). ``reservation`` is the open reservation holding a
reserved member (null when queued, or reserved outside the reservation log, e.g. by a
Ruby consumer of the gem). A member both queued and reserved (re-added in flight) is two
rows. With Spark's filter pushdown on (pyspark 4.1+,
``spark.sql.python.filterPushdown.enabled``), the filters of ick_filters.py are answered
by Redis: only the shards that can hold a row are read, members are looked up, score
ranges read by range; the rows are the same as without pushdown.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..columns import utf8
from ..ick import Ick
from ..keys import IckKeys, shard_names
from ..numbered_log import deliveries
from ..option_table import ICK_READ
from ..snapshots import snapshot
from ..values import text
from .batch import ShardPartition, check_columns, check_exists
from .compat import QuietPushdown
from .ick_filters import Selection, push
from .ick_reader import ARROW_TYPES, ROWS_PER_BATCH, ReaderOptions, arrow_schema, snapshot_columns
from .task import start_task


class IckSnapshotReader(DataSourceReader):
    """``spark.read.format("ick")``: both sets of every shard, non-destructively."""

    def __init__(self, opts: ReaderOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.selection = Selection()

    def push_filters(self, filters: list[Any]) -> list[Any]:
        """Keep the filters Redis can answer (ick_filters.py); the others go back to Spark."""
        self.selection, rest = push(filters, self.opts.binary, self.opts.shards)
        return rest

    pushFilters = QuietPushdown(push_filters)

    def partitions(self) -> list[InputPartition]:
        plan = self.selection.plan(self.opts.shards)
        # no shard to read: one partition reading nothing (Spark would make one anyway)
        return [ShardPartition(i, members) for i, members in plan] or [ShardPartition(0, ())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        start_task()
        assert isinstance(partition, ShardPartition)
        key = shard_names(self.opts.ick, self.opts.shards)[partition.shard]
        names = set(self.schema.names)
        held = bool(names & {"reservation", "deliveries"})
        query = self.selection.query(partition.members, held)
        client = self.opts.connection.client()
        pset, cset, holder = snapshot(client, key, query)
        members = pset[0::2] + cset[0::2]
        queued = len(pset) // 2
        column = pa.array(members, pa.binary())
        if not self.opts.binary:
            column = utf8(
                column,
                self.opts.label(partition.shard),
                lambda _, member: f"member {member!r}",
                "memberType",
            )
        holders = [holder.get(text(m)) for m in members[queued:]] if held else []
        data = {
            "score": [float(s) for s in pset[1::2]] + [float(s) for s in cset[1::2]],
            "shard": [partition.shard] * len(members),
            "reservation": [None] * queued + holders,
            "state": ["queued"] * queued + ["reserved"] * (len(members) - queued),
        }
        if "deliveries" in names:  # of the reservation holding it; 0 when queued
            open_ = (h for h in holders if h is not None)
            counted = deliveries(client, IckKeys(key).rlog, open_, self.opts.label(partition.shard))
            data["deliveries"] = [0] * queued + [counted.get(h, 0) if h else 0 for h in holders]
        if "attempt" in names:
            data["attempt"] = [n + 1 for n in Ick(client, key).attempts(*members)]
        table = pa.table(
            {
                f.name: column
                if f.name == "member"
                else pa.array(data[f.name], ARROW_TYPES[f.name])
                for f in self.schema.fields
            }
        )
        yield from table.cast(arrow_schema(self.schema)).to_batches(ROWS_PER_BATCH)


def batch_reader(options: Any, schema: StructType) -> IckSnapshotReader:
    """The snapshot reader; ``schema`` picks the columns (see the module docstring)."""
    opts = ReaderOptions.parse(options, ICK_READ)
    member_type = f"memberType={'binary' if opts.binary else 'string'}"
    check_columns("ick", schema, snapshot_columns(opts.binary), {"member": member_type})
    check_exists(opts.connection, opts.ick, "ick", opts.shards)
    opts.sharded().check_shards(record=False)  # a read writes nothing
    return IckSnapshotReader(opts, schema)
