"""``spark.read.format("ick").option("deadLetters", "true")``: the dead letters of an Ick
as a batch read (read-only; dead_letters.py has the operations): one partition per shard,
read in bounded pages. Schema: ``member string|binary, shard int, attempts int, score
double, error string, failedAt timestamp, deadAt timestamp`` (the last failed attempt,
and when the member was set aside)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..columns import utf8
from ..dead_letters import DeadLetters
from ..errors import IckConfigError
from ..option_table import ICK_READ
from ..options import Options
from ..values import as_bytes
from .batch import ShardPartition, check_exists
from .ick_reader import ReaderOptions, member_type
from .task import start_task

ROWS_PER_BATCH = 65536


def dead_letter_schema(binary: bool = False) -> StructType:
    """The columns of a dead-letter read."""
    return StructType(
        [
            StructField("member", member_type(binary), False),
            StructField("shard", IntegerType(), False),
            StructField("attempts", IntegerType(), False),
            StructField("score", DoubleType(), False),
            StructField("error", StringType(), False),
            StructField("failedAt", TimestampType(), False),
            StructField("deadAt", TimestampType(), False),
        ]
    )


def wants_dead_letters(options: Any) -> bool:
    """Whether the read asks for the dead letters (option ``deadLetters``)."""
    return bool(Options(options, "ick").get("deadLetters") == "true")


def at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


class DeadLetterReader(DataSourceReader):
    """The dead letters of every shard, non-destructively."""

    def __init__(self, opts: ReaderOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return [ShardPartition(i) for i in range(self.opts.shards)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        start_task()
        assert isinstance(partition, ShardPartition)
        letters = list(DeadLetters(self.opts.sharded())._shard_letters(partition.shard))
        if not letters:
            return
        raw = pa.array([as_bytes(d.member) for d in letters], pa.binary())
        label = self.opts.label(partition.shard)
        member = (
            raw
            if self.opts.binary
            else utf8(raw, label, lambda _, m: f"dead letter {m!r}", "memberType")
        )
        schema = dead_letter_schema(self.opts.binary)
        table = pa.Table.from_arrays(
            [
                member,
                pa.array([partition.shard] * len(letters), pa.int32()),
                pa.array([d.attempts for d in letters], pa.int32()),
                pa.array([d.record.score for d in letters], pa.float64()),
                pa.array([d.error for d in letters], pa.string()),
                pa.array([at(d.record.failed_at_ms) for d in letters], pa.timestamp("us", "UTC")),
                pa.array([at(d.dead_at_ms) for d in letters], pa.timestamp("us", "UTC")),
            ],
            schema=pa.schema(
                [
                    (f.name, t, False)
                    for f, t in zip(
                        schema.fields,
                        [
                            member.type,
                            pa.int32(),
                            pa.int32(),
                            pa.float64(),
                            pa.string(),
                            pa.timestamp("us", "UTC"),
                            pa.timestamp("us", "UTC"),
                        ],
                        strict=True,
                    )
                ]
            ),
        )
        yield from table.to_batches(ROWS_PER_BATCH)


def dead_letter_reader(options: Any, schema: StructType) -> DeadLetterReader:
    """The dead-letter reader; the schema must be ``dead_letter_schema()``."""
    opts = ReaderOptions.parse(options, ICK_READ)
    expected = dead_letter_schema(opts.binary)
    if schema.simpleString() != expected.simpleString():
        raise IckConfigError(
            "format('ick') with deadLetters=true has the fixed schema "
            f"{expected.simpleString()} (option memberType), got {schema.simpleString()}"
        )
    check_exists(opts.connection, opts.ick, "ick", opts.shards)
    opts.sharded().check_shards(record=False)
    return DeadLetterReader(opts)
