"""Spark's own floor for a Python stream source: ``format("clock")``, a source with no I/O.

Events happen ``rate`` times a second and are available the moment they happen: an
offset is a time in ms, ``latestOffset`` is now, and ``read`` makes the rows of the events
in ``(start, end]`` (``member string, score double``, score = event time in seconds, as
the Ick benchmarks' producers write). Whatever latency or start-up time this source shows
is Spark's per-micro-batch and per-query cost on this machine, which no Python source can
go below; the readers' figures are compared against it in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
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
