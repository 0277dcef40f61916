"""ShardedIck: a logical Ick of S Ick shards, members routed by ``keys.shard_of``, its
shard count recorded and checked in Redis (registry.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from . import bounds, replication, scripts
from .clients import Client
from .errors import ShardCountError
from .ick import (
    DEFAULT_POLICY,
    Ick,
    add_calls,
    add_now_calls,
    lazy_add_calls,
    parse_stats,
    sum_adds,
)
from .keys import other_count_masters, shard_names, shard_of
from .lanes import Lane, check_lane, to_lane
from .packing import pack_chunks, packed_chunks
from .pipe import run_many
from .registry import LogicalName
from .retries import RetryPolicy
from .scripts import Call
from .values import check_chunk, check_pairs, text


class ShardedIck(LogicalName):
    """A logical Ick ``name`` of ``shards`` Icks; members routed by ``shard_of``."""

    kind = "ick"

    def __init__(self, client: Client, name: str, shards: int = 1) -> None:
        super().__init__(client, name, shards)
        self._icks = [Ick(client, key) for key in shard_names(self.name, self.shards)]

    def shard(self, i: int) -> Ick:
        """The Ick of shard ``i`` (each shard has exactly one consumer)."""
        return self._icks[i]

    def check_layout(self, sample: int = 16) -> None:
        """Before a first record, the Ick's keys are checked (producers outside Spark,
        such as the Ruby gem, record nothing): a master key of a shard this count does not
        have, or a sampled member that hashes to another shard, means another count."""
        for other in other_count_masters(self.name, self.shards):
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

    def add(
        self, mapping: Mapping[Any, float], chunk: int = bounds.ICK_CHUNK, lane: Lane = "live"
    ) -> tuple[int, int]:
        """Add members to their shards in bounded ickadd calls; returns (new, changed).
        Scores may be -inf or +inf, never NaN (``Ick.add``). ``lane="backfill"`` queues
        them behind every live member (lanes.py: each score a finite one in [0, 1e13))."""
        return self.add_pairs(list(mapping), list(mapping.values()), chunk, lane)

    def add_pairs(
        self,
        members: Sequence[Any],
        scores: Sequence[float],
        chunk: int = bounds.ICK_CHUNK,
        lane: Lane = "live",
    ) -> tuple[int, int]:
        """Add ``members[i]`` with ``scores[i]`` in ``lane``, in bounded calls, each packed
        while Redis runs the one before; every score is checked before Redis is touched
        (a live one in the backfill's band is refused, lanes.to_lane). Returns
        (new, changed)."""
        texts, floats = check_pairs(members, scores)
        floats = to_lane(floats, texts, check_lane(lane), "lane")
        chunk = check_chunk(chunk)
        if not texts:
            return (0, 0)
        groups = self.group(texts, floats)
        return self._add(
            lambda: (
                call
                for i, (ms, ss) in groups.items()
                for call in lazy_add_calls(self._icks[i].keys, packed_chunks(ms, ss, chunk))
            ),
            overlap=True,
        )

    def add_groups(
        self,
        groups: Mapping[int, tuple[Sequence[str], Sequence[float] | None]],
        chunk: int = bounds.ICK_CHUNK,
        lane: Lane = "live",
    ) -> tuple[int, int]:
        """Add each shard's members, already grouped: ``{shard: (members, scores)}``.

        Scores ``None``: Redis server time at the add, in ``lane``; given scores are
        queued as they are (in their lane already). Returns (new, changed).
        """
        calls = [
            call
            for i, (ms, ss) in groups.items()
            for call in (
                add_now_calls(self._icks[i].keys, ms, chunk, lane)
                if ss is None
                else add_calls(self._icks[i].keys, pack_chunks(ms, ss, chunk))
            )
        ]
        return self._add(lambda: calls)

    def add_packed(self, groups: Mapping[int, Sequence[bytes]]) -> tuple[int, int]:
        """Add ickadd arguments already packed (``columns.pack_pairs``) per shard, a call
        each."""
        calls = [
            call for i, packed in groups.items() for call in add_calls(self._icks[i].keys, packed)
        ]
        return self._add(lambda: calls)

    def _add(self, calls: Callable[[], Iterable[Call]], overlap: bool = False) -> tuple[int, int]:
        """Send the ickadd ``calls()`` (made again if a replicated write runs again) after
        the shard-count check; (new, changed)."""
        self.check_shards()
        return sum_adds(
            replication.write(
                self.client,
                lambda c: run_many(c, calls(), what=self.label, overlap=overlap),
                what=self.label,
            )
        )

    def fail(
        self, failures: Mapping[Any, Any], policy: RetryPolicy = DEFAULT_POLICY
    ) -> tuple[int, int]:
        """``Ick.fail`` of each member's shard (a plain consumer of reserved members);
        returns (retried, dead)."""
        by_shard: dict[int, dict[Any, Any]] = {}
        for member, error in failures.items():
            by_shard.setdefault(self.shard_of(member), {})[member] = error
        retried = dead = 0
        for i, part in by_shard.items():
            r, d = self._icks[i].fail(part, policy)
            retried, dead = retried + r, dead + d
        return retried, dead

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
            for r in run_many(
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

    def delete(self, keep_leases: bool = False) -> int:
        """Remove every shard and the recorded shard count (UNLINK, as Ick.delete); with
        ``keep_leases``, the shards' lease hashes stay (a consumer holding one keeps it,
        and fencing tokens are never handed out twice)."""
        return self._remove(keep_leases)

    def unlink(self) -> int:
        """The same as ``delete`` (the gem's name for it)."""
        return self._remove()

    def _remove(self, keep_leases: bool = False) -> int:
        return sum(ick._remove(keep_leases) for ick in self._icks) + self.forget()
