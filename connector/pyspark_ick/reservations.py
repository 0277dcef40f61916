"""The reservation log of one Ick shard and the consumer lease (DESIGN §4, I5).

A reservation is a numbered manifest (member, score, ... in score order) moved out of the
pset by one bounded Lua call (at most ``scripts.MOVES_PER_CALL`` members: a big batch is
several reservations); the cset holds the union of the open ones. ``commit(n)`` closes
every reservation ``<= n``; a member re-added while in flight was reserved again later and
stays in the cset until that later reservation is committed too (the ``held`` hash counts
such extra holders). Counters live in the shard's ``rlog`` hash (``reserved``: last number
made, ``committed``: last number committed, ``size:<r>``: members of open reservation r,
``repeated``: the last reservation that holds a member an earlier open one holds too).

Every script names every key it touches, manifests included, so a call reaches the node
that has them while a slot migrates. The client names the next manifest from the last
number it saw; a script that finds the log elsewhere (a replayed call whose reply was
lost) does nothing and says where the log is, and the client calls again.

Reserve and commit take the ``Fence`` of the shard's lease (lease.py) and check it inside
their Lua, so a consumer whose lease was taken cannot change anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

from . import scripts
from .connection import Client
from .errors import IckError
from .ick import Ick, text
from .keys import IckKeys, check_name
from .lease import Fence, Lease

logger = logging.getLogger("pyspark_ick.reservations")

KEYS_PER_CALL = 16  # manifests one read or commit call names at most


class Reserved(NamedTuple):
    """What a reserve (or claim) did: the log's last number, the items this call moved,
    and the items in all the reservations past the caller's ``after`` (moved now or
    before)."""

    head: int
    moved: int
    pending: int


class ReservationLog:
    """Reserve, read and commit numbered reservations of the Ick shard ``master``."""

    def __init__(self, client: Client, master: str, label: str | None = None) -> None:
        self.client = client
        self.keys = IckKeys(check_name(master))
        self.label = label or f"Ick {master!r}"
        self.lease = Lease(client, self.keys.lease, self.label)
        self._head: int | None = None  # the last reservation number seen
        self._committed: int | None = None  # the last committed number seen

    def counters(self) -> tuple[int, int]:
        """(last reserved, last committed), as Redis has them now."""
        self._head, self._committed = log_counters(self.client, self.keys.rlog, "reserved",
                                                   self.label)
        return self._head, self._committed

    def reserve(self, limit: int | None, after: int, fence: Fence) -> Reserved:
        """Move up to ``limit`` members (None: all) into new reservations, at most
        ``scripts.MOVES_PER_CALL`` per call and reservation.

        Reservations past ``after`` that exist already count against ``limit``; LeaseError
        when ``fence`` lost the lease.
        """
        k = self.keys

        def call(head: int, pending: int) -> Sequence[Any]:
            args = [-1 if limit is None else int(limit), int(after), *fence_args(fence),
                    head, scripts.MOVES_PER_CALL, pending]
            return scripts.run(self.client, "rlog_reserve",
                               [*k.base, k.rlog, k.lease, k.held, k.reservation(head + 1)],
                               args, what=self.label)

        start = max(self._head if self._head is not None else self.counters()[0], after)
        done = reserve_calls(call, start, limit, self.label)
        self._head = done.head
        return done

    def repeated(self) -> int:
        """The last reservation holding a member that an earlier open one holds too (a
        member re-added in flight and reserved again); 0: none. Reservations after it
        repeat no member of one another: they can be read apart."""
        return int(scripts.command(self.client, partial(self.client.hget, self.keys.rlog,
                                                        "repeated"), what=self.label) or 0)

    def read(self, start: int, end: int) -> list[tuple[int, list[Any]]]:
        """``[(r, [member, score, ...]), ...]`` for reservations ``start < r <= end``.

        A reservation that must exist and does not raises IckScriptError; one that Redis
        lost with its latest writes (past the log's head: a failover, a restore) is left
        out, and its members are queued again where Redis kept them.
        """
        return read_log(self.client, self.keys.rlog, self.keys.reservation, "reserved",
                        start, end, self.label)

    def commit(self, through: int, fence: Fence) -> int:
        """Commit every reservation ``<= through``; returns the last committed number."""
        k = self.keys

        def call(committed: int) -> Sequence[Any]:
            last = min(through, committed + KEYS_PER_CALL)
            manifests = [k.reservation(r) for r in range(committed + 1, last + 1)]
            return scripts.run(
                self.client, "rlog_commit", [k.cset, k.rlog, k.lease, k.held, *manifests],
                [int(through), *fence_args(fence), committed, scripts.ITEMS_PER_CALL],
                what=self.label)

        start = self._committed if self._committed is not None else self.counters()[1]
        self._committed = commit_calls(call, start, through, self.label)
        return self._committed

    def last_committed(self) -> int:
        return self.counters()[1]

    def backlog(self) -> int:
        """Members that reserves would take now: the queued ones, and those that a
        consumer outside the log (a gem consumer, ``Ick.reserve``) left in the cset,
        which the first reserve with no reservation open adopts (lua/rlog_reserve.lua)."""
        stats = Ick(self.client, self.keys.master).stats()
        if not stats:
            return 0
        held = self.describe()["open_members"]
        return int(stats["pset_size"]) + max(int(stats["cset_size"]) - held, 0)

    def describe(self) -> dict[str, Any]:
        return describe(self.client, self.keys.master)


def fence_args(fence: Fence) -> list[Any]:
    """ARGV of a fenced script: owner, fencing token, lease time in ms (fence() in Lua)."""
    return [fence.owner, fence.token, fence.ttl_ms]


def log_counters(client: Client, log_key: str, head_field: str, label: str) -> tuple[int, int]:
    """(last number made, last committed) of the reservation or claim log ``log_key``."""
    head, committed = scripts.command(
        client, partial(client.hmget, log_key, head_field, "committed"), what=label)
    return int(head or 0), int(committed or 0)


def reserve_calls(call: Callable[[int, int], Sequence[Any]], head: int, limit: int | None,
                  label: str) -> Reserved:
    """The client side of a bounded reserve (or claim): ``call(head, pending)`` runs one
    script call into number ``head + 1`` and replies ``[head, moved, pending]``, pending
    being what is reserved past the batch's start (the caller passes the last reply's, so
    only the first call counts the open reservations; -1: count). Calls until the limit is
    reached or a call moves less than MOVES_PER_CALL; a call that finds the log at another
    head (moved -1: a replayed call whose reply was lost) is made again from it."""
    moved = stale = 0
    pending = -1
    while True:
        reply = call(head, pending)
        head, got, pending = int(reply[0]), int(reply[1]), int(reply[2])
        if got < 0:
            stale = _again(stale, label)
            continue
        moved += got
        if got < scripts.MOVES_PER_CALL or (limit is not None and pending >= limit):
            return Reserved(head, moved, pending)


def commit_calls(call: Callable[[int], Sequence[Any]], committed: int, through: int,
                 label: str) -> int:
    """The client side of a bounded commit: ``call(committed)`` commits a few numbers after
    ``committed`` and replies ``[committed, done]`` (done 0: nothing left, -1: the log was
    at another number). Calls until ``through`` is committed; returns the last committed."""
    stale = 0
    while True:
        reply = call(committed)
        now, done = int(reply[0]), int(reply[1])
        if done < 0:
            stale = _again(stale, label)
        elif done == 0 or now >= through or now == committed:
            return now
        committed = now


def _again(stale: int, label: str) -> int:
    """Count a call that found the log elsewhere than the caller knew; a few in a row mean
    someone else writes this log."""
    if stale >= 3:
        raise IckError(f"{label}: the reservation log keeps moving under this consumer")
    return stale + 1


def read_log(client: Client, log_key: str, manifest: Callable[[int], str], head_field: str,
             start: int, end: int, label: str) -> list[tuple[int, list[Any]]]:
    """``[(n, items), ...]`` of the manifests ``start < n <= end`` of a reservation or
    claim log (lua/log_read.lua), in bounded calls."""
    out: list[tuple[int, list[Any]]] = []
    n = start
    while n < end:
        names = [manifest(r) for r in range(n + 1, min(end, n + KEYS_PER_CALL) + 1)]
        reply = scripts.run(client, "log_read", [log_key, *names],
                            [n, head_field, scripts.ITEMS_PER_CALL], what=label)
        for i in range(0, len(reply), 2):
            number, items = int(reply[i]), reply[i + 1]
            if items:
                out.append((number, items))
            else:
                logger.warning("%s: number %d was lost with writes Redis did not keep (a "
                            "failover or a restore); its items are delivered again later",
                            label, number)
        n = int(reply[-2])
    return out


def describe(client: Client, master_key: str) -> dict[str, Any]:
    """The reservation log and lease of Ick shard ``master_key`` (for operators).

    Keys: last_reserved, last_committed, open_reservations, open_members, lease_owner
    (None when free), lease_expires_in_ms (None when free).
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
    }


