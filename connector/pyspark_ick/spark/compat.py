"""What the reader and writers use from pyspark releases that differ, imported once here."""

from __future__ import annotations

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

__all__ = ["ReadAllAvailable", "ReadLimit", "ReadMaxRows", "SupportsTriggerAvailableNow"]
