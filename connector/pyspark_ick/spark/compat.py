"""What differs between the pyspark releases the connector runs on (4.0 and later), imported
once here with the fallbacks.

- Admission control for Python stream sources (``latestOffset(start, limit)``,
  ``ReadLimit``, ``ReadMaxRows``, ``ReadAllAvailable``, ``SupportsTriggerAvailableNow``, the
  module ``pyspark.sql.streaming.datasource``) is pyspark 4.2+. Before, Spark calls
  ``latestOffset()`` without arguments and never asks for a read limit: the fallbacks
  below let the reader cap each micro-batch itself (``ADMISSION_CONTROL`` is False).
- ``DataSourceStreamArrowWriter`` is pyspark 4.1+. On 4.0 a streaming writer receives
  Rows: ``StreamWriterBase`` is then ``DataSourceStreamWriter`` and ``arrow_from_rows``
  turns the Rows back into Arrow batches of the DataFrame's schema.
- ``DataSourceArrowWriter`` (batch) is in every release from 4.0.
- Filter pushdown (``DataSourceReader.pushFilters``, the ``Filter`` classes) is pyspark
  4.1+; 4.0 never pushes a filter, and the fallback classes below are never made. Spark
  4.1+ refuses a reader that has its own ``pushFilters`` while
  ``spark.sql.python.filterPushdown.enabled`` is false (the default): ``QuietPushdown``
  lets such a read go on without pushdown instead.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamWriter
from pyspark.sql.types import ArrayType, MapType, StructType, TimestampType


class _ReadLimit:
    """A read limit (pyspark.sql.streaming.datasource.ReadLimit before 4.2)."""


@dataclass(frozen=True)
class _ReadMaxRows(_ReadLimit):
    """At most ``max_rows`` rows per micro-batch."""

    max_rows: int


@dataclass(frozen=True)
class _ReadAllAvailable(_ReadLimit):
    """Everything available."""


class _SupportsTriggerAvailableNow:
    """Marks a reader that prepares for Trigger.AvailableNow (pyspark 4.2+ calls it)."""

    def prepareForTriggerAvailableNow(self) -> None:
        """Called once before an AvailableNow query's first batch."""


try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # pyspark 4.0, 4.1
    ReadLimit = _ReadLimit  # type: ignore[assignment,misc]
    ReadMaxRows = _ReadMaxRows  # type: ignore[assignment,misc]
    ReadAllAvailable = _ReadAllAvailable  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = _SupportsTriggerAvailableNow  # type: ignore[assignment,misc]
    ADMISSION_CONTROL = False

try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    StreamWriterBase: type[Any] = DataSourceStreamArrowWriter
    ARROW_STREAM_WRITER = True
except ImportError:  # pyspark 4.0
    StreamWriterBase = DataSourceStreamWriter
    ARROW_STREAM_WRITER = False

ROWS_PER_BATCH = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch default


def arrow_from_rows(
    rows: Iterable[Any], schema: StructType, size: int = ROWS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of ``size`` rows, as an Arrow writer would receive them, from the Rows
    a pyspark 4.0 streaming writer gets: the DataFrame's flat columns (nested ones are
    left out: no sink reads them), a timestamp (a naive local time in a Row) in UTC."""
    from pyspark.sql.pandas.types import to_arrow_schema

    flat = [
        i
        for i, f in enumerate(schema.fields)
        if not isinstance(f.dataType, (ArrayType, MapType, StructType))
    ]
    arrow = to_arrow_schema(StructType([schema.fields[i] for i in flat]))
    local = [isinstance(schema.fields[i].dataType, TimestampType) for i in flat]
    it = iter(rows)
    while chunk := list(islice(it, size)):
        columns = []
        for j, i in enumerate(flat):
            values = [row[i] for row in chunk]
            if local[j]:
                values = [_utc(v) for v in values]
            columns.append(pa.array(values, arrow.field(j).type))
        yield pa.RecordBatch.from_arrays(columns, schema=arrow)


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """A Row's timestamp (naive, in the local time zone) as an aware UTC time."""
    return None if value is None else value.astimezone(dt.timezone.utc)


# --- filter pushdown (pyspark 4.1+) ------------------------------------------------------


class _NeverPushed:
    """Stands for every filter class on pyspark 4.0, which never pushes a filter."""


try:
    from pyspark.sql.datasource import (
        EqualNullSafe,
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        IsNotNull,
        IsNull,
        LessThan,
        LessThanOrEqual,
        Not,
    )

    FILTER_PUSHDOWN = True
except ImportError:  # pyspark 4.0
    EqualTo = EqualNullSafe = In = _NeverPushed  # type: ignore[assignment,misc]
    IsNull = IsNotNull = Not = _NeverPushed  # type: ignore[assignment,misc]
    GreaterThan = GreaterThanOrEqual = _NeverPushed  # type: ignore[assignment,misc]
    LessThan = LessThanOrEqual = _NeverPushed  # type: ignore[assignment,misc]
    FILTER_PUSHDOWN = False

Push = Callable[[Any, list[Any]], Iterable[Any]]


class QuietPushdown:
    """``pushFilters`` of a reader whose pushed filters keep the rows Spark would keep
    itself, so a read with ``spark.sql.python.filterPushdown.enabled`` false (Spark then
    never calls it) goes on without pushdown instead of failing.

    Spark 4.1+ fails such a read when ``reader.pushFilters.__func__`` is not
    ``DataSourceReader.pushFilters``: the method this descriptor hands out says it is,
    and runs the decorated function when Spark calls it (pushdown enabled).
    """

    def __init__(self, push: Push) -> None:
        self.push = push

    def __get__(self, reader: Any, owner: type | None = None) -> Any:
        return self if reader is None else _QuietMethod(self.push, reader)


class _QuietMethod:
    def __init__(self, push: Push, reader: Any) -> None:
        self.__func__ = getattr(DataSourceReader, "pushFilters", None)  # what Spark checks
        self.__self__ = reader
        self.push = push

    def __call__(self, filters: list[Any]) -> Iterable[Any]:
        return self.push(self.__self__, filters)
