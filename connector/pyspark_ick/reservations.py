"""The reservation log of one Ick shard and the consumer lease (DESIGN §4, I5).

A reservation is a numbered manifest (member -> score) moved out of the pset in one Lua
call; the cset holds the union of the open ones. ``commit(n)`` closes every reservation
``<= n``; a member re-added while in flight was reserved again later and stays in the cset
until that later reservation is committed too. Counters live in the shard's ``rlog`` hash
(``reserved``: last number made, ``committed``: last number committed).

``Lease`` works on any lease hash (Ick or dehydrator shards): owner, fencing token and an
expiry from Redis time. Reserve and commit check owner and token inside their Lua, so a
consumer whose lease was taken cannot change anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import scripts
from .errors import IckScriptError, LeaseError
from .ick import text
from .keys import IckKeys, check_name


class LeaseBusy(LeaseError):
    """Another owner holds a live lease; ``idle_ms`` says how long ago it was renewed."""

    def __init__(self, message: str, owner: str, expires_in_ms: int, idle_ms: int) -> None:
        super().__init__(message)
        self.owner = owner
        self.expires_in_ms = expires_in_ms
        self.idle_ms = idle_ms


@dataclass
class Lease:
    """The lease hash ``key`` of one shard; ``label`` names the shard in errors."""

    client: Any
    key: str
    label: str

    def _call(self, mode: str, owner: str, token: int = 0, ttl_ms: int = 0) -> list[Any]:
        return scripts.run(self.client, "rlog_lease", [self.key], [mode, owner, token, ttl_ms])

    def _busy(self, reply: Sequence[Any], what: str) -> LeaseBusy:
        owner, expires, idle = text(reply[1]), int(reply[2]), int(reply[3])
        if not owner:
            return LeaseBusy(f"{self.label}: {what}: the lease was released", "", 0, 0)
        return LeaseBusy(f"{self.label}: {what}: consumer {owner!r} holds the lease "
                         f"(expires in {expires} ms unless renewed)", owner, expires, idle)

    def acquire(self, owner: str, ttl_ms: int) -> int:
        """Take the lease for ``owner``; returns a new fencing token, raises LeaseBusy."""
        reply = self._call("acquire", owner, 0, ttl_ms)
        if int(reply[0]) != 1:
            raise self._busy(reply, "cannot consume")
        return int(reply[1])

    def renew(self, owner: str, token: int, ttl_ms: int) -> None:
        """Extend the lease; raises LeaseBusy when it was taken (this consumer is fenced)."""
        reply = self._call("renew", owner, token, ttl_ms)
        if int(reply[0]) != 1:
            raise self._busy(reply, f"consumer {owner!r} lost its lease")

    def release(self, owner: str, token: int) -> bool:
        """Give the lease up if ``owner`` still holds it with ``token``."""
        return int(self._call("release", owner, token)[0]) == 1


def fenced(label: str, exc: IckScriptError) -> IckScriptError | LeaseError:
    """A LeaseError for a fencing refusal raised inside a Lua script, else ``exc``."""
    message = str(exc)
    if not message.startswith("LEASE"):
        return exc
    owner = message[len("LEASE"):].strip()
    holder = f"{owner!r} holds it now, with a newer token" if owner else "nobody holds it"
    return LeaseError(f"{label}: this consumer lost its lease ({holder}): "
                      "it may not reserve or commit any more")


class ReservationLog:
    """Reserve, read and commit numbered reservations of the Ick shard ``master``."""

    def __init__(self, client: Any, master: str, label: str | None = None) -> None:
        self.client = client
        self.keys = IckKeys(check_name(master))
        self.label = label or f"Ick {master!r}"
        self.lease = Lease(client, self.keys.lease, self.label)

    def reserve(self, limit: int | None, after: int, owner: str, token: int, ttl_ms: int
                ) -> tuple[int, int]:
        """Move up to ``limit`` members (None: all) into a new reservation.

        Reservations past ``after`` that exist already count against ``limit``. Returns
        (last reservation number, members moved); fenced by ``owner`` and ``token``.
        """
        k = self.keys
        args = [-1 if limit is None else int(limit), int(after), owner, token, ttl_ms]
        try:
            reply = scripts.run(self.client, "rlog_reserve",
                                [*k.base, k.rlog, k.lease, k.reservation_prefix], args)
        except IckScriptError as exc:
            raise fenced(self.label, exc) from exc
        return int(reply[0]), int(reply[1])

    def read(self, start: int, end: int) -> list[tuple[int, list[Any]]]:
        """``[(r, [member, score, ...]), ...]`` for reservations ``start < r <= end``."""
        if end <= start:
            return []
        reply = scripts.run(self.client, "rlog_read", [self.keys.reservation_prefix],
                            [int(start), int(end)])
        return [(int(reply[i]), reply[i + 1]) for i in range(0, len(reply), 2)]

    def commit(self, through: int, owner: str, token: int, ttl_ms: int) -> int:
        """Commit every reservation ``<= through``; returns the last committed number."""
        k = self.keys
        try:
            return int(scripts.run(self.client, "rlog_commit",
                                   [k.cset, k.rlog, k.lease, k.reservation_prefix],
                                   [int(through), owner, token, ttl_ms]))
        except IckScriptError as exc:
            raise fenced(self.label, exc) from exc

    def last_committed(self) -> int:
        return describe(self.client, self.keys.master)["last_committed"]

    def describe(self) -> dict[str, Any]:
        return describe(self.client, self.keys.master)


def describe(client: Any, master_key: str) -> dict[str, Any]:
    """The reservation log and lease of Ick shard ``master_key`` (for operators).

    Keys: last_reserved, last_committed, open_reservations, open_members, lease_owner
    (None when free), lease_expires_in_ms (None when free).
    """
    k = IckKeys(check_name(master_key))
    reply = scripts.run(client, "rlog_info", [k.rlog, k.lease, k.reservation_prefix])
    reserved, committed, members = int(reply[0]), int(reply[1]), int(reply[2])
    owner, expires = text(reply[3]), int(reply[4])
    return {
        "last_reserved": reserved,
        "last_committed": committed,
        "open_reservations": reserved - committed,
        "open_members": members,
        "lease_owner": owner or None,
        "lease_expires_in_ms": None if expires < 0 else expires,
    }


def snapshot(client: Any, master_key: str
             ) -> tuple[list[Any], list[Any], dict[str, int]]:
    """Non-destructive view of Ick shard ``master_key``: (pset flat, cset flat,
    member -> highest open reservation holding it)."""
    k = IckKeys(check_name(master_key))
    pset, cset, open_ = scripts.run(client, "rlog_snapshot",
                                    [*k.base, k.rlog, k.reservation_prefix])
    holder: dict[str, int] = {}
    for i in range(0, len(open_), 2):
        for member in open_[i + 1]:
            holder[text(member)] = int(open_[i])
    return pset, cset, holder
