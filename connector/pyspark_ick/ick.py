"""Ick: one Ick shard with the operations of the redis-ick gem, one Lua call each, and
the ickadd calls that the client and the sinks send."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property, partial
from typing import Any

from . import bounds, replication, scripts
from .clients import Client, check_client
from .errors import IckConfigError
from .keys import IckKeys, check_name
from .lanes import Lane
from .packing import pack_checked, pack_chunks, pack_values, packed_chunks
from .pipe import run_many
from .retries import MAX_ERROR_BYTES, AttemptRecord, RetryPolicy, errors_of
from .scripts import Call
from .values import (
    TEXTS,
    Pairs,
    as_bytes,
    check_chunk,
    check_pairs,
    member_of,
    pairs,
    score_of,
    text,
)

DEFAULT_POLICY = RetryPolicy()


def queue_add(
    pipe: Any,
    keys: IckKeys,
    members: Sequence[Any],
    scores: Sequence[float],
    chunk: int = bounds.ICK_CHUNK,
) -> int:
    """Queue ickadd calls of at most ``chunk`` members on a redis-py pipeline of the
    caller's (e.g. a MULTI with reads of its own); returns how many."""
    calls = add_calls(keys, pack_chunks(members, scores, chunk))
    for name, keys_, args in calls:
        scripts.queue(pipe, name, keys_, args)
    return len(calls)


def add_calls(keys: IckKeys, packed: Iterable[bytes]) -> list[Call]:
    """One ickadd call per packed argument (``pack_chunks``, ``columns.pack_pairs``)."""
    base = keys.base
    return [("ickadd", base, [arg]) for arg in packed]


def lazy_add_calls(keys: IckKeys, packed: Iterable[bytes]) -> Iterator[Call]:
    """``add_calls`` as they are taken (``packed`` may be packing them lazily)."""
    base = keys.base
    return (("ickadd", base, [arg]) for arg in packed)


def add_now_calls(
    keys: IckKeys, members: Sequence[Any], chunk: int = bounds.ICK_CHUNK, lane: Lane = "live"
) -> list[Call]:
    """ickadd_now calls (score: Redis server time) of at most ``chunk`` members;
    ickadd_backfill in the backfill ``lane`` (that time in its band, lanes.py)."""
    chunk = min(chunk, bounds.ITEMS_PER_CALL)
    script = "ickadd_now" if lane == "live" else "ickadd_backfill"
    return [(script, keys.base, members[i : i + chunk]) for i in range(0, len(members), chunk)]


def sum_adds(replies: Iterable[Sequence[int]]) -> tuple[int, int]:
    """Totals (new, changed) of ickadd replies."""
    new = changed = 0
    for reply in replies:
        new += int(reply[0])
        changed += int(reply[1])
    return new, changed


