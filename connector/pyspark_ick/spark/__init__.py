"""The Spark data sources, and what a sink does with members it cannot process
(``retry_later``, ``in_pieces``). Imported only where pyspark is installed."""

from .failures import in_pieces, retry_later

__all__ = ["in_pieces", "retry_later"]
