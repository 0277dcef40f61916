"""Every error this library raises derives from IckError."""

from __future__ import annotations


class IckError(Exception):
    """Base class of every error raised by pyspark-ick."""


class IckConfigError(IckError, ValueError):
    """A bad option, argument or schema, found before anything touched Redis."""


class IckConnectionError(IckError, ConnectionError):
    """Redis could not be reached (after retries) or refused the credentials."""


class ReplicationError(IckConnectionError):
    """Fewer replicas than redis.waitReplicas confirmed a write within redis.waitTimeout."""


class IckScriptError(IckError):
    """Redis refused an operation: a wrong key type, a missing version flag, ..."""


class RedisFullError(IckScriptError):
    """Redis is at maxmemory and refuses writes that grow it (producers wait for a drain)."""


class ShardCountError(IckError):
    """The shard count given differs from the one recorded in Redis."""


class LayoutError(IckError):
    """Redis holds a newer layout than this release knows (a newer release wrote it), or a
    rollback to an older layout would strand what that release cannot read."""


class LeaseError(IckError):
    """Another consumer holds the lease of a shard, or this one lost it (fencing)."""


class LeaseLost(LeaseError):
    """This consumer was fenced: ``owner`` (empty: nobody) holds the lease now, with a newer
    token, and this one may not reserve or commit any more."""

    def __init__(self, message: str, owner: str = "") -> None:
        super().__init__(message)
        self.owner = owner


class LeaseBusy(LeaseError):
    """Another owner holds a live lease: ``idle_ms`` since its renewal at ``renewed_at``
    (Redis time, ms); it counts as gone once idle for ``gone_after_ms``."""

    def __init__(
        self,
        message: str,
        owner: str,
        expires_in_ms: int,
        idle_ms: int,
        renewed_at: int = 0,
        gone_after_ms: int = 0,
    ) -> None:
        super().__init__(message)
        self.owner = owner
        self.expires_in_ms = expires_in_ms
        self.idle_ms = idle_ms
        self.renewed_at = renewed_at
        self.gone_after_ms = gone_after_ms