class Ick:
    """One Ick: a producer set and a consumer set with the gem's semantics."""

    def __init__(self, client: Client, key: str) -> None:
        self.client = check_client(client)
        self.keys = IckKeys(check_name(key))
        self._base = self.keys.base  # the KEYS of every call, built once
        self._exchange = (*self._base, self.keys.retry, self.keys.attempts, self.keys.fresh)

    @property
    def key(self) -> str:
        return self.keys.master

    def __repr__(self) -> str:
        return f"Ick({self.key!r})"

    @cached_property
    def label(self) -> str:
        """Names this Ick in errors."""
        return f"Ick {self.key!r}"

    def add(self, mapping: Mapping[Any, float], chunk: int = bounds.ICK_CHUNK) -> tuple[int, int]:
        """Add members with scores; a member already queued keeps the lower score.

        ickadd calls of ``chunk`` members, each packed while Redis runs the one before
        (pipe.run_many). Scores may be -inf or +inf (as ZADD and the gem take them),
        never NaN; every score is checked before the first call. Returns (new, changed):
        members new to the pset, members whose score went down.
        """
        if not mapping:
            return (0, 0)
        chunk = check_chunk(chunk)
        if len(mapping) == 1:  # one call, and the shortest path to it (bench_calls.py)
            ((member, score),) = mapping.items()
            if type(score) is not float or score != score:
                score = score_of(member, score)
            arg = pack_values(
                [float.__repr__(score), member if type(member) in TEXTS else member_of(member)]
            )
        else:
            members, scores = check_pairs(list(mapping), list(mapping.values()))
            if len(members) > chunk:
                return sum_adds(
                    replication.write(
                        self.client,
                        lambda c: run_many(
                            c,
                            lazy_add_calls(self.keys, packed_chunks(members, scores, chunk)),
                            what=self.label,
                            overlap=True,
                        ),
                        what=self.label,
                    )
                )
            arg = pack_checked(members, scores)
        reply = replication.write(
            self.client,
            lambda c: scripts.run(c, "ickadd", self._base, [arg], what=self.label),
            what=self.label,
        )
        return int(reply[0]), int(reply[1])

    def exchange(self, n: int, commit: Iterable[Any] = (), backwash: bool = False) -> Pairs:
        """Commit ``commit``, optionally fold the cset back (backwash), then reserve ``n``.

        Members are returned as ``text`` (bytes that are not UTF-8 surrogate-escaped); a
        member to commit may be that text or the same value as bytes.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise IckConfigError(f"n must be an integer >= 0 (members to reserve), got {n!r}")
        reply = scripts.run(
            self.client,
            "ickexchange",
            self._exchange,
            [int(n), "1" if backwash else "0", *map(as_bytes, commit)],
            what=self.label,
        )
        return pairs(reply[1])

    def reserve(self, n: int) -> Pairs:
        """Move the lowest members into the cset until it holds ``n``; return its ``n`` lowest.

        Calling it again before a commit returns the same batch. One atomic script, as in
        the gem: its time grows with ``n`` (and with ``backwash``, the cset's size), so on
        a shared Redis keep ``n`` near ``bounds.ITEMS_PER_CALL``; the stream reader makes
        big batches of many bounded calls.
        """
        if type(n) is not int or n < 0:
            return self.exchange(n)  # which refuses it
        return pairs(
            scripts.run(self.client, "ickexchange", self._exchange, [n, "0"], what=self.label)[1]
        )

    def commit(self, *members: Any) -> int:
        """Remove ``members`` from the cset (never the pset); returns how many were removed.

        In calls of at most ``bounds.ITEMS_PER_CALL`` members (a repeated removal is
        harmless, so a big commit need not be one call).
        """
        step = bounds.ITEMS_PER_CALL
        return sum(
            int(
                scripts.run(
                    self.client,
                    "ickexchange",
                    self._exchange,
                    [0, "0", *map(as_bytes, members[i : i + step])],
                    what=self.label,
                )[0]
            )
            for i in range(0, len(members), step)
        )

    def fail(
        self, failures: Mapping[Any, Any], policy: RetryPolicy = DEFAULT_POLICY
    ) -> tuple[int, int]:
        """The consumer failed on reserved members ``{member: error}``: each leaves the
        cset and is retried after a backoff (``reserve`` gives it back when due), or
        becomes a dead letter after ``policy.max_attempts`` attempts (docs/design.md §11).
        Returns (retried, dead); members not reserved are left alone."""
        flat = errors_of(failures)
        retried = dead = 0
        step = 2 * bounds.ITEMS_PER_CALL
        for i in range(0, len(flat), step):
            reply = scripts.run(
                self.client,
                "ick_fail",
                [*self._base, *self.keys.fates],
                [policy.arg(), MAX_ERROR_BYTES, *flat[i : i + step]],
                what=self.label,
            )
            retried, dead = retried + int(reply[0]), dead + int(reply[1])
        return retried, dead

    def attempts(self, *members: Any) -> list[int]:
        """The failed attempts of each of ``members`` so far (0: none)."""
        if not scripts.command(
            self.client, partial(self.client.exists, self.keys.attempts), what=self.label
        ):
            return [0] * len(members)
        found: list[Any] = []
        step = bounds.ITEMS_PER_CALL
        for i in range(0, len(members), step):
            part = [as_bytes(m) for m in members[i : i + step]]
            found += scripts.command(
                self.client, partial(self.client.hmget, self.keys.attempts, part), what=self.label
            )
        return [AttemptRecord.parse(r).attempts if r is not None else 0 for r in found]

    def stats(self) -> dict[str, Any] | None:
        """Version, sizes and score ranges; None when the Ick does not exist."""
        return parse_stats(scripts.run(self.client, "ickstats", self.keys.base, what=self.label))

    def delete(self) -> int:
        """Remove every key of this Ick; returns how many keys existed.

        Always UNLINK (the gem's ickunlink): Redis frees a big key in the background
        instead of blocking every other client while it does.
        """
        return self._remove()

    def unlink(self) -> int:
        """The same as ``delete`` (the gem's name for it)."""
        return self._remove()

    def _remove(self, keep_lease: bool = False) -> int:
        keys = self.keys.fixed_keys() + self._reservation_keys()
        if keep_lease:
            keys.remove(self.keys.lease)
        return int(scripts.run(self.client, "delete_keys", keys, what=self.label))

    def _reservation_keys(self) -> list[str]:
        """Manifest keys of open reservations (numbers from the reservation log)."""
        reserved, committed = scripts.command(
            self.client,
            partial(self.client.hmget, self.keys.rlog, "reserved", "committed"),
            what=self.label,
        )
        open_ = range(int(committed or 0) + 1, int(reserved or 0) + 1)
        return [self.keys.reservation(r) for r in open_]


def parse_stats(reply: Any) -> dict[str, Any] | None:
    """The dict of an ickstats reply: sizes as int, scores as float."""
    if reply is None:
        return None
    out: dict[str, Any] = {}
    for i in range(0, len(reply), 2):
        name, value = text(reply[i]), reply[i + 1]
        if name.endswith("_size"):
            out[name] = int(value)
        elif name.endswith(("_min", "_max")):
            out[name] = float(value)
        else:
            out[name] = text(value)
    for name in ("pset_min", "pset_max", "cset_min", "cset_max", "backfill_min"):
        out.setdefault(name, None)
    out.setdefault("backfill_size", 0)
    lows = [v for v in (out["pset_min"], out["cset_min"]) if v is not None]
    highs = [v for v in (out["pset_max"], out["cset_max"]) if v is not None]
    out["total_min"] = min(lows) if lows else None  # the gem's fields
    out["total_max"] = max(highs) if highs else None
    return out
