"""The reservation log of one Ick shard: the Ick's numbered log (numbered_log.py;
docs/design.md §4, I5), and read-only views of a shard for operators.

A reservation is a numbered manifest (member, score, ... in score order) moved out of the
pset; the cset holds the union of the open ones. ``commit(n)`` closes every reservation
``<= n``; a member re-added while in flight was reserved again later and stays in the cset
until that later reservation is committed too (the ``held`` hash counts such extra
holders). The shard's ``rlog`` hash keeps the log's counters and ``repeated``: the last
reservation that holds a member an earlier open one holds too. (What a snapshot reads of
a shard: snapshots.py.)
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from . import scripts
from .clients import Client
from .ick import Ick
from .keys import IckKeys, check_name
from .numbered_log import Manifest, NumberedLog
from .retries import hand_back
from .values import text


class ReservationLog(NumberedLog):
    """Reserve, read and commit numbered reservations of the Ick shard ``master``."""

    keys: IckKeys
    head_field = "reserved"
    reserve_script = "rlog_reserve"
    commit_script = "rlog_commit"

    def __init__(self, client: Client, master: str, label: str | None = None) -> None:
        self.keys = IckKeys(check_name(master))
        super().__init__(client, self.keys.rlog, self.keys.lease, label or f"Ick {master!r}")
        self.backfill_share: float | None = None  # option backfillShare (None: score order)
        # backfill members of each open reservation this client made (lua/rlog_reserve.lua
        # keeps the share of a batch with them; one it did not make counts none)
        self.backfill: dict[int, int] = {}

    def reserve_more(self, after: int) -> list[Any]:
        """ARGV[10..12] of rlog_reserve: the backfill's share, its members in the
        reservations past ``after`` this client made, and whether this reserve is made
        ahead (then it takes no more backfill than the share: the next batch's top-up
        takes live members added meanwhile first)."""
        if self.backfill_share is None:
            return []
        taken = sum(n for r, n in self.backfill.items() if r > after)
        return [repr(self.backfill_share), taken, "1" if self.ahead else "0"]

    def reserved(self, head: int, reply: list[Any]) -> None:
        """Count the backfill members of reservation ``head`` (rlog_reserve's 5th reply);
        forget those of reservations committed since."""
        if len(reply) > 4 and int(reply[4]) > 0:
            self.backfill[head] = int(reply[4])
        done = self._committed or 0
        if done and min(self.backfill, default=done + 1) <= done:
            self.backfill = {r: n for r, n in self.backfill.items() if r > done}

    def reserve_keys(self, head: int) -> list[str]:
        k = self.keys
        return [*k.base, k.rlog, k.lease, k.held, k.reservation(head + 1), k.retry, k.attempts]

    def commit_keys(self, numbers: range) -> list[str]:
        k = self.keys
        return [
            *(k.cset, k.rlog, k.lease, k.held, *k.fates, k.failed, k.fresh),
            *map(k.reservation, numbers),
        ]

    def repeated(self) -> int:
        """The last reservation holding a member that an earlier open one holds too (a
        member re-added in flight and reserved again); 0: none."""
        return int(
            scripts.command(
                self.client, partial(self.client.hget, self.keys.rlog, "repeated"), what=self.label
            )
            or 0
        )

    def read(self, start: int, end: int, token: str = "") -> list[Manifest]:
        """Reservations ``start < r <= end``: items member, score, ... by score, the
        deliveries and the failed attempts of each member (NumberedLog.read_numbered)."""
        return self.read_numbered(start, end, token)

    def fail(
        self, reservation: int, delivery: int, failures: Mapping[Any, Any]
    ) -> tuple[int, int, int]:
        """Hand back ``{member: error}`` of open reservation ``reservation``, failed in
        ``delivery``: its commit retries or buries them (retries.hand_back)."""
        return hand_back(self.client, self.keys, reservation, delivery, failures, self.label)

    def backlog(self) -> int:
        """Members that reserves would take now: the queued ones, and those that a
        consumer outside the log (a gem consumer, ``Ick.reserve``) left in the cset,
        which the first reserve with no reservation open adopts (lua/rlog_reserve.lua)."""
        stats = Ick(self.client, self.keys.master).stats()
        if not stats:
            return 0
        held = self.describe()["open_members"]
        due = scripts.run(self.client, "due_count", [self.keys.retry], [""], what=self.label)
        return int(stats["pset_size"]) + max(int(stats["cset_size"]) - held, 0) + int(due)

    def describe(self) -> dict[str, Any]:
        return describe(self.client, self.keys.master)


def describe(client: Client, master_key: str) -> dict[str, Any]:
    """The reservation log and lease of Ick shard ``master_key`` (for operators).

    Keys: last_reserved, last_committed, open_reservations, open_members, lease_owner
    (None when free), lease_expires_in_ms (None when free), lease_idle_ms (ms since the
    holder last renewed it, its heartbeat's age; None when free), done (members the
    commits closed, in all: a counter).
    """
    k = IckKeys(check_name(master_key))
    reply = scripts.run(client, "rlog_info", [k.rlog, k.lease], what=f"Ick {master_key!r}")
    reserved, committed, members = int(reply[0]), int(reply[1]), int(reply[2])
    owner, expires = text(reply[3]), int(reply[4])
    return {
        "last_reserved": reserved,
        "last_committed": committed,
        "open_reservations": reserved - committed,
        "open_members": members,
        "lease_owner": owner or None,
        "lease_expires_in_ms": None if expires < 0 else expires,
        "lease_idle_ms": None if expires < 0 else int(reply[6]),
        "done": int(reply[5]),
    }
