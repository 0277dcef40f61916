"""Dead letters of a logical Ick, for operators: list, count, re-drive, purge; and the
members waiting for a retry (docs/design.md §11, docs/operations.md's runbook).

A member becomes a dead letter when its last allowed attempt fails (retries.RetryPolicy):
it leaves the Ick with its attempt record (attempts, when the last failed, the score of
that delivery, its error) and waits in the shard's ``dead`` set until an operator
re-drives it (back into the Ick with the score it had, its attempts counted from zero)
or purges it. A dead letter that a reshard before this release left in a shard that is
not its member's (a stray) is found where it is, and re-driven into its member's shard
only (carried there first: carry.py), never into the shard it sat in. Every call is
bounded (``bounds.ITEMS_PER_CALL`` members). ``scan`` and ``apply_matching`` look for the
dead letters of one error (or member) page by page from a cursor, so that no request
reads every dead letter in one go.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from . import bounds, scripts
from .carry import carry
from .ick import Ick
from .retries import AttemptRecord
from .sharded import ShardedIck
from .values import as_bytes, text

PER_CALL = bounds.ITEMS_PER_CALL // 4
"""Dead letters one re-drive or purge call handles: each reads its record (up to a 1,000
byte error), writes the pset and deletes from two keys; 1,000 a call took 5-8 ms on a
loaded machine (bench/bench_console.py), 250 stay within the few ms of docs/design.md §9."""


SCAN_PAGE = bounds.ITEMS_PER_CALL // 4
"""Dead letters one page of a scan reads (a ZRANGE and an HMGET of their records, each
record up to a 1,000 byte error): as many as a re-drive call handles, since an HMGET of
twice that many passed the few ms of docs/design.md §9 (docs/console.md)."""


@dataclass(frozen=True)
class Cursor:
    """Where a scan of the dead letters goes on: ``index`` in shard ``shard``'s dead set
    (oldest first)."""

    shard: int = 0
    index: int = 0


@dataclass(frozen=True)
class Scan:
    """One page of a scan: the matching dead letters, how many were looked at, and where
    to go on (None: every shard was looked through)."""

    letters: list[DeadLetter]
    looked: int
    next: Cursor | None


@dataclass(frozen=True)
class Applied:
    """What ``apply_matching`` did: dead letters re-driven or purged, looked at, and
    whether every shard was looked through."""

    done: int
    looked: int
    finished: bool


def matches(letter: DeadLetter, error: str = "", member: str = "") -> bool:
    """Whether ``letter``'s error and member hold ``error`` and ``member`` (ignoring case;
    "" matches anything)."""
    return error.casefold() in letter.error.casefold() and (
        member.casefold() in letter.member.casefold()
    )


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
        start = 0
        while True:
            size, page = self.page(i, start, bounds.ITEMS_PER_CALL)
            yield from (letter for letter in page if letter is not None)
            if size < bounds.ITEMS_PER_CALL:
                return
            start += bounds.ITEMS_PER_CALL

    def page(self, i: int, start: int, count: int) -> tuple[int, list[DeadLetter | None]]:
        """The dead letters of shard ``i`` at positions ``start`` to ``start + count - 1``
        (oldest first; at most ``bounds.ITEMS_PER_CALL``): how many positions the page
        covered, and each letter (None: purged meanwhile). Two bounded calls."""
        keys, label = self.shard(i).keys, self.sharded.label
        count = min(count, bounds.ITEMS_PER_CALL)
        found = scripts.command(
            self.client,
            partial(self.client.zrange, keys.dead, start, start + count - 1, withscores=True),
            what=label,
        )
        if not found:
            return 0, []
        members = [m for m, _ in found]
        records = scripts.command(
            self.client, partial(self.client.hmget, keys.deadinfo, members), what=label
        )
        return len(found), [
            None
            if record is None
            else DeadLetter(text(member), i, int(at), AttemptRecord.parse(record))
            for (member, at), record in zip(found, records, strict=True)
        ]

    def scan(
        self,
        cursor: Cursor | None = None,
        *,
        error: str = "",
        member: str = "",
        limit: int = 50,
        budget: int = 2 * bounds.ITEMS_PER_CALL,
    ) -> Scan:
        """The dead letters from ``cursor`` on whose error and member hold ``error`` and
        ``member`` (``matches``): at most ``limit`` of them, looking at no more than
        ``budget`` dead letters (pages of ``page``); the Scan says where to go on."""
        at = cursor or Cursor()
        found: list[DeadLetter] = []
        looked = 0
        shard, index = at.shard, at.index
        while shard < self.sharded.shards:
            if looked >= budget:
                return Scan(found, looked, Cursor(shard, index))
            want = min(budget - looked, SCAN_PAGE)
            if not error and not member:  # every letter matches: read what is shown
                want = min(want, limit - len(found))
            size, page = self.page(shard, index, want)
            for k, letter in enumerate(page):
                if letter is not None and matches(letter, error, member):
                    found.append(letter)
                    if len(found) >= limit:
                        return Scan(found, looked + k + 1, Cursor(shard, index + k + 1))
            looked, index = looked + size, index + size
            if size < want:  # the end of this shard's dead letters
                shard, index = shard + 1, 0
        return Scan(found, looked, None)

    def apply_matching(
        self, mode: str, *, error: str = "", member: str = "", most: int | None = None
    ) -> Applied:
        """Re-drive (``mode`` "redrive") or purge ("purge") every dead letter whose error
        and member hold ``error`` and ``member``, page by page (each call bounded); looks
        at no more than ``most`` dead letters (None: every one)."""
        if not error and not member:
            done = self._apply(mode, None)
            return Applied(done, done, True)
        done = looked = 0
        for i in range(self.sharded.shards):
            index = 0
            while True:
                if most is not None and looked >= most:
                    return Applied(done, looked, False)
                step = SCAN_PAGE
                if most is not None:
                    step = min(most - looked, step)
                size, page = self.page(i, index, step)
                chosen = [
                    as_bytes(letter.member)
                    for letter in page
                    if letter is not None and matches(letter, error, member)
                ]
                gone = sum(
                    self._call(i, mode, chosen[k : k + PER_CALL])
                    for k in range(0, len(chosen), PER_CALL)
                )
                done, looked, index = done + gone, looked + size, index + size - gone
                if size < step:
                    break
        return Applied(done, looked, True)

    def where(self, members: Iterable[Any]) -> dict[bytes, int]:
        """The shard holding the dead letter of each of ``members`` that is one: its own
        shard, else (a stray) the first other that has it. Read-only: one ZMSCORE per
        shard and ``bounds.ITEMS_PER_CALL`` members, the other shards only for members not
        found in their own."""
        wanted = list(dict.fromkeys(as_bytes(m) for m in members))
        by_shard: dict[int, list[bytes]] = {}
        for member in wanted:
            by_shard.setdefault(self.sharded.shard_of(member), []).append(member)
        found = {m: i for i, listed in by_shard.items() for m in self._dead_in(i, listed)}
        for i in range(self.sharded.shards):
            missing = [m for m in wanted if m not in found and self.sharded.shard_of(m) != i]
            found.update((m, i) for m in self._dead_in(i, missing))
        return {m: found[m] for m in wanted if m in found}

    def _dead_in(self, i: int, members: list[bytes]) -> list[bytes]:
        """Those of ``members`` that shard ``i`` holds as dead letters."""
        dead: list[bytes] = []
        key = self.shard(i).keys.dead
        for first in range(0, len(members), bounds.ITEMS_PER_CALL):
            listed = members[first : first + bounds.ITEMS_PER_CALL]
            scores = scripts.command(
                self.client, partial(self.client.zmscore, key, listed), what=self.sharded.label
            )
            dead += [m for m, score in zip(listed, scores, strict=True) if score is not None]
        return dead

    def redrive(self, members: Iterable[Any] | None = None) -> int:
        """Put dead letters back into the Ick (each with its score, its attempts counted
        from zero), into their member's shard only: ``members``, or every one. Returns
        how many."""
        return self._apply("redrive", members)

    def purge(self, members: Iterable[Any] | None = None) -> int:
        """Drop dead letters for good: ``members``, or every one. Returns how many."""
        return self._apply("purge", members)

    def _apply(self, mode: str, members: Iterable[Any] | None) -> int:
        done = 0
        step = PER_CALL
        if members is None:
            for i in range(self.sharded.shards):
                while n := self._call(i, mode, []):
                    done += n
            return done
        by_shard: dict[int, list[bytes]] = {}
        for member, i in self.where(members).items():
            by_shard.setdefault(i, []).append(member)
        for i, listed in by_shard.items():
            for first in range(0, len(listed), step):
                done += self._call(i, mode, listed[first : first + step])
        return done

    def _call(self, i: int, mode: str, members: list[bytes]) -> int:
        """Re-drive or purge ``members`` of shard ``i``'s dead letters (none: its oldest
        ``PER_CALL``); a re-driven stray is carried to its member's shard first and
        re-driven there. Returns how many."""
        if mode != "redrive":
            return self._run(i, mode, members)
        if not members:
            members = scripts.command(
                self.client,
                partial(self.client.zrange, self.shard(i).keys.dead, 0, PER_CALL - 1),
                what=self.sharded.label,
            )
        away: dict[int, list[bytes]] = {}
        for member in members:
            away.setdefault(self.sharded.shard_of(member), []).append(member)
        done = self._run(i, mode, away.pop(i)) if i in away else 0
        for home, listed in away.items():
            source, target = self.shard(i).keys, self.shard(home).keys
            carry(self.client, source, target, listed, self.sharded.label)
            done += self._run(home, mode, listed)
        return done

    def _run(self, i: int, mode: str, members: list[bytes]) -> int:
        """One dead_letters call on shard ``i``."""
        keys = self.shard(i).keys
        return int(
            scripts.run(
                self.client,
                "dead_letters",
                [*keys.base, keys.dead, keys.deadinfo],
                [mode, PER_CALL, *members],
                what=self.sharded.label,
            )
        )
