"""DataSource "dehydrator": batch and streaming sink, streaming source, batch snapshot
reader (docs/design.md §6).

The classes doing the work live in dehydrator_writer.py, dehydrator_reader.py and
dehydrator_snapshot.py; this module only wires them to Spark's DataSource entry points.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
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
        """The stream schema, asked for at ``load()`` of a read without a schema given, on
        the driver: the options are checked here (see spark/ick.py)."""
        from ..option_table import READS
        from .dehydrator_reader import SourceOptions, source_schema

        if len(self.options) == 0:  # a SQL table's: require_options says why, later
            return source_schema()
        opts = SourceOptions.parse(self.options, READS[FORMAT])
        return source_schema(opts.binary, opts.binary_id)

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

    def reader(self, schema: StructType) -> DataSourceReader:
        from .dehydrator_snapshot import batch_reader

        require_options(self.options, FORMAT)
        return batch_reader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .dehydrator_reader import stream_reader

        require_options(self.options, FORMAT)
        return stream_reader(self.options, schema)
