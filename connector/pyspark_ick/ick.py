"""Ick and ShardedIck: the operations of the redis-ick gem, one Lua call each."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property, partial
from math import isnan
from typing import Any

import redis
import redis.cluster

from . import bounds, replication, scripts
from .connection import Client
from .errors import IckConfigError, IckScriptError, ShardCountError
from .keys import (
    IckKeys,
    check_name,
    check_shards,
    registry_key,
    shard_count_key,
    shard_names,
    shard_of,
)

logger = logging.getLogger("pyspark_ick.ick")


Pairs = list[tuple[str, float]]


def text(value: Any) -> str:
    """A member as ``str`` (Redis replies are bytes unless decode_responses is set); bytes
    that are not UTF-8 surrogate-escaped, so that ``as_bytes`` gives them back."""
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def as_bytes(value: Any) -> bytes:
    """A member, id or element as the bytes a script gets: bytes (bytearray, memoryview:
    Spark's binary values) as they are, anything else its UTF-8 text (surrogate escapes
    round trip with ``text``)."""
    kind = type(value)
    if kind is bytes:
        return value
    if kind is str:
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogateescape")


def pairs(flat: Sequence[Any]) -> Pairs:
    """``[m1, s1, m2, s2, ...]`` -> ``[(m1, s1), ...]`` with str members, float scores."""
    return list(zip(map(text, flat[::2]), map(float, flat[1::2]), strict=True))


NUMBERS = frozenset({float, int})  # scores converted by float() in C, no check of each
TEXTS = frozenset({str, bytes})  # members packed as they are (str: UTF-8, surrogate escapes)


def check_pairs(
    members: Sequence[Any], scores: Sequence[Any]
) -> tuple[list[str | bytes], list[float]]:
    """Members as str or bytes and scores as floats, checked before anything reaches
    Redis: IckConfigError for a None member, or a score that is not a number or is NaN.
    Infinite scores are kept: ZADD takes them (``inf``, ``-inf``), as the gem's ickadd
    does. Members and scores of the common types are checked in C (map), not per pair."""
    if len(members) != len(scores):
        raise IckConfigError(f"{len(members)} members but {len(scores)} scores")
    floats: list[float] | None = None
    if set(map(type, scores)) <= NUMBERS:
        try:
            floats = list(map(float, scores))
        except OverflowError:  # an int beyond a double: named below
            floats = None
    if floats is None or any(map(isnan, floats)):
        floats = [score_of(m, s) for m, s in zip(members, scores, strict=True)]
    texts = members if type(members) is list else list(members)
    if not set(map(type, texts)) <= TEXTS:
        texts = [member_of(m) for m in texts]
    return texts, floats


def score_of(member: Any, score: Any) -> float:
    """``score`` as a float; IckConfigError naming ``member`` unless it is a number, not NaN."""
    try:
        if isinstance(score, str | bytes):
            raise TypeError(score)
        value = float(score)
        if value != value:
            raise ValueError(score)
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise IckConfigError(
            f"the score of member {member!r} must be a number (not NaN), got {score!r}"
        ) from exc
    return value


def member_of(member: Any) -> str | bytes:
    """A member as str or bytes (``as_bytes``); IckConfigError for None."""
    if member is None:
        raise IckConfigError("a member must not be None (it would be stored as the text 'None')")
    return member if type(member) in TEXTS else as_bytes(member)


def pack_checked(members: Sequence[str | bytes], scores: Sequence[float]) -> bytes:
    """ickadd's one argument for checked pairs (``check_pairs``): score then member, per
    member, a msgpack array of strings (``scripts.pack_values``: faster than
    ``pack_strings`` for Python values), the scores in Python's float syntax (``repr``:
    exact and shortest; ``inf``, ``-inf`` as ZADD spells them).

    It costs Redis 24% less time per member than the struct layout with double scores it
    replaced (docs/sizing.md): no Lua loop parses it and ZADD parses the scores' text as
    it parses a client's.
    """
    values: list[Any] = [None] * (2 * len(scores))
    values[::2] = map(float.__repr__, scores)
    values[1::2] = members
    return scripts.pack_values(values)


def pack_pairs(members: Sequence[Any], scores: Sequence[Any]) -> bytes:
    """ickadd's one argument for ``members`` and ``scores`` (checked: ``check_pairs``)."""
    return pack_checked(*check_pairs(members, scores))


def number_text(value: Any) -> bytes:
    """A finite number as the text the scripts pass on to Redis (``repr`` of the float:
    exact); TypeError or ValueError for anything else."""
    if isinstance(value, str | bytes) or value - value != 0:  # NaN or infinite
        raise ValueError(f"not a finite number: {value!r}")
    return repr(float(value)).encode()


