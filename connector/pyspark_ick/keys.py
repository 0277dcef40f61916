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


REGISTRY_PREFIX = "pyspark-ick/registry/"


def registry_key(kind: str = "ick") -> str:
    """The set of the names of every logical Ick (``kind`` "ick") or dehydrator
    ("dehydrator") whose shard count was recorded: what the exporter reads."""
    return REGISTRY_PREFIX + kind


@dataclass(frozen=True)
class IckKeys:
    """Every key of one Ick shard."""

    master: str

    @property
    def _prefix(self) -> str:
        return f"{self.master}/ick/{{{self.master}}}/"

    @property
    def pset(self) -> str:
        return self._prefix + "pset"

    @property
    def cset(self) -> str:
        return self._prefix + "cset"

    @property
    def base(self) -> tuple[str, str, str]:
        """master, pset, cset: the KEYS of the gem's scripts."""
        return (self.master, self.pset, self.cset)

    @property
    def rlog(self) -> str:
        """Hash: the reservation log's counters (last reserved, last committed)."""
        return self._prefix + "rlog"

    def reservation(self, number: int) -> str:
        """List: the manifest (member, score, ... by score) of reservation ``number``."""
        return f"{self._prefix}resv:{number}"

    @property
    def held(self) -> str:
        """Hash: member -> how many more open reservations hold it than the first one."""
        return self._prefix + "held"

    @property
    def lease(self) -> str:
        """Hash: owner, fencing token and expiry of the consumer lease."""
        return self._prefix + "lease"

    def fixed_keys(self) -> list[str]:
        """Every key of the Ick whose name does not depend on a number."""
        return [self.master, self.pset, self.cset, self.rlog, self.lease, self.held]


@dataclass(frozen=True)
class DehydratorKeys:
    """Every key of one dehydrator shard (all on the slot of ``master``)."""

    master: str

    @property
    def _prefix(self) -> str:
        return f"{self.master}/dh/{{{self.master}}}/"

    def key(self, suffix: str) -> str:
        """A key of this dehydrator shard; the dehydrator module names its own parts."""
        return self._prefix + suffix

    @property
    def due(self) -> str:
        """Sorted set: id -> due time (ms since the epoch) of every parked element."""
        return self.key("due")

    @property
    def elements(self) -> str:
        """Hash: id -> element of every parked element."""
        return self.key("elements")

    @property
    def store(self) -> tuple[str, str]:
        """due, elements: the KEYS of the dehydrator's scripts."""
        return (self.due, self.elements)

    @property
    def clog(self) -> str:
        """Hash: the claim log's counters (last claimed, last committed)."""
        return self.key("clog")

    def claim(self, number: int) -> str:
        """List: the manifest (id, due, element, ...) of claim ``number``."""
        return self.key(f"claim:{number}")

    @property
    def lease(self) -> str:
        """Hash: owner, fencing token and expiry of the source's lease."""
        return self.key("lease")

    def fixed_keys(self) -> list[str]:
        """Every key of the shard whose name does not depend on a number."""
        return [self.due, self.elements, self.clog, self.lease]
