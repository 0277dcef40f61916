"""Spark's own floor for a Python stream source: ``format("clock")``, a source with no I/O.

Events happen ``rate`` times a second and are available the moment they happen: an
offset is a time in ms, ``latestOffset`` is now, and ``read`` makes the rows of the events
in ``(start, end]`` (``member string, score double``, score = event time in seconds, as
the Ick benchmarks' producers write). Whatever latency or start-up time this source shows
is Spark's per-micro-batch and per-query cost on this machine, which no Python source can
go below; the readers' figures are compared against it in the same run.

``format("backlog")`` is the same for a drain: ``members`` rows waiting at start, at most
``perTrigger`` a micro-batch, each batch in ``max(1, rows // minPerPartition)`` tasks (as
the Ick reader plans them), rows of the Ick stream's six columns made in Arrow with no
I/O. Run with Trigger.AvailableNow, it is Spark's own time for that many micro-batches of
those sizes: the drain's physical limit is the slower of it and the raw Redis loop
(bench_reader.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle  # the copy Spark pickles with
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow


@dataclass(frozen=True)
class Span(InputPartition):
    start_ms: int
    end_ms: int


class ClockReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.until: int | None = None  # Trigger.AvailableNow: the end, fixed at start

    def _now(self) -> dict[str, int]:
        now = int(time.time() * 1000)
        return {"ms": now if self.until is None else min(now, self.until)}

    def initialOffset(self) -> dict[str, int]:
        return self._now()

    def prepareForTriggerAvailableNow(self) -> None:
        self.until = int(time.time() * 1000)

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        return self._now()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [Span(start["ms"], end["ms"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Span)
        step = 1000 / self.rate
        first = (partition.start_ms // step + 1) * step
        times = [t / 1000 for t in _range(first, partition.end_ms, step)]
        yield pa.record_batch(
            {
                "member": pa.array([f"e{t}" for t in times], pa.string()),
                "score": pa.array(times, pa.float64()),
            }
        )

    def commit(self, end: dict[str, int]) -> None:
        pass


@dataclass(frozen=True)
class Rows(InputPartition):
    start: int
    end: int


BACKLOG_SCHEMA = pa.schema(
    [
        pa.field("member", pa.string(), False),
        pa.field("score", pa.float64(), False),
        pa.field("shard", pa.int32(), False),
        pa.field("reservation", pa.int64(), True),
        pa.field("deliveries", pa.int32(), False),
        pa.field("attempt", pa.int32(), False),
    ]
)


class BacklogReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are rows delivered; ``members`` wait from the start."""

    def __init__(self, members: int, per_trigger: int, per_partition: int) -> None:
        self.members, self.per_trigger, self.per_partition = members, per_trigger, per_partition

    def initialOffset(self) -> dict[str, int]:
        return {"rows": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        return {"rows": min(self.members, start["rows"] + self.per_trigger)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        first, last = start["rows"], end["rows"]
        count = max(1, (last - first) // self.per_partition)
        cuts = [first + (last - first) * k // count for k in range(count + 1)]
        return [Rows(a, b) for a, b in pairwise(cuts) if b > a]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Rows)
        ids = pa.array(range(partition.start, partition.end), pa.int64())
        members = pc.binary_join_element_wise("doc:", pc.cast(ids, pa.string()), "")
        ones = pa.repeat(1, len(ids))
        columns = [
            members,
            pc.cast(ids, pa.float64()),
            pa.repeat(pa.scalar(0, pa.int32()), len(ids)),
            pc.cast(ones, pa.int64()),
            pc.cast(ones, pa.int32()),
            pc.cast(ones, pa.int32()),
        ]
        yield pa.record_batch(columns, schema=BACKLOG_SCHEMA)

    def commit(self, end: dict[str, int]) -> None:
        pass


class BacklogSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "backlog"

    def schema(self) -> str:
        """The Ick stream's columns (ick_reader.stream_schema)."""
        return (
            "member string not null, score double not null, shard int not null, "
            "reservation bigint, deliveries int not null, attempt int not null"
        )

    def streamReader(self, schema: Any) -> BacklogReader:
        return BacklogReader(
            int(self.options["members"]),
            int(self.options.get("perTrigger", 500_000)),
            int(self.options.get("minPerPartition", 100_000)),
        )


def _range(first: float, last: float, step: float) -> Iterator[float]:
    t = first
    while t <= last:
        yield t
        t += step


class ClockSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "clock"

    def schema(self) -> str:
        return "member string, score double"

    def streamReader(self, schema: Any) -> ClockReader:
        return ClockReader(int(self.options.get("rate", 1000)))


def register(spark: Any) -> None:
    """Make ``format("clock")`` available (the workers get the code by value: bench/ is not
    on their path)."""
    import sys

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(ClockSource)
    spark.dataSource.register(BacklogSource)