def check_chunk(chunk: Any) -> int:
    """``chunk`` if it is a positive integer, at most ``bounds.ITEMS_PER_CALL``."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise IckConfigError(f"chunk must be a positive integer, got {chunk!r}")
    return min(chunk, bounds.ITEMS_PER_CALL)


def packed_chunks(
    members: Sequence[str | bytes], scores: Sequence[float], chunk: int
) -> Iterator[bytes]:
    """The ickadd arguments of checked pairs, ``chunk`` members each, packed one by one
    as they are taken (so the next is packed while Redis runs the one before)."""
    for i in range(0, len(members), chunk):
        yield pack_checked(members[i : i + chunk], scores[i : i + chunk])


def pack_chunks(
    members: Sequence[Any], scores: Sequence[float], chunk: int = bounds.ICK_CHUNK
) -> list[bytes]:
    """The ickadd arguments for ``members`` and ``scores``, ``chunk`` members each (at
    most ``bounds.ITEMS_PER_CALL``: no call holds Redis long)."""
    chunk = check_chunk(chunk)
    return list(packed_chunks(*check_pairs(members, scores), chunk))


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


def add_calls(keys: IckKeys, packed: Iterable[bytes]) -> list[scripts.Call]:
    """One ickadd call per packed argument (``pack_chunks``, ``columns.pack_pairs``)."""
    base = keys.base
    return [("ickadd", base, [arg]) for arg in packed]


def lazy_add_calls(keys: IckKeys, packed: Iterable[bytes]) -> Iterator[scripts.Call]:
    """``add_calls`` as they are taken (``packed`` may be packing them lazily)."""
    base = keys.base
    return (("ickadd", base, [arg]) for arg in packed)


def add_now_calls(
    keys: IckKeys, members: Sequence[Any], chunk: int = bounds.ICK_CHUNK
) -> list[scripts.Call]:
    """ickadd_now calls (score: Redis server time) of at most ``chunk`` members."""
    chunk = min(chunk, bounds.ITEMS_PER_CALL)
    return [
        ("ickadd_now", keys.base, members[i : i + chunk]) for i in range(0, len(members), chunk)
    ]


def sum_adds(replies: Iterable[Sequence[int]]) -> tuple[int, int]:
    """Totals (new, changed) of ickadd replies."""
    new = changed = 0
    for reply in replies:
        new += int(reply[0])
        changed += int(reply[1])
    return new, changed


_unregistered: set[str] = set()  # registries this process could not write (warned once)


def register(client: Client, name: str, kind: str, label: str) -> None:
    """Add logical Ick (or dehydrator) ``name`` to the registry the exporter reads
    (keys.registry_key; idempotent). A user whose ACL lacks the registry (an ACL line
    older than docs/security.md's) is warned once, not failed: producers and consumers
    do not need it."""
    try:
        scripts.command(client, partial(client.sadd, registry_key(kind), name), what=label)
    except IckScriptError as exc:
        if kind not in _unregistered:
            _unregistered.add(kind)
            logger.warning(
                "%s: not added to %s, which the metrics exporter reads (%s); "
                "see docs/security.md for the ACL line",
                label,
                registry_key(kind),
                exc,
            )


def unregister(client: Client, name: str, kind: str, label: str) -> None:
    """Remove ``name`` from the registry (its Ick or dehydrator is deleted)."""
    try:
        scripts.command(client, partial(client.srem, registry_key(kind), name), what=label)
    except IckScriptError as exc:
        logger.warning("%s: not removed from %s: %s", label, registry_key(kind), exc)


def check_client(client: Client) -> Client:
    """``client`` if it is a client, not a pipeline (whose calls return no replies)."""
    if isinstance(client, (redis.client.Pipeline, redis.cluster.ClusterPipeline)):
        raise IckConfigError(
            "Icks and dehydrators need a client, not a pipeline: each call is already one "
            "round trip (a Lua script) and needs its reply. To batch adds, pass many "
            "members to one add(); to mix them into a pipeline of your own, queue "
            "pyspark_ick.ick.queue_add(pipe, Ick(client, key).keys, members, scores)"
        )
    return client


class Ick:
    """One Ick: a producer set and a consumer set with the gem's semantics."""

    def __init__(self, client: Client, key: str) -> None:
        self.client = check_client(client)
        self.keys = IckKeys(check_name(key))
        self._base = self.keys.base  # the KEYS of every call, built once

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
        (scripts.run_many). Scores may be -inf or +inf (as ZADD and the gem take them),
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
            arg = scripts.pack_values(
                [float.__repr__(score), member if type(member) in TEXTS else member_of(member)]
            )
        else:
            members, scores = check_pairs(list(mapping), list(mapping.values()))
            if len(members) > chunk:
                return sum_adds(
                    replication.write(
                        self.client,
                        lambda c: scripts.run_many(
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
            self._base,
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
            scripts.run(self.client, "ickexchange", self._base, [n, "0"], what=self.label)[1]
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
                    self._base,
                    [0, "0", *map(as_bytes, members[i : i + step])],
                    what=self.label,
                )[0]
            )
            for i in range(0, len(members), step)
        )

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

    def _remove(self) -> int:
        keys = self.keys.fixed_keys() + self._reservation_keys()
        return int(scripts.run(self.client, "delete_keys", keys, what=self.label))

    def _reservation_keys(self) -> list[str]:
        """Manifest keys of open reservations (numbers from the reservation log)."""
        reserved, committed = scripts.command(
            self.client,
            partial(self.client.hmget, self.keys.rlog, "reserved", "committed"),
            what=self.label,
        )
        return [
            self.keys.reservation(r) for r in range(int(committed or 0) + 1, int(reserved or 0) + 1)
        ]


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
    for name in ("pset_min", "pset_max", "cset_min", "cset_max"):
        out.setdefault(name, None)
    lows = [v for v in (out["pset_min"], out["cset_min"]) if v is not None]
    highs = [v for v in (out["pset_max"], out["cset_max"]) if v is not None]
    out["total_min"] = min(lows) if lows else None  # the gem's fields
    out["total_max"] = max(highs) if highs else None
    return out


class ShardedIck:
    """A logical Ick ``name`` of ``shards`` Icks; members routed by ``shard_of``."""

    def __init__(self, client: Client, name: str, shards: int = 1) -> None:
        self.client = check_client(client)
        self.name = check_name(name)
        self.shards = check_shards(shards)
        self._icks = [Ick(client, key) for key in shard_names(name, shards)]
        self._checked = False

    def __repr__(self) -> str:
        return f"ShardedIck({self.name!r}, shards={self.shards})"

    @cached_property
    def label(self) -> str:
        """Names this logical Ick in errors."""
        return f"Ick {self.name!r}"

    def shard(self, i: int) -> Ick:
        """The Ick of shard ``i`` (each shard has exactly one consumer)."""
        return self._icks[i]

    def shard_of(self, member: Any) -> int:
        """The shard that ``member`` goes to (its text or its bytes)."""
        return shard_of(as_bytes(member), self.shards)

    def check_shards(self, record: bool = True) -> None:
        """Raise ShardCountError if Redis shows another shard count; with ``record``, record
        this one on first use.

        Before the first record, the Ick's keys are checked too (producers outside Spark,
        such as the Ruby gem, record nothing): a master key of a shard this count does not
        have, or a sampled member that hashes to another shard, means another count.
        """
        if self._checked:
            return
        key = shard_count_key(self.name)
        recorded = scripts.command(self.client, lambda: self.client.get(key), what=self.label)
        if recorded is None:
            self._check_layout()
            if not record:
                return
            recorded = scripts.run(self.client, "shardcount", [key], [self.shards], what=self.label)
        if int(recorded) != self.shards:
            raise ShardCountError(
                f"Ick {self.name!r} has {int(recorded)} shards recorded in Redis, "
                f"but {self.shards} were given"
            )
        if record:
            register(self.client, self.name, "ick", self.label)
        self._checked = True

    def _check_layout(self, sample: int = 16) -> None:
        """The keys in Redis fit ``self.shards`` (see check_shards)."""
        wrong = [self.name] if self.shards > 1 else [f"{self.name}:0", f"{self.name}:1"]
        wrong.append(f"{self.name}:{self.shards}")
        for other in wrong:
            if scripts.command(self.client, partial(self.client.exists, other), what=self.label):
                raise ShardCountError(
                    f"Ick {self.name!r}: Redis holds {other!r}, a shard of another shard "
                    f"count than the {self.shards} given (no count is recorded: its "
                    "producers did not record one); give the count they used"
                )
        if self.shards == 1:
            return
        for i, ick in enumerate(self._icks):
            for part in (ick.keys.pset, ick.keys.cset):
                found = (
                    scripts.command(
                        self.client, partial(self.client.zrandmember, part, sample), what=self.label
                    )
                    or []
                )
                for member in found:
                    if shard_of(member, self.shards) != i:
                        raise ShardCountError(
                            f"Ick {self.name!r}: member {text(member)!r} of shard {i} "
                            f"belongs to shard {shard_of(member, self.shards)} of "
                            f"{self.shards}: its producers used another shard count"
                        )

    def add(self, mapping: Mapping[Any, float], chunk: int = bounds.ICK_CHUNK) -> tuple[int, int]:
        """Add members to their shards in bounded ickadd calls; returns (new, changed).
        Scores may be -inf or +inf, never NaN (``Ick.add``)."""
        return self.add_pairs(list(mapping), list(mapping.values()), chunk)

    def add_pairs(
        self, members: Sequence[Any], scores: Sequence[float], chunk: int = bounds.ICK_CHUNK
    ) -> tuple[int, int]:
        """Add ``members[i]`` with ``scores[i]`` in bounded calls, each packed while Redis
        runs the one before; every score is checked before Redis is touched. Returns
        (new, changed)."""
        texts, floats = check_pairs(members, scores)
        chunk = check_chunk(chunk)
        if not texts:
            return (0, 0)
        groups = self.group(texts, floats)
        self.check_shards()
        return sum_adds(
            replication.write(
                self.client,
                lambda c: scripts.run_many(
                    c,
                    (
                        call
                        for i, (ms, ss) in groups.items()
                        for call in lazy_add_calls(self._icks[i].keys, packed_chunks(ms, ss, chunk))
                    ),
                    what=self.label,
                    overlap=True,
                ),
                what=self.label,
            )
        )

    def add_groups(
        self,
        groups: Mapping[int, tuple[Sequence[str], Sequence[float] | None]],
        chunk: int = bounds.ICK_CHUNK,
    ) -> tuple[int, int]:
        """Add each shard's members, already grouped: ``{shard: (members, scores)}``.

        Scores ``None``: Redis server time at the add. Returns (new, changed).
        """
        self.check_shards()
        calls = [
            call
            for i, (ms, ss) in groups.items()
            for call in (
                add_now_calls(self._icks[i].keys, ms, chunk)
                if ss is None
                else add_calls(self._icks[i].keys, pack_chunks(ms, ss, chunk))
            )
        ]
        return sum_adds(
            replication.write(
                self.client, lambda c: scripts.run_many(c, calls, what=self.label), what=self.label
            )
        )

    def add_packed(self, groups: Mapping[int, Sequence[bytes]]) -> tuple[int, int]:
        """Add ickadd arguments already packed (``columns.pack_pairs``) per shard, a call
        each."""
        self.check_shards()
        return sum_adds(
            replication.write(
                self.client,
                lambda c: scripts.run_many(
                    c,
                    [
                        call
                        for i, packed in groups.items()
                        for call in add_calls(self._icks[i].keys, packed)
                    ],
                    what=self.label,
                ),
                what=self.label,
            )
        )

    def group(
        self, members: Sequence[str | bytes], scores: Sequence[float]
    ) -> dict[int, tuple[list[str | bytes], list[float]]]:
        """Members and scores grouped by shard."""
        if self.shards == 1:
            return {0: (list(members), list(scores))}
        groups: dict[int, tuple[list[str | bytes], list[float]]] = {}
        for member, score in zip(members, scores, strict=True):
            ms, ss = groups.setdefault(shard_of(member, self.shards), ([], []))
            ms.append(member)
            ss.append(score)
        return groups

    def stats(self) -> dict[str, Any]:
        """Per-shard stats (None for a shard not created yet) and their totals; checks the
        shard count but records nothing (a reading call does not write)."""
        self.check_shards(record=False)

        per_shard = [
            parse_stats(r)
            for r in scripts.run_many(
                self.client,
                [("ickstats", ick.keys.base, ()) for ick in self._icks],
                what=self.label,
            )
        ]
        totals = {
            name: sum(s[name] for s in per_shard if s)
            for name in ("pset_size", "cset_size", "total_size")
        }
        return {"name": self.name, "shards": per_shard, **totals}

    def delete(self) -> int:
        """Remove every shard and the recorded shard count (UNLINK, as Ick.delete)."""
        return self._remove()

    def unlink(self) -> int:
        """The same as ``delete`` (the gem's name for it)."""
        return self._remove()

    def _remove(self) -> int:
        removed = sum(ick._remove() for ick in self._icks)
        unregister(self.client, self.name, "ick", self.label)
        removed += int(
            scripts.run(self.client, "delete_keys", [shard_count_key(self.name)], what=self.label)
        )
        self._checked = False
        return removed
