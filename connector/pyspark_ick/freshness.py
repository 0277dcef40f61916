"""How stale the index is: the freshness histogram of one Ick shard, read and summed.

Every commit (the stream reader's ``rlog_commit``, the client's ``ickexchange``) adds the
wait of each member it commits, Redis time now minus the member's own time
(``lanes.time_of`` of its score), to the shard's ``fresh`` hash in the same script
(the prelude's ``fresh_count``): a count per bucket and lane, the sum in ms, and scores
that are no Unix time (``lanes.is_time``) counted apart. The same bucket counts go to a
slot per minute, ``SLOTS`` of them in turn: their sum is the last window. This module
reads the hash (one ``HGETALL`` of at most a few hundred fields) and makes of it what the
CLI, the exporter, the console and the stream reader's progress show.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial

from . import scripts
from .clients import Client
from .keys import IckKeys
from .lanes import LANES, Lane

BUCKETS: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, math.inf
)  # fmt: skip
"""Upper bounds in seconds of the buckets (the prelude's ICK_FRESH), +Inf last."""

SLOTS = 5
"""One-minute slots of the last window (the prelude's FRESH_SLOTS): the window is the
minute now and the four before it."""


def le_text(bound: float) -> str:
    """A bucket's bound as the hash field and Prometheus's ``le`` spell it."""
    return "+Inf" if bound == math.inf else f"{bound:g}"


LE = tuple(le_text(b) for b in BUCKETS)


@dataclass
class Histogram:
    """Counts per bucket (not cumulative, in ``BUCKETS`` order), the sum of the waits in
    seconds, and the members whose score was no Unix time."""

    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    sum: float = 0.0
    untimed: int = 0

    @property
    def count(self) -> int:
        """Members counted in a bucket (the untimed ones are not)."""
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Prometheus's ``_bucket`` values: members whose wait was at most each bound."""
        out, total = [], 0
        for n in self.counts:
            total += n
            out.append(total)
        return out

    def add(self, other: Histogram) -> Histogram:
        """This histogram plus ``other`` (a new one)."""
        counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        return Histogram(counts, self.sum + other.sum, self.untimed + other.untimed)

    def sub(self, earlier: Histogram) -> Histogram:
        """What was counted since ``earlier`` (a read of the same histogram before)."""
        counts = [a - b for a, b in zip(self.counts, earlier.counts, strict=True)]
        return Histogram(counts, self.sum - earlier.sum, self.untimed - earlier.untimed)

    def quantile(self, q: float) -> float | None:
        """The wait below which a fraction ``q`` of the members lie, interpolated in its
        bucket as Prometheus's ``histogram_quantile`` does (the +Inf bucket answers its
        lower bound); None when nothing was counted."""
        total = self.count
        if total == 0:
            return None
        rank, seen, lower = q * total, 0, 0.0
        for bound, n in zip(BUCKETS, self.counts, strict=True):
            if n and seen + n >= rank:
                if bound == math.inf:
                    return lower
                return lower + (bound - lower) * (rank - seen) / n
            seen, lower = seen + n, bound
        return lower


@dataclass
class Freshness:
    """One shard's (or a logical Ick's) histograms per lane: since the key was made
    (``total``) and in the last window (``window``)."""

    total: dict[Lane, Histogram] = field(default_factory=lambda: {x: Histogram() for x in LANES})
    window: dict[Lane, Histogram] = field(default_factory=lambda: {x: Histogram() for x in LANES})

    def add(self, other: Freshness) -> Freshness:
        """The sum of two shards' figures."""
        return Freshness(
            {x: self.total[x].add(other.total[x]) for x in LANES},
            {x: self.window[x].add(other.window[x]) for x in LANES},
        )

    def json(self) -> dict[str, dict[str, object]]:
        """Per lane: the bucket bounds, counts (not cumulative), sum in seconds, untimed
        members, and the last window's counts: what ``stats --json`` shows."""
        return {
            lane: {
                "le": list(LE),
                "counts": self.total[lane].counts,
                "sum_s": round(self.total[lane].sum, 3),
                "untimed": self.total[lane].untimed,
                "window_counts": self.window[lane].counts,
            }
            for lane in LANES
        }

    def summary(self) -> dict[str, float | int | None]:
        """What stats and progress show: the last window's p50 and p99 and count of both
        lanes together, the live lane's alone, and the untimed members in all."""
        both = self.window["live"].add(self.window["backfill"])
        live = self.window["live"]
        return {
            "fresh_p50_s": rounded(both.quantile(0.5)),
            "fresh_p99_s": rounded(both.quantile(0.99)),
            "fresh_count": both.count,
            "live_p99_s": rounded(live.quantile(0.99)),
            "untimed": sum(self.total[x].untimed for x in LANES),
        }


def rounded(value: float | None) -> float | None:
    """Seconds to the millisecond (None stays None)."""
    return None if value is None else round(value, 3)


def parse(fields: Mapping[str, str], now: float) -> Freshness:
    """The histograms that a shard's ``fresh`` hash holds, its window as of Redis time
    ``now`` (seconds): the slots of the last ``SLOTS`` minutes."""
    fresh = Freshness()
    minute = math.floor(now / 60)
    for lane in LANES:
        total = fresh.total[lane]
        total.counts = [int(fields.get(f"{lane}:{le}", 0)) for le in LE]
        total.sum = int(fields.get(f"{lane}:sum_ms", 0)) / 1000
        total.untimed = int(fields.get(f"{lane}:untimed", 0))
        for slot in range(SLOTS):
            at = fields.get(f"m{slot}")
            if at is not None and minute - SLOTS < int(at) <= minute:
                counts = [int(fields.get(f"m{slot}:{lane}:{le}", 0)) for le in LE]
                fresh.window[lane] = fresh.window[lane].add(Histogram(counts))
    return fresh


def read(client: Client, master: str, now: float, label: str = "") -> Freshness:
    """Shard ``master``'s freshness (zeros when it never committed: an Ick of an earlier
    layout has no ``fresh`` hash). One bounded ``HGETALL``."""
    raw = scripts.command(
        client, partial(client.hgetall, IckKeys(master).fresh), what=label or f"Ick {master!r}"
    )
    return parse({text(k): text(v) for k, v in raw.items()}, now)


def text(value: str | bytes) -> str:
    """A hash field or value as text."""
    return value.decode() if isinstance(value, bytes) else value


def bucket_of(seconds: float) -> int:
    """The index in ``BUCKETS`` of the bucket a wait of ``seconds`` is counted in."""
    return next(i for i, bound in enumerate(BUCKETS) if seconds <= bound)


def combined(shards: Iterable[Freshness]) -> Freshness:
    """The sum over shards."""
    out = Freshness()
    for one in shards:
        out = out.add(one)
    return out
