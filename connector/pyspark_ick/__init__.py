"""pyspark-ick: Redis indexing queues (Icks) and dehydrators, as PySpark data sources.

The client (``connect``, ``Ick``, ``ShardedIck``, ``Dehydrator``) needs only redis-py;
``DefaultSource`` (format ``"ick"``) and ``register`` import pyspark on first use.
"""

from __future__ import annotations

from typing import Any

from .connection import connect
from .errors import (
    IckConfigError,
    IckConnectionError,
    IckError,
    IckScriptError,
    LayoutError,
    LeaseBusy,
    LeaseError,
    LeaseLost,
    RedisFullError,
    ReplicationError,
    ShardCountError,
)
from .ick import Ick
from .keys import shard_of
from .retries import RetryPolicy
from .sharded import ShardedIck

__version__ = "0.2.0"

__all__ = [
    "DefaultSource",
    "Dehydrator",
    "Ick",
    "IckConfigError",
    "IckConnectionError",
    "IckError",
    "IckScriptError",
    "LayoutError",
    "LeaseBusy",
    "LeaseError",
    "LeaseLost",
    "RedisFullError",
    "ReplicationError",
    "RetryPolicy",
    "ShardCountError",
    "ShardedIck",
    "connect",
    "register",
    "shard_of",
]


def register(spark: Any) -> None:
    """Register formats "ick" and "dehydrator" with ``spark`` explicitly."""
    from pyspark_dehydrator import DefaultSource as DehydratorSource

    from .spark.ick import DefaultSource as IckSource

    spark.dataSource.register(IckSource)
    spark.dataSource.register(DehydratorSource)


def __getattr__(name: str) -> Any:
    # Lazy: Spark finds DefaultSource by getattr; plain client users never import pyspark.
    if name == "DefaultSource":
        try:
            from .spark.ick import DefaultSource
        except ImportError as exc:  # no pyspark here: Spark's lookup must not break
            raise AttributeError(f"DefaultSource needs pyspark: {exc}") from exc
        return DefaultSource
    if name == "Dehydrator":
        from .dehydrator import Dehydrator

        return Dehydrator
    raise AttributeError(f"module 'pyspark_ick' has no attribute {name!r}")
