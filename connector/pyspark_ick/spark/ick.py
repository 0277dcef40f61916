"""DataSource "ick": batch and streaming writer, batch snapshot reader, stream reader.

The classes doing the work live in ick_writer.py, ick_reader.py and ick_snapshot.py;
this module only wires them to Spark's DataSource entry points.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .tables import require_options


class DefaultSource(DataSource):
    """``format("ick")``: Redis Icks as a Spark sink and a streaming source."""

    @classmethod
    def name(cls) -> str:
        return "ick"

    def schema(self) -> StructType:
        from ..options import Options
        from .ick_reader import options_binary, stream_schema

        return stream_schema(options_binary(Options(self.options, "ick")))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .ick_writer import batch_writer

        require_options(self.options, "ick")  # a SQL table's OPTIONS never arrive
        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .ick_writer import stream_writer

        require_options(self.options, "ick")
        return stream_writer(self.options, schema, overwrite)

    def reader(self, schema: StructType) -> DataSourceReader:
        from .ick_snapshot import batch_reader

        require_options(self.options, "ick")
        return batch_reader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .ick_reader import stream_reader

        require_options(self.options, "ick")
        return stream_reader(self.options, schema)
