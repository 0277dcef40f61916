"""Dead letters of a logical Ick, for operators: list, count, re-drive, purge; and the
members waiting for a retry (docs/design.md §11, docs/operations.md's runbook).

A member becomes a dead letter when its last allowed attempt fails (retries.RetryPolicy):
it leaves the Ick with its attempt record (attempts, when the last failed, the score of
that delivery, its error) and waits in the shard's ``dead`` set until an operator
re-drives it (back into the Ick with the score it had, its attempts counted from zero)
or purges it. Every call is bounded (``bounds.ITEMS_PER_CALL`` members).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from . import bounds, scripts
from .ick import Ick
from .retries import AttemptRecord
from .sharded import ShardedIck
from .values import as_bytes, text


@dataclass(frozen=True)
class DeadLetter:
    """A member set aside after its last allowed attempt failed."""

    member: str
    shard: int
    dead_at_ms: int
    record: AttemptRecord

    @property
    def attempts(self) -> int:
        return self.record.attempts

    @property
    def error(self) -> str:
        return self.record.error


class DeadLetters:
    """The dead letters and pending retries of logical Ick ``sharded``."""

    def __init__(self, sharded: ShardedIck) -> None:
        self.sharded = sharded
        self.client = sharded.client

    def count(self) -> list[int]:
        """Dead letters per shard."""
        return self._sizes("dead")

    def retrying(self) -> list[int]:
        """Members waiting for a retry, per shard."""
        return self._sizes("retry")

    def _sizes(self, part: str) -> list[int]:
        return [
            int(
                scripts.command(
                    self.client,
                    partial(self.client.zcard, getattr(self.shard(i).keys, part)),
                    what=self.sharded.label,
                )
            )
            for i in range(self.sharded.shards)
        ]

    def shard(self, i: int) -> Ick:
        return self.sharded.shard(i)

    def read(self, limit: int | None = None) -> Iterator[DeadLetter]:
        """Dead letters, oldest first in each shard, shard by shard; at most ``limit``."""
        left = limit
        for i in range(self.sharded.shards):
            for letter in self._shard_letters(i):
                if left is not None:
                    if left <= 0:
                        return
                    left -= 1
                yield letter

    def _shard_letters(self, i: int) -> Iterator[DeadLetter]:
        keys, label = self.shard(i).keys, self.sharded.label
        start = 0
        while True:
            page = scripts.command(
                self.client,
                partial(
                    self.client.zrange,
                    keys.dead,
                    start,
                    start + bounds.ITEMS_PER_CALL - 1,
                    withscores=True,
                ),
                what=label,
            )
            if not page:
                return
            members = [m for m, _ in page]
            records = scripts.command(
                self.client, partial(self.client.hmget, keys.deadinfo, members), what=label
            )
            for (member, at), record in zip(page, records, strict=True):
                if record is not None:  # purged meanwhile
                    yield DeadLetter(text(member), i, int(at), AttemptRecord.parse(record))
            if len(page) < bounds.ITEMS_PER_CALL:
                return
            start += bounds.ITEMS_PER_CALL

    def redrive(self, members: Iterable[Any] | None = None) -> int:
        """Put dead letters back into the Ick (each with its score, its attempts counted
        from zero): ``members``, or every one. Returns how many."""
        return self._apply("redrive", members)

    def purge(self, members: Iterable[Any] | None = None) -> int:
        """Drop dead letters for good: ``members``, or every one. Returns how many."""
        return self._apply("purge", members)

    def _apply(self, mode: str, members: Iterable[Any] | None) -> int:
        done = 0
        step = bounds.ITEMS_PER_CALL
        if members is None:
            for i in range(self.sharded.shards):
                while n := self._call(i, mode, []):
                    done += n
            return done
        by_shard: dict[int, list[bytes]] = {}
        for member in members:
            by_shard.setdefault(self.sharded.shard_of(member), []).append(as_bytes(member))
        for i, listed in by_shard.items():
            for first in range(0, len(listed), step):
                done += self._call(i, mode, listed[first : first + step])
        return done

    def _call(self, i: int, mode: str, members: list[bytes]) -> int:
        keys = self.shard(i).keys
        return int(
            scripts.run(
                self.client,
                "dead_letters",
                [*keys.base, keys.dead, keys.deadinfo],
                [mode, bounds.ITEMS_PER_CALL, *members],
                what=self.sharded.label,
            )
        )
