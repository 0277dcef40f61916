"""Key names and the shard function: the only place that spells a Redis key.

One Ick with master key ``K`` (layout of the redis-ick gem): the version flag at ``K``,
the pset at ``K/ick/{K}/pset``, the cset at ``K/ick/{K}/cset``. Every key this project
adds for one Ick shares the ``K/ick/{K}/`` prefix, hence the hash slot. A logical Ick
``NAME`` of S shards is S Icks: ``NAME`` when S = 1, ``NAME:i`` otherwise; a member goes
to shard ``crc32(utf8(member)) % S`` (a binary member: of its bytes). Dehydrators follow
the same scheme under ``/dh/``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import ClassVar

from .errors import IckConfigError


def check_name(name: str, what: str = "Ick name") -> str:
    """Return ``name`` if it can be a master key, else raise IckConfigError."""
    if not isinstance(name, str) or not name:
        raise IckConfigError(f"{what} must be a non-empty string, got {name!r}")
    if "{" in name or "}" in name:
        raise IckConfigError(
            f"{what} {name!r} contains '{{' or '}}': braces would break the hash slot "
            "shared by the keys of one Ick"
        )
    return name


MAX_SHARDS = 16384  # one per Redis Cluster hash slot at most


def check_shards(shards: int) -> int:
    """Return ``shards`` if it is a usable shard count, else raise IckConfigError."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise IckConfigError(f"shards must be an integer from 1 to {MAX_SHARDS}, got {shards!r}")
    return shards


def shard_of(member: str | bytes | bytearray, shards: int) -> int:
    """The shard of ``member``: zlib CRC-32 of its UTF-8 bytes, modulo ``shards``.

    Bytes hash as they are, and a str with surrogate escapes (``ick.text`` of bytes that are
    not UTF-8) as the bytes it escapes: both forms of one Redis string go to one shard.
    """
    if shards == 1:
        return 0
    data = member.encode("utf-8", "surrogateescape") if isinstance(member, str) else member
    return zlib.crc32(data) % shards


def shard_names(name: str, shards: int) -> list[str]:
    """Master keys of the shards of logical Ick (or dehydrator) ``name``."""
    if shards == 1:
        return [name]
    return [f"{name}:{i}" for i in range(shards)]


def other_count_masters(name: str, shards: int) -> list[str]:
    """Master keys that shards of logical Ick ``name`` have under another shard count
    but not under ``shards``: their presence means another count was used."""
    others = [name] if shards > 1 else shard_names(name, 2)
    return [*others, f"{name}:{shards}"]


def shard_count_key(name: str, kind: str = "ick") -> str:
    """The small key recording the shard count of logical Ick or dehydrator ``name``."""
    return f"{name}/{kind}/shards"


def layout_key(name: str, kind: str = "ick") -> str:
    """The layout version that logical Ick or dehydrator ``name`` was written with
    (layout.py; absent: release 0.1's layout 1)."""
    return f"{name}/{kind}/layout"


def reshard_key(name: str, kind: str = "ick") -> str:
    """The marker of a reshard of logical Ick ``name`` in progress: the target shard count,
    next to the recorded one until the reshard records it (reshard.py)."""
    return f"{name}/{kind}/reshard"


REGISTRY_PREFIX = "pyspark-ick/registry/"


def registry_key(kind: str = "ick") -> str:
    """The set of the names of every logical Ick (``kind`` "ick") or dehydrator
    ("dehydrator") whose shard count was recorded: what the exporter reads."""
    return REGISTRY_PREFIX + kind


class Part:
    """A key of a shard, named by its suffix (``pset``: ``K/ick/{K}/pset``); what it holds
    is its docstring."""

    def __init__(self, suffix: str, doc: str) -> None:
        self.suffix, self.__doc__ = suffix, doc

    def __get__(self, keys: ShardKeys, owner: type | None = None) -> str:
        return keys.key(self.suffix)


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard: ``{master}/{part}/{{{master}}}/...``, all on the slot of
    ``master`` (its hash tag); ``part`` is "ick" or "dh"."""

    master: str
    part: ClassVar[str]
    numbered: ClassVar[str]  # "resv", "claim": the manifests of the shard's numbered log
    fixed: ClassVar[tuple[str, ...]]  # the attributes naming the keys without a number

    def key(self, suffix: str) -> str:
        """The key ``suffix`` of this shard."""
        return f"{self.master}/{self.part}/{{{self.master}}}/{suffix}"

    def manifest(self, number: int) -> str:
        """List: the manifest of number ``number`` of the shard's numbered log."""
        return self.key(f"{self.numbered}:{number}")

    def fixed_keys(self) -> list[str]:
        """Every key of the shard whose name does not depend on a number."""
        return [getattr(self, name) for name in self.fixed]

    lease = Part("lease", "Hash: owner, fencing token and expiry of the consumer lease.")


@dataclass(frozen=True)
class IckKeys(ShardKeys):
    """Every key of one Ick shard (the gem's layout: ``K/ick/{K}/pset``, ``.../cset``)."""

    part: ClassVar[str] = "ick"
    numbered: ClassVar[str] = "resv"
    fixed: ClassVar[tuple[str, ...]] = (
        "master",
        "pset",
        "cset",
        "rlog",
        "lease",
        "held",
        "retry",
        "attempts",
        "dead",
        "deadinfo",
        "failed",
        "fresh",
    )

    pset = Part("pset", "Sorted set: the producer set, member -> score.")
    cset = Part("cset", "Sorted set: the members reserved, not committed.")
    rlog = Part("rlog", "Hash: the reservation log's counters (last reserved, committed).")
    held = Part("held", "Hash: member -> how many more open reservations hold it.")
    retry = Part("retry", "Sorted set: member -> when its retry is due (ms), after a failure.")
    attempts = Part("attempts", "Hash: member -> its attempt record (retries.py).")
    dead = Part("dead", "Sorted set: member -> when it became a dead letter (ms).")
    deadinfo = Part("deadinfo", "Hash: member -> the attempt record of a dead letter.")
    failed = Part("failed", "Hash: '<r> <member>' -> '<delivery> <error>', handed back.")
    fresh = Part("fresh", "Hash: the freshness histogram of committed members (freshness.py).")

    @property
    def base(self) -> tuple[str, str, str]:
        """master, pset, cset: the KEYS of the gem's scripts."""
        return (self.master, self.pset, self.cset)

    reservation = ShardKeys.manifest  # member, score, ... by score

    @property
    def fates(self) -> tuple[str, str, str, str]:
        """retry, attempts, dead, deadinfo: where a failed member goes (KEYS of the
        scripts that fail members)."""
        return (self.retry, self.attempts, self.dead, self.deadinfo)


@dataclass(frozen=True)
class DehydratorKeys(ShardKeys):
    """Every key of one dehydrator shard."""

    part: ClassVar[str] = "dh"
    numbered: ClassVar[str] = "claim"
    fixed: ClassVar[tuple[str, ...]] = ("due", "elements", "clog", "lease")

    due = Part("due", "Sorted set: id -> due time (ms since the epoch) of every element.")
    elements = Part("elements", "Hash: id -> element of every parked element.")
    clog = Part("clog", "Hash: the claim log's counters (last claimed, last committed).")

    @property
    def store(self) -> tuple[str, str]:
        """due, elements: the KEYS of the dehydrator's scripts."""
        return (self.due, self.elements)

    claim = ShardKeys.manifest  # id, due, element, ...
