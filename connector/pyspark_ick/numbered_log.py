"""The numbered log of one shard (docs/design.md §4): what the Ick's reservations and the
dehydrator's claims both are.

Items move from a shard's live store into numbered manifests by bounded *reserve* calls
(at most ``bounds.MOVES_PER_CALL`` items per call and manifest: a big batch is several
manifests); they are read back by number, any number of times, and leave when the log is
*committed* through a number. The counters live in the log hash: the head field (the last
number made), ``committed`` and ``size:<n>`` of each open manifest. Reserve and commit
take the ``Fence`` of the shard's lease and check it inside their Lua (I5). With
redis.waitReplicas, a reserve or commit returns once the replicas have it
(replication.write; both are replay-safe), so an offset Spark logs names manifests that
survive a failover.

The client names the next manifest from the last number it saw; a script that finds the
log elsewhere (a replayed call whose reply was lost) does nothing and says where the log
is, and the client calls again. The scripts of both kinds take their ARGV in one order:
``RESERVE_ARGV`` and ``COMMIT_ARGV`` (read by tests/test_bounded_calls.py too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from functools import partial
from typing import Any, ClassVar, NamedTuple

from . import bounds, pinned, replication, scripts
from .clients import Client, settings
from .errors import IckConnectionError, IckError
from .keys import ShardKeys
from .lease import Fence, Lease
from .retries import RetryPolicy

logger = logging.getLogger("pyspark_ick.numbered_log")

RESERVE_ARGV = ("limit", "after", "owner", "token", "ttl_ms", "head", "per_call", "pending", "now")
"""ARGV of rlog_reserve and dh_claim, in order (``now``: dh_claim's clock, optional)."""

COMMIT_ARGV = ("through", "owner", "token", "ttl_ms", "committed", "per_call")
"""ARGV of rlog_commit and dh_commit, in order (rlog_commit adds a RetryPolicy's args)."""


class Reserved(NamedTuple):
    """What a reserve (or claim) did: the log's last number, the items this call moved,
    and the items in all the manifests past the caller's ``after`` (moved now or before)."""

    head: int
    moved: int
    pending: int


class Manifest(NamedTuple):
    """One manifest as a reader reads it: its number, its items (member, score, ... or id,
    due, element, ...), its deliveries so far (this read counted), and the failed attempts
    of each member (an Ick's; empty when none has any)."""

    number: int
    items: list[Any]
    deliveries: int
    attempts: list[int]


class InFlight(NamedTuple):
    """An open manifest as operators see it: its number, its items, its deliveries so far
    and the score (Ick) or due time (dehydrator) of its first item (None: empty)."""

    number: int
    size: int
    deliveries: int
    first: float | None


def deliveries(client: Client, log_key: str, numbers: Iterable[int], label: str) -> dict[int, int]:
    """The deliveries counted for manifests ``numbers`` of the log hash ``log_key`` (0:
    not read yet), in calls of at most ``bounds.ITEMS_PER_CALL``."""
    wanted = sorted(set(numbers))
    out: dict[int, int] = {}
    for i in range(0, len(wanted), bounds.ITEMS_PER_CALL):
        part = wanted[i : i + bounds.ITEMS_PER_CALL]
        fields = scripts.command(
            client, partial(client.hmget, log_key, [f"dlv:{n}" for n in part]), what=label
        )
        for n, field in zip(part, fields, strict=True):
            out[n] = int(field.split(b" ")[0]) if field else 0
    return out


def fence_args(fence: Fence) -> list[Any]:
    """ARGV of a fenced script: owner, fencing token, lease time in ms (fence() in Lua)."""
    return [fence.owner, fence.token, fence.ttl_ms]


class NumberedLog:
    """One shard's numbered log. A kind of log names its scripts and head field and the
    keys each call touches (every key a script touches is one of its KEYS, so a call
    reaches the node that has them while a slot migrates)."""

    head_field: ClassVar[str]
    keys: ShardKeys  # the shard's keys (a kind of log sets them)
    reserve_script: ClassVar[str]
    commit_script: ClassVar[str]

    def __init__(self, client: Client, log_key: str, lease_key: str, label: str) -> None:
        self.client = client
        self.log_key = log_key
        self.label = label
        self.lease = Lease(client, lease_key, label)
        self._head: int | None = None  # the last number seen
        self._committed: int | None = None  # the last committed number seen
        self.policy: RetryPolicy | None = None  # an Ick's: how failed members are retried
        # a reserve made ahead of Spark (the job ahead): a kind of log may leave room in it
        # for what comes meanwhile (an Ick's live members: reservations.py)
        self.ahead = False
        self.fates = {"retried": 0, "dead": 0}  # members the commits retried or buried

    # --- what a kind of log provides ----------------------------------------------------

    def manifest(self, number: int) -> str:
        """The key of manifest ``number``."""
        return self.keys.manifest(number)

    def reserve_keys(self, head: int) -> list[str]:
        """KEYS of a reserve call into manifest ``head + 1``."""
        raise NotImplementedError

    def commit_keys(self, numbers: range) -> list[str]:
        """KEYS of a commit call of manifests ``numbers``."""
        raise NotImplementedError

    def now(self) -> str:
        """ARGV ``now`` of the reserve script ("": Redis server time)."""
        return ""

    def reserve_more(self, after: int) -> list[Any]:
        """ARGV a kind of log adds after RESERVE_ARGV for a reserve past ``after``."""
        return []

    def reserved(self, head: int, reply: list[Any]) -> None:
        """What a kind of log keeps of a reserve call's ``reply`` that made manifest
        ``head`` (its items moved: ``reply[1]``)."""

    def repeated(self) -> int:
        """The last manifest holding an item an earlier open one holds too; 0: none.
        Manifests after it repeat no item of one another: they can be read apart."""
        return 0

    # --- the log --------------------------------------------------------------------------

    def counters(self) -> tuple[int, int]:
        """(last number made, last committed), as Redis has them now."""
        head, committed = scripts.command(
            self.client,
            partial(self.client.hmget, self.log_key, self.head_field, "committed"),
            what=self.label,
        )
        self._head, self._committed = int(head or 0), int(committed or 0)
        return self._head, self._committed

    def last_committed(self) -> int:
        return self.counters()[1]

    def in_flight(self, most: int) -> tuple[int, list[InFlight]]:
        """How many manifests are open, and the first ``most`` of them (oldest first),
        read by ``2 + most`` bounded calls (changes nothing)."""
        head, committed = self.counters()
        numbers = range(committed + 1, min(head, committed + most) + 1)
        sizes = scripts.command(
            self.client,
            partial(self.client.hmget, self.log_key, [f"size:{n}" for n in numbers] or ["-"]),
            what=self.label,
        )
        counted = deliveries(self.client, self.log_key, numbers, self.label)
        out = []
        for n, size in zip(numbers, sizes, strict=False):
            first = scripts.command(
                self.client, partial(self.client.lindex, self.manifest(n), 1), what=self.label
            )
            out.append(
                InFlight(n, int(size or 0), counted[n], None if first is None else float(first))
            )
        return head - committed, out

    def reserve(self, limit: int | None, after: int, fence: Fence) -> Reserved:
        """Move up to ``limit`` items (None: all) into new manifests, at most
        ``bounds.MOVES_PER_CALL`` per call and manifest. Manifests past ``after`` that
        exist already count against ``limit``; LeaseLost when ``fence`` lost the lease.
        With redis.waitReplicas, returns once the replicas have them (replication.write:
        run again, a replay finds the manifests past ``after`` and counts them)."""
        return replication.write(
            self.client, lambda c: self._reserve(c, limit, after, fence), what=self.label
        )

    def _reserve(self, client: Client, limit: int | None, after: int, fence: Fence) -> Reserved:
        head = max(self._head if self._head is not None else self.counters()[0], after)
        moved = stale = 0
        pending = -1  # -1: the first call counts the open manifests
        while True:
            argv = [
                -1 if limit is None else int(limit),
                int(after),
                *fence_args(fence),
                head,
                bounds.MOVES_PER_CALL,
                pending,
                self.now(),
                *self.reserve_more(after),
            ]
            reply = scripts.run(
                client, self.reserve_script, self.reserve_keys(head), argv, what=self.label
            )
            head, got, pending = int(reply[0]), int(reply[1]), int(reply[2])
            requeued = int(reply[3]) if len(reply) > 3 else 0  # put back into the queue
            if got < 0:  # a replayed call found the log at another head: again from there
                stale = self._again(stale)
                continue
            moved += got
            if got > 0:
                self.reserved(head, reply)
            full = got == bounds.MOVES_PER_CALL or requeued > 0
            if not full or (limit is not None and pending >= limit):
                self._head = head
                return Reserved(head, moved, pending)

    def read_numbered(self, start: int, end: int, token: str = "") -> list[Manifest]:
        """The manifests ``start < n <= end`` (lua/log_read.lua), in bounded calls; the
        first read by a reader whose delivery ``token`` differs from the last counts one
        delivery more ("": count nothing). A manifest that must exist and does not raises
        IckScriptError. A number past the log's head on the node read is read again on the
        node Sentinel or the cluster's slots name now (``pinned.reroute``): an old
        connection may reach a replaced primary that still runs, which lacks it (issue 46).
        Still missing there, it was lost with writes Redis did not keep (a failover, a
        restore): left out, its items are back where Redis kept them. With
        redis.waitReplicas a reserve that returned is on a replica, so it cannot be lost:
        the read asks again until redis.retryTimeout, then fails (Spark runs the batch
        again); it never reads as empty."""
        deadline: float | None = None
        pause = 0.05
        while True:
            out, lost = self._read_range(start, end, token)
            if not lost:
                return out
            moved = pinned.reroute(self.client, self.log_key)
            if deadline is None:  # read once more, wherever the primary is named now
                logger.warning(
                    "%s: number(s) %s past the log's head on the node read (a replaced "
                    "primary?); reading again on the primary named now%s",
                    self.label,
                    ", ".join(map(str, lost)),
                    " (it moved)" if moved else "",
                )
                deadline = time.monotonic() + settings(self.client).retry_timeout
                continue
            if not replication.waits(self.client):
                for number in lost:
                    logger.warning(
                        "%s: number %d was lost with writes Redis did not keep (a "
                        "failover or a restore); its items are delivered again later",
                        self.label,
                        number,
                    )
                return out
            if time.monotonic() > deadline:
                raise IckConnectionError(
                    f"{self.label}: number(s) {', '.join(map(str, lost))} of {start + 1}.."
                    f"{end} are missing on the primary read, for redis.retryTimeout "
                    f"({settings(self.client).retry_timeout:g} s) of asking Sentinel or the "
                    "cluster where the primary is. With redis.waitReplicas their reserve "
                    "reached a replica: this node is a replaced primary that still runs, or "
                    "the replica promoted was not the one that confirmed it. The batch is "
                    "not delivered; Spark runs it again (INFO replication on each node "
                    "shows which one is stale)"
                )
            if not moved:
                time.sleep(pause)
                pause = min(2 * pause, 1.0)

    def _read_range(self, start: int, end: int, token: str) -> tuple[list[Manifest], list[int]]:
        """One read of the manifests ``start < n <= end``: those found, and the numbers
        past the log's head on the node that answered (read as empty)."""
        out: list[Manifest] = []
        lost: list[int] = []
        n = start
        while n < end:
            names = [self.manifest(r) for r in range(n + 1, min(end, n + bounds.KEYS_PER_CALL) + 1)]
            reply = scripts.run(
                self.client,
                "log_read",
                [self.log_key, *names],
                [n, self.head_field, bounds.ITEMS_PER_CALL, token],
                what=self.label,
            )
            for i in range(0, len(reply), 4):
                number, items = int(reply[i]), reply[i + 1]
                if items:
                    attempts = [int(a) for a in reply[i + 3]]
                    out.append(Manifest(number, items, int(reply[i + 2]), attempts))
                else:
                    lost.append(number)
            n = int(reply[-4])
        return out, lost

    def commit(self, through: int, fence: Fence) -> int:
        """Commit every manifest ``<= through`` (idempotent); returns the last committed.
        With redis.waitReplicas, once the replicas have the commit (replication.write)."""
        return replication.write(
            self.client, lambda c: self._commit(c, through, fence), what=self.label
        )

    def _commit(self, client: Client, through: int, fence: Fence) -> int:
        committed = self._committed if self._committed is not None else self.counters()[1]
        stale = 0
        while True:
            last = min(through, committed + bounds.KEYS_PER_CALL)
            argv = [int(through), *fence_args(fence), committed, bounds.ITEMS_PER_CALL]
            reply = scripts.run(
                client,
                self.commit_script,
                self.commit_keys(range(committed + 1, last + 1)),
                argv + ([self.policy.arg()] if self.policy else []),
                what=self.label,
            )
            now, done = int(reply[0]), int(reply[1])
            if len(reply) > 3 and done > 0:
                self.fates["retried"] += int(reply[2])
                self.fates["dead"] += int(reply[3])
            if done < 0:
                stale = self._again(stale)
            elif done == 0 or now >= through or now == committed:
                self._committed = now
                return now
            committed = now

    def _again(self, stale: int) -> int:
        """Count a call that found the log elsewhere than this client knew; a few in a row
        mean someone else writes this log."""
        if stale >= 3:
            raise IckError(f"{self.label}: the log keeps moving under this consumer")
        return stale + 1
