"""The console's own memory of the last hour: a background thread samples every Ick and
dehydrator of the registry every few seconds (pages.overview, bounded calls) into a ring
per name, which the plots read. No other service is needed; a restart starts empty."""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import deque
from typing import Any, NamedTuple

from ..clients import Client
from . import pages

logger = logging.getLogger("pyspark_ick.web")

HOUR_S = 3600.0


class Point(NamedTuple):
    """One sample of an Ick (or dehydrator): when (Redis time, s), backlog (queued;
    parked), age of the oldest member in s (a dehydrator: how long its first due element
    has waited), items committed in all, in flight (reserved; claimed), dead letters, and
    an Ick's freshness: the p50 and p99 in s of the waits of the members committed in the
    last window (None: none committed; a dehydrator has none)."""

    t: float
    backlog: int
    oldest_s: float | None
    done: int
    in_flight: int
    dead: int
    fresh_p50_s: float | None = None
    fresh_p99_s: float | None = None


def ick_point(t: float, report: dict[str, Any]) -> Point:
    totals = report["totals"]
    return Point(
        t,
        totals["queued"],
        totals["age_s"],
        totals["done"],
        totals["reserved"],
        totals.get("dead", 0),
        totals.get("fresh_p50_s"),
        totals.get("fresh_p99_s"),
    )


def dehydrator_point(t: float, report: dict[str, Any]) -> Point:
    totals = report["totals"]
    return Point(
        t, totals["parked"], totals["overdue_ms"] / 1000, totals["done"], totals["claimed"], 0
    )


def throughput(points: list[Point]) -> list[tuple[float, float | None]]:
    """Items committed per second between consecutive samples (None across a reset: the
    Ick was deleted and made again)."""
    out: list[tuple[float, float | None]] = []
    for before, after in itertools.pairwise(points):
        spent = after.t - before.t
        gained = after.done - before.done
        out.append((after.t, gained / spent if spent > 0 and gained >= 0 else None))
    return out


class History:
    """Rings of Points per (kind, name), one hour long at ``interval`` seconds a sample."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.size = math.ceil(HOUR_S / interval) + 1
        self._rings: dict[tuple[str, str], deque[Point]] = {}
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self.sampled_at: float | None = None

    def record(self, seen: dict[str, Any]) -> None:
        """Add the samples of one overview (pages.overview) to the rings."""
        t = seen["server_time"]
        with self._lock:
            for kind, point in (("ick", ick_point), ("dehydrator", dehydrator_point)):
                for report in seen[kind]:
                    ring = self._rings.setdefault((kind, report["name"]), deque(maxlen=self.size))
                    if not ring or ring[-1].t < t:
                        ring.append(point(t, report))
            self.sampled_at = t

    def series(self, kind: str, name: str) -> list[Point]:
        """The samples of the last hour of ``name``, oldest first."""
        with self._lock:
            return list(self._rings.get((kind, name), ()))


class Sampler:
    """Samples every registered Ick and dehydrator into ``history`` every
    ``history.interval`` seconds from a daemon thread, until ``stop``. A failed sample
    (Redis away: a failover, a restart) is a gap in the plots and a note on the page."""

    def __init__(self, client: Client, history: History, scrub: Any) -> None:
        self.client = client
        self.history = history
        self.scrub = scrub
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def sample(self) -> None:
        """One sample of every registered name, page by page of the registry."""
        first = ""
        while True:
            seen = pages.overview(self.client, first)
            self.history.record(seen)
            more = seen["ick_more"] or seen["dehydrator_more"]
            if more is None:
                return
            first = min(n for n in (seen["ick_more"], seen["dehydrator_more"]) if n)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.sample()
                self.history.last_error = None
            except Exception as exc:  # noqa: BLE001 - a gap in the plot, not a dead thread
                self.history.last_error = self.scrub(str(exc))
                logger.warning("console: a sample failed: %s", self.history.last_error)
            self._stop.wait(max(0.0, self.history.interval - (time.monotonic() - started)))
