"""Every error this library raises derives from IckError."""

from __future__ import annotations


class IckError(Exception):
    """Base class of every error raised by pyspark-ick."""


class IckConfigError(IckError, ValueError):
    """A bad option, argument or schema, found before anything touched Redis."""


class IckConnectionError(IckError, ConnectionError):
    """Redis could not be reached (after retries) or refused the credentials."""


class IckScriptError(IckError):
    """Redis refused an operation: a wrong key type, a missing version flag, ..."""


class RedisFullError(IckScriptError):
    """Redis is at maxmemory and refuses writes that grow it (producers wait for a drain)."""


class ShardCountError(IckError):
    """The shard count given differs from the one recorded in Redis."""


class LeaseError(IckError):
    """Another consumer holds the lease of a shard, or this one lost it (fencing)."""
