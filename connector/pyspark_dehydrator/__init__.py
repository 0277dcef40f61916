"""format("dehydrator"): lets Spark find the dehydrator data source by itself."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "DefaultSource":
        try:
            from pyspark_ick.spark.dehydrator import DefaultSource
        except ImportError as exc:  # no pyspark here: Spark's lookup must not break
            raise AttributeError(f"DefaultSource needs pyspark: {exc}") from exc
        return DefaultSource
    raise AttributeError(f"module 'pyspark_dehydrator' has no attribute {name!r}")
