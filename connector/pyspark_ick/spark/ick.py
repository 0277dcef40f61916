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
        """The stream schema (the dead letters' with ``deadLetters=true``); Spark asks for
        it at ``load()`` of a read without a schema given, on the driver: the options are
        checked here, so a misspelled one fails there, not after ``start()`` (stream or
        batch cannot be told apart yet: an option of either passes, and the reader checks
        the exact use later)."""
        from ..option_table import ICK_READ, READS
        from .dead_letters_reader import dead_letter_schema, wants_dead_letters
        from .ick_reader import ReaderOptions, stream_schema

        if len(self.options) == 0:  # a SQL table's: require_options says why, later
            return stream_schema()
        if wants_dead_letters(self.options):  # a batch read's only
            return dead_letter_schema(ReaderOptions.parse(self.options, ICK_READ).binary)
        return stream_schema(ReaderOptions.parse(self.options, READS["ick"]).binary)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .ick_writer import batch_writer

        require_options(self.options, "ick")  # a SQL table's OPTIONS never arrive
        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .ick_writer import stream_writer

        require_options(self.options, "ick")
        return stream_writer(self.options, schema, overwrite)

    def reader(self, schema: StructType) -> DataSourceReader:
        from .dead_letters_reader import dead_letter_reader, wants_dead_letters
        from .ick_snapshot import batch_reader

        require_options(self.options, "ick")
        if wants_dead_letters(self.options):
            return dead_letter_reader(self.options, schema)
        return batch_reader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .ick_reader import stream_reader

        require_options(self.options, "ick")
        return stream_reader(self.options, schema)
