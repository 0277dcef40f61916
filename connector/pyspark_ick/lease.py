"""Consumer leases with fencing tokens (I5), for the shards of any source (lua/lease.lua).

A lease hash holds the owner, a fencing token, an expiry and the last renewal, all in
Redis time. ``Lease.acquire`` returns a ``Fence`` (owner, a new token, the lease time);
the logs' reserve and commit take it and check it inside their Lua, so a consumer whose
lease was taken can change nothing. A refusal is ``errors.LeaseBusy`` (another owner
holds the lease) or ``errors.LeaseLost`` (this one was fenced): the script's ``ICK LEASE``
error, translated by ``redis_errors.lease_refusal``.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import scripts
from .clients import Client


@dataclass(frozen=True)
class Fence:
    """Who may change a shard's log: the lease owner, its fencing token and the lease
    time (ms) that every fenced call renews."""

    owner: str
    token: int
    ttl_ms: int


@dataclass
class Lease:
    """The lease hash ``key`` of one shard; ``label`` names the shard in errors."""

    client: Client
    key: str
    label: str

    def _call(
        self, mode: str, owner: str, token: int = 0, ttl_ms: int = 0, beat_ms: int = 1000
    ) -> int:
        return int(
            scripts.run(
                self.client,
                "lease",
                [self.key],
                [mode, owner, token, ttl_ms, beat_ms],
                what=self.label,
            )
        )

    def acquire(self, owner: str, ttl_ms: int, beat_ms: int = 1000) -> Fence:
        """Take the lease for ``owner``, who renews it every ``beat_ms``, with a new
        fencing token. Raises LeaseBusy while another owner renews it (a holder idle for
        3 renewal periods and a second is gone, and its lease is taken over)."""
        return Fence(owner, self._call("acquire", owner, 0, ttl_ms, beat_ms), ttl_ms)

    def renew(self, fence: Fence) -> None:
        """Extend the lease; raises LeaseLost when it was taken (this consumer is fenced)."""
        self._call("renew", fence.owner, fence.token, fence.ttl_ms)

    def release(self, fence: Fence) -> bool:
        """Give the lease up if ``fence`` still holds it."""
        return self._call("release", fence.owner, fence.token) == 1
