"""Shard leases as operators' commands see and take them (docs/design.md §4.6).

``holder`` says who holds a shard's lease now (``del``, ``reshard`` and ``release`` refuse
a consumer that holds one). ``Hold`` takes the leases of several shards for the length of
one command (``reshard``, ``release``), with new fencing tokens: no consumer can reserve or
commit meanwhile, and whatever a dead query left running is fenced for good (its calls
fail with LeaseLost). A holder that still renews its lease is a live query and is refused;
one idle for 3 of its renewal periods and a second is gone (lua/lease.lua).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from . import scripts
from .clients import Client
from .errors import LeaseBusy, LeaseError
from .lease import Fence, Lease
from .values import text

HOLD_MS = 60_000
"""Lease time of an operator's hold: it expires by itself this long after a crash."""

BEAT_MS = 1000
"""How often a hold renews its leases (so it counts as gone 4 s after a crash)."""


@dataclass(frozen=True)
class Holder:
    """Who holds the lease of one shard (``label`` names it): its owner, ms until the
    lease expires unless renewed, ms since the last renewal, and after how many ms without
    renewal it counts as gone."""

    label: str
    owner: str
    expires_in_ms: int
    idle_ms: int
    gone_after_ms: int

    @property
    def gone(self) -> bool:
        """Whether the holder stopped renewing long enough to count as crashed."""
        return self.idle_ms >= self.gone_after_ms

    def __str__(self) -> str:
        return (
            f"{self.label}: consumer {self.owner!r} holds the lease (renewed "
            f"{self.idle_ms} ms ago, expires in {self.expires_in_ms / 1000:.1f} s unless renewed)"
        )


def holder(client: Client, lease_key: str, label: str) -> Holder | None:
    """The holder of lease hash ``lease_key``; None when nobody holds it (or it expired)."""
    owner, expires, idle, gone, _ = scripts.run(client, "lease_info", [lease_key], what=label)
    if not owner or int(expires) <= 0:
        return None
    return Holder(label, text(owner), int(expires), int(idle), int(gone))


def in_use(what: str, held: Sequence[Holder], name: str, consequence: str) -> LeaseError:
    """The refusal of an operator's command on ``what`` while consumers hold leases:
    who holds them and what to do first; ``consequence`` says what was (not) done."""
    more = f" (and {len(held) - 1} more shards)" if len(held) > 1 else ""
    return LeaseError(
        f"{what}: {held[0]}{more}. Stop that query first (query.stop() gives its leases "
        f"back); if it died, `pyspark-ick release {name}` hands its reservations back and "
        f"drops its leases. {consequence}"
    )


def holders(client: Client, leases: Sequence[tuple[str, str]]) -> list[Holder]:
    """The holders of ``(lease key, label)`` pairs that are held now."""
    found = (holder(client, key, label) for key, label in leases)
    return [h for h in found if h is not None]


class Hold:
    """The leases of ``(lease key, label)`` pairs, held by one operator's command as
    ``owner`` until ``give_back`` (renewed by ``renew`` as the work goes)."""

    def __init__(self, client: Client, leases: Sequence[tuple[str, str]], owner: str) -> None:
        self.leases = {key: Lease(client, key, label) for key, label in leases}
        self.owner = owner
        self.fences: dict[str, Fence] = {}
        self._renewed = 0.0

    def take(self, wait_for_gone: bool = False) -> None:
        """Take every lease with a new fencing token, or none (those taken are given back
        when one fails). A lease another owner renews is refused (LeaseError naming it).
        With ``wait_for_gone``, a holder that renewed lately but stops renewing (a query
        killed a moment ago) is waited for until it counts as gone, at most a few seconds;
        otherwise it is refused too."""
        try:
            for key, lease in self.leases.items():
                self.fences[key] = self._take(lease, wait_for_gone)
        except BaseException:
            self.give_back()
            raise
        self._renewed = time.monotonic()

    def _take(self, lease: Lease, wait_for_gone: bool) -> Fence:
        seen: int | None = None
        while True:
            try:
                return lease.acquire(self.owner, HOLD_MS, BEAT_MS)
            except LeaseBusy as busy:
                live = seen is not None and busy.renewed_at != seen
                if live or not wait_for_gone:
                    raise LeaseError(
                        f"{lease.label}: consumer {busy.owner!r} holds the lease and "
                        + (
                            "renewed it while this command waited: a live query. "
                            if live
                            else f"renewed it {busy.idle_ms} ms ago. "
                        )
                        + "Stop that query first (query.stop() gives its leases back)"
                        + ("" if live else "; if it died, run this again in a few seconds")
                    ) from None
                seen = busy.renewed_at
                beat = (busy.gone_after_ms - 1000) / 3
                wait = min(busy.gone_after_ms - busy.idle_ms, 1.5 * beat)
                time.sleep(max(wait, 10) / 1000 + 0.02)

    def fence(self, lease_key: str) -> Fence:
        """The fence of the lease ``lease_key`` (taken)."""
        return self.fences[lease_key]

    def renew(self, force: bool = False) -> None:
        """Renew every lease held if a renewal period has passed (or ``force``); LeaseLost
        if one was taken from this command."""
        if force or time.monotonic() - self._renewed >= BEAT_MS / 1000:
            for key, fence in self.fences.items():
                self.leases[key].renew(fence)
            self._renewed = time.monotonic()

    def give_back(self) -> None:
        """Release every lease held (their fencing tokens stay counted, so a fenced caller
        stays fenced)."""
        for key, fence in self.fences.items():
            self.leases[key].release(fence)
        self.fences.clear()
