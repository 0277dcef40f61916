"""The stream reader's driver side: every shard's log, its lease held, and what the reader
reserved and committed through them (fenced calls, planned by planning.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..lease import Fence, Lease
from ..numbered_log import Reserved
from .compat import ReadAllAvailable, ReadLimit, ReadMaxRows
from .leases import Leases
from .planning import cap, shares, top_ups


class ShardLog(Protocol):
    """One shard's numbered log, as the reader uses it (``reservations.ReservationLog``,
    ``claims.ClaimLog``)."""

    label: str
    lease: Lease
    fates: dict[str, int]  # members its commits retried ("retried") or buried ("dead")
    ahead: bool  # its next reserves are the job ahead's (numbered_log.NumberedLog)

    def reserve(self, limit: int | None, after: int, fence: Fence) -> Reserved: ...
    def commit(self, through: int, fence: Fence) -> int: ...
    def last_committed(self) -> int: ...
    def repeated(self) -> int: ...
    def backlog(self) -> int: ...
    def read(self, start: int, end: int, token: str = "") -> Any: ...


def max_rows(limit: ReadLimit) -> int | None:
    """The rows ``limit`` allows per batch (None: all available)."""
    if isinstance(limit, ReadMaxRows):
        return int(limit.max_rows)
    if isinstance(limit, ReadAllAvailable):
        return None
    raise ValueError(
        f"read limit {limit!r} is not supported: a batch is capped by the source's option "
        "maxMembersPerTrigger (format 'ick') or maxElementsPerTrigger (format 'dehydrator')"
    )


class Driver:
    """The shard logs of one reader with their leases, the Trigger.AvailableNow budget
    (items each shard may still deliver, once set), the rotation of the limit's remainder,
    and the number committed per shard (an idle trigger then costs no commit round trip)."""

    def __init__(self, logs: Sequence[ShardLog], leases: Leases) -> None:
        self.logs, self.leases = list(logs), leases
        self.budget: list[int] | None = None
        self.rotation = 0
        self.committed = [-1] * len(self.logs)

    def rotate(self) -> None:
        """Give the next batch's remainder of the limit to the next shards."""
        self.rotation = (self.rotation + 1) % len(self.logs)

    def reserve(
        self,
        after: list[int],
        limit: ReadLimit,
        held: list[int] | None = None,
        ahead: bool = False,
    ) -> tuple[list[int], list[int]]:
        """Reserve each shard's share of ``limit`` past ``after`` (``held``: items of those
        ranges reserved and budgeted already, by the job ahead; ``ahead``: this is the job
        ahead); returns (last numbers, items in the ranges past ``after``)."""
        self.leases.check()
        for shard_log in self.logs:
            shard_log.ahead = ahead
        rows, shards = max_rows(limit), len(self.logs)
        share: list[int | None] = (
            [None] * shards if rows is None else list(shares(rows, shards, self.rotation))
        )
        numbers, sizes = list(after), [0] * shards

        def reserve(i: int, want: int | None) -> None:
            left = None if self.budget is None else self.budget[i]
            done = self.logs[i].reserve(
                cap(want, left, held[i] if held else 0), after[i], self.leases.fences[i]
            )
            numbers[i], sizes[i] = done.head, done.pending
            if self.budget is not None:
                self.budget[i] -= done.moved

        for i in range(shards):
            reserve(i, share[i])
        if rows is not None:  # hand what some shards left unused to the others
            for i, want in top_ups(rows, [s or 0 for s in share], sizes).items():
                reserve(i, want)
        return numbers, sizes

    def commit(self, through: list[int]) -> None:
        """Commit each shard through its number, skipping what this reader committed
        already."""
        self.leases.check()
        for i, shard_log in enumerate(self.logs):
            if through[i] > self.committed[i]:
                shard_log.commit(through[i], self.leases.fences[i])
                self.committed[i] = through[i]
