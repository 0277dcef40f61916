"""Prometheus metrics of every Ick and dehydrator in a Redis (``pyspark-ick metrics``).

Icks and dehydrators are found in the registry (existence.registered: the names whose shard
count a Spark reader or writer, a ShardedIck or a Dehydrator recorded; an Ick that only gem
producers wrote is not there until then), not by scanning the keyspace. Every scrape reads
them again with bounded calls (one small script per shard). Needs the ``metrics`` extra
(prometheus-client).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import redis

from .clients import Client
from .dead_letters import DeadLetters
from .dehydrator_view import stats as dehydrator_stats
from .errors import IckError
from .existence import registered
from .freshness import LE
from .lanes import LANES
from .observe import stats
from .redis_errors import translate
from .sharded import ShardedIck


def gauge(name: str, doc: str, labels: list[str]) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(f"pyspark_ick_{name}", doc, labels=labels)


def counter(name: str, doc: str, labels: list[str]) -> Any:
    from prometheus_client.core import CounterMetricFamily

    return CounterMetricFamily(f"pyspark_ick_{name}", doc, labels=labels)


class Collector:
    """A prometheus_client collector reading Redis at each scrape; a scrape that fails
    names the Redis asked (``where``, without credentials)."""

    def __init__(self, client: Client, where: str = "") -> None:
        self.client = client
        self.where = where

    def collect(self) -> Iterator[Any]:
        """Every metric family, read afresh (IckError naming the Redis when it fails)."""
        try:
            families = list(self._icks()) + list(self._dehydrators())
        except (IckError, redis.RedisError) as exc:
            said = str(translate(exc) if isinstance(exc, redis.RedisError) else exc)
            if self.where and self.where not in said:
                said += f" (Redis at {self.where})"
            raise IckError(f"metrics: a scrape failed: {said}") from None
        yield from families

    def _icks(self) -> Iterator[Any]:
        shard = ["ick", "shard"]
        queued = gauge(
            "queued", "members waiting in the Ick shard (pset), per lane", [*shard, "lane"]
        )
        reserved = gauge("reserved", "members reserved, not committed (cset)", shard)
        opened = gauge("open_reservations", "reservations not committed", shard)
        age = gauge(
            "oldest_queued_age_seconds",
            "seconds since the first queued member of the lane was marked dirty (scores "
            "that are Unix times)",
            [*shard, "lane"],
        )
        lease = gauge("lease_held", "1 when a consumer holds the shard's lease", shard)
        beat = gauge(
            "lease_heartbeat_age_seconds",
            "seconds since the consumer holding the lease last renewed it",
            shard,
        )
        done = counter("committed", "members the stream readers' commits closed", shard)
        waiting = gauge("retrying", "members the sink failed on, waiting for a retry", shard)
        dead = gauge("dead_letters", "members set aside after their last attempt", shard)
        lanes = [*shard, "lane"]
        from prometheus_client.core import HistogramMetricFamily

        fresh = HistogramMetricFamily(
            "pyspark_ick_freshness_seconds",
            "how long each committed member waited: commit time minus its score's time",
            labels=lanes,
        )
        untimed = counter(
            "freshness_untimed", "members committed whose score is no Unix time", lanes
        )
        for name, shards in sorted(registered(self.client, "ick").items()):
            letters = DeadLetters(ShardedIck(self.client, name, shards))
            for i, (d, r) in enumerate(zip(letters.count(), letters.retrying(), strict=True)):
                dead.add_metric([name, str(i)], d)
                waiting.add_metric([name, str(i)], r)
            for row in stats(self.client, name, shards)["rows"]:
                labels = [name, str(row["shard"])]
                for lane in LANES:
                    queued.add_metric([*labels, lane], row["lanes"][lane]["queued"])
                    if row["lanes"][lane]["age_s"] is not None:
                        age.add_metric([*labels, lane], row["lanes"][lane]["age_s"])
                reserved.add_metric(labels, row["reserved"])
                opened.add_metric(labels, row["open_reservations"] or 0)
                lease.add_metric(labels, 1 if row["lease_owner"] else 0)
                if row["lease_idle_ms"] is not None:
                    beat.add_metric(labels, row["lease_idle_ms"] / 1000)
                done.add_metric(labels, row["done"])
                for lane, hist in row["freshness"].items():
                    total = 0
                    buckets = []
                    for le, n in zip(LE, hist["counts"], strict=True):
                        total += n
                        buckets.append((le, total))
                    fresh.add_metric([*labels, lane], buckets, hist["sum_s"])
                    untimed.add_metric([*labels, lane], hist["untimed"])
        yield from (queued, reserved, opened, age, lease, beat, done, waiting, dead)
        yield from (fresh, untimed)

    def _dehydrators(self) -> Iterator[Any]:
        shard = ["dehydrator", "shard"]
        parked = gauge("dehydrator_parked", "elements parked (due or not)", shard)
        due = gauge("dehydrator_due", "elements due now, not claimed yet", shard)
        overdue = gauge(
            "dehydrator_overdue_seconds",
            "seconds since the first element due and not claimed was due (0: none)",
            shard,
        )
        claimed = gauge("dehydrator_claimed", "elements claimed, not committed", shard)
        lease = gauge("dehydrator_lease_held", "1 when a consumer holds the shard's lease", shard)
        beat = gauge(
            "dehydrator_lease_heartbeat_age_seconds",
            "seconds since the consumer holding the lease last renewed it",
            shard,
        )
        done = counter("dehydrator_committed", "elements the stream sources' commits closed", shard)
        following = gauge(
            "dehydrator_next_release_seconds",
            "seconds to the next release (0: one is due; -1: empty)",
            ["dehydrator"],
        )
        for name, shards in sorted(registered(self.client, "dehydrator").items()):
            report = dehydrator_stats(self.client, name, shards)
            for row in report["rows"]:
                labels = [name, str(row["shard"])]
                parked.add_metric(labels, row["parked"])
                due.add_metric(labels, row["due"])
                overdue.add_metric(labels, row["overdue_ms"] / 1000)
                claimed.add_metric(labels, row["claimed"])
                lease.add_metric(labels, 1 if row["lease_owner"] else 0)
                if row["lease_idle_ms"] is not None:
                    beat.add_metric(labels, row["lease_idle_ms"] / 1000)
                done.add_metric(labels, row["done"])
            wait = report["totals"]["next_due_ms"]
            following.add_metric([name], wait / 1000 if wait >= 0 else -1)
        yield from (parked, due, overdue, claimed, lease, beat, done, following)


def serve(client: Client, port: int, address: str = "127.0.0.1", where: str = "") -> Any:
    """Serve ``/metrics`` on ``address:port`` from a background thread; returns the server
    (``shutdown()`` stops it). ``where`` names the Redis in a failed scrape's error."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(client, where))  # type: ignore[arg-type]
    server, _ = start_http_server(port, address, registry=registry)
    return server
