"""DataSource "dehydrator": batch and streaming sink, streaming source (docs/design.md §6).

The classes doing the work live in dehydrator_writer.py and dehydrator_reader.py; this
module only wires them to Spark's DataSource entry points.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
)
from pyspark.sql.types import StructType

from .tables import require_options

FORMAT = "dehydrator"


class DefaultSource(DataSource):
    """``format("dehydrator")``: a delayed re-release store as a Spark sink and source."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        from ..options import Options
        from .dehydrator_reader import element_type, id_type, source_schema

        opts = Options(self.options, FORMAT)
        return source_schema(element_type(opts) == "binary", id_type(opts) == "binary")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        from .dehydrator_writer import prepare
        from .sink import BatchWriter

        require_options(self.options, FORMAT)  # a SQL table's OPTIONS never arrive
        return BatchWriter(prepare(self.options, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .dehydrator_writer import prepare
        from .sink import StreamWriter

        require_options(self.options, FORMAT)
        return StreamWriter(prepare(self.options, schema, overwrite), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .dehydrator_reader import stream_reader

        require_options(self.options, FORMAT)
        return stream_reader(self.options, schema)