def snapshot(client: Client, master_key: str
             ) -> tuple[list[Any], list[Any], dict[str, int]]:
    """Non-destructive view of Ick shard ``master_key``: (pset flat, cset flat,
    member -> highest open reservation holding it), read in bounded calls.

    Paged, not atomic: a member queued or reserved for the whole read appears once; one
    reserved during the read appears as queued or as reserved (the pset is read first),
    unless it was committed too before the cset was read; adds during the read may show.
    """
    k = IckKeys(check_name(master_key))
    what = f"Ick {master_key!r}"
    if Ick(client, master_key).stats() is None:  # checks the version flag
        return [], [], {}
    pset, cset = scan_sorted_set(client, k.pset, what), scan_sorted_set(client, k.cset, what)
    holder: dict[str, int] = {}
    reserved, committed = ReservationLog(client, master_key).counters()
    for r in range(committed + 1, reserved + 1):
        members = scripts.command(client, partial(client.lrange, k.reservation(r), 0, -1),
                                  what=what)  # at most ITEMS_PER_CALL members
        for member in members[0::2]:
            holder[text(member)] = r
    return pset, cset, holder


def scan_sorted_set(client: Client, key: str, what: str) -> list[Any]:
    """``[member, score, ...]`` of sorted set ``key`` by score, read with ZSCAN pages of
    about ``scripts.ITEMS_PER_CALL`` (each member once)."""
    found: dict[Any, float] = {}
    cursor = 0
    while True:
        cursor, page = scripts.command(
            client, partial(client.zscan, key, cursor, count=scripts.ITEMS_PER_CALL),
            what=what)
        found.update(page)
        if int(cursor) == 0:
            break
    flat: list[Any] = []
    for member, score in sorted(found.items(), key=lambda item: (item[1], item[0])):
        flat += (member, score)
    return flat
