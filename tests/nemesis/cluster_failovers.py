"""The nemesis's faults of a Redis Cluster (--cluster): kill -9 of a primary, CLUSTER
FAILOVER on a replica, SIGSTOP of a node and the migration of a shard's slot, each timed
until the primary of the slot hit answers a write again."""

from __future__ import annotations

import contextlib
import random
import signal
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import redis
from cluster_faults import (
    SlotMigration,
    by_port,
    key_slot,
    live,
    owner,
    primaries,
    replica_link,
    wait_healthy,
)
from faults_support import replicated
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis_faults import kill, restart

from nemesis.failovers import promotion
from nemesis.processes import signal_pid
from nemesis.settings import DEHYDRATOR, ICK, Settings
from pyspark_ick.keys import shard_names
from pyspark_ick.testing import role, wait_until


@cache
def probe_key(slot: int) -> str:
    """A key of hash ``slot`` (``nemesis:probe:<n>``, the first n that hashes there)."""
    n = 0
    while key_slot(f"nemesis:probe:{n}") != slot:
        n += 1
    return f"nemesis:probe:{n}"


def first_slot(node: Any) -> int:
    """The first hash slot that primary ``node`` serves."""
    with node.client(socket_timeout=2) as c:
        return min(
            int(r[0]) for r in c.execute_command("CLUSTER", "SLOTS") if int(r[2][1]) == node.port
        )


class ClusterFailovers:
    """The Redis Cluster kinds of ``Nemesis``, whose ``cluster``, ``settings``, ``rng`` and
    ``_hold`` they use. Failovers record
    ``answered_after``: seconds from the fault until the primary that the cluster names
    for a slot of the node hit took a write."""

    cluster: Any  # --cluster: a testing.RedisClusterServers (primaries and replicas)
    settings: Settings
    rng: random.Random
    _hold: Callable[[float], None]

    def _slot_answered(
        self, began: float, slot: int, old: int | None, timeout: float = 90.0
    ) -> tuple[float, int]:
        """Seconds from ``began`` until the primary a live node names for ``slot`` (another
        than port ``old`` if given) takes a write (SET of a key of that slot), and its
        port."""
        deadline = time.monotonic() + timeout
        quick = {
            "socket_timeout": 0.5,
            "socket_connect_timeout": 0.5,
            "retry": Retry(NoBackoff(), 0),
        }
        while time.monotonic() < deadline:
            for node in live(self.cluster):
                if node.port == old:
                    continue  # stopped, or what it says does not count
                with contextlib.suppress(redis.RedisError, OSError, StopIteration):
                    with node.client(**quick) as c:
                        ranges = c.execute_command("CLUSTER", "SLOTS")
                    port = next(int(r[2][1]) for r in ranges if int(r[0]) <= slot <= int(r[1]))
                    if port == old:
                        continue
                    with by_port(self.cluster, port).client(**quick) as c:
                        c.set(probe_key(slot), time.time())
                    return round(time.monotonic() - began, 2), port
            time.sleep(0.02)
        raise TimeoutError(f"no primary of slot {slot} took a write within {timeout:.0f} s")

    def _agreed_owner(self, slot: int, timeout: float = 30.0) -> int:
        """The port of the primary that every live node names for ``slot``, once they agree."""

        def agreed() -> int | None:
            ports = set()
            for node in live(self.cluster):
                with node.client(socket_timeout=2) as c:
                    ranges = c.execute_command("CLUSTER", "SLOTS")
                ports |= {int(r[2][1]) for r in ranges if int(r[0]) <= slot <= int(r[1])}
            return ports.pop() if len(ports) == 1 else None

        port: int = wait_until(agreed, timeout=timeout, interval=0.1, what=f"one owner of {slot}")
        return port

    def _settled(self, timeout: float = 90.0) -> None:
        """Until the cluster is healthy and every replica's link to its primary is up."""
        wait_healthy(self.cluster, timeout)
        wait_until(
            lambda: all(replica_link(n)[0] for n in live(self.cluster) if role(n) == "slave"),
            timeout=timeout,
            interval=0.1,
            what="every replica in sync",
        )

    def _rejoin(self, node: Any) -> None:
        """Restart a killed node once another primary serves its slots: it has no data
        (nothing persisted) and comes back as a replica of the node promoted in its place."""
        restart(node, timeout=60)
        wait_until(
            lambda: replica_link(node)[0],
            timeout=90,
            interval=0.1,
            what=f"{node.port} a replica again",
        )
        self._settled()

    def cluster_kill(self) -> dict[str, Any]:
        """kill -9 of a primary; its replica is promoted (cluster-node-timeout 2 s); the
        killed node restarted 2-6 s after rejoins as a replica."""
        old = self.rng.choice(primaries(self.cluster))
        slot = first_slot(old)
        began = time.monotonic()
        kill(old)
        answered, new = self._slot_answered(began, slot, old.port)
        down = self.rng.uniform(2, 6)
        self._hold(down)
        self._rejoin(old)
        return promotion(
            old, by_port(self.cluster, new), answered, down_after_promotion=round(down, 2)
        )

    def cluster_failover(self) -> dict[str, Any]:
        """CLUSTER FAILOVER on a replica (graceful: its primary stops taking writes until
        the replica caught up, then the two swap)."""
        replica = self.rng.choice([n for n in live(self.cluster) if role(n) == "slave"])
        old = by_port(self.cluster, replica_link(replica)[1] or 0)
        slot = first_slot(old)
        began = time.monotonic()
        with replica.client(socket_timeout=5) as c:
            c.execute_command("CLUSTER", "FAILOVER")
        answered, _ = self._slot_answered(began, slot, old.port)
        wait_until(
            lambda: replica_link(old)[1] == replica.port,
            timeout=60,
            interval=0.1,
            what=f"{old.port} demoted",
        )
        self._settled()
        return promotion(old, replica, answered)

    def cluster_stop(self) -> dict[str, Any]:
        """SIGSTOP of a node (a primary two times in three) for 0.5-8 s: a primary stopped
        longer than cluster-node-timeout (2 s) is replaced by its replica and rejoins as
        its replica once continued; ``answered_after``: until the replica promoted (or the
        primary, continued) took a write."""
        primary = self.rng.random() < 2 / 3
        node = self.rng.choice(
            primaries(self.cluster)
            if primary
            else [n for n in live(self.cluster) if role(n) == "slave"]
        )
        slot = first_slot(node) if primary else None
        seconds = self.rng.uniform(0.5, 8)
        detail: dict[str, Any] = {"hit": True, "old": node.port, "primary": primary}
        began = time.monotonic()
        signal_pid(node.process.pid, signal.SIGSTOP)
        try:  # a replica promoted while the primary is stopped answers before it is back
            if slot is not None:
                with contextlib.suppress(TimeoutError):
                    detail["answered_after"] = self._slot_answered(began, slot, node.port, seconds)[
                        0
                    ]
            self._hold(max(0.0, began + seconds - time.monotonic()))
        finally:
            signal_pid(node.process.pid, signal.SIGCONT)
        if slot is not None and "answered_after" not in detail:
            detail["answered_after"] = self._slot_answered(began, slot, None)[0]
        self._settled()
        if slot is not None:
            detail["new"] = self._agreed_owner(slot)
            detail["promoted"] = detail["new"] != node.port
        return {**detail, "seconds": round(seconds, 2)}

    def cluster_stale(self) -> dict[str, Any]:
        """SIGSTOP of a primary until its replica, promoted, takes a write for its slot, 2 s
        more, then SIGCONT: the continued node is a replica now (refusing WAIT and writes
        sent on old connections, issue 40) once it hears of the promotion."""
        node = self.rng.choice(primaries(self.cluster))
        slot = first_slot(node)
        began = time.monotonic()
        signal_pid(node.process.pid, signal.SIGSTOP)
        try:
            answered, new = self._slot_answered(began, slot, node.port)
            self._hold(2.0)
        finally:
            signal_pid(node.process.pid, signal.SIGCONT)
        stopped = time.monotonic() - began
        self._settled()
        return {
            "hit": True,
            "promoted": True,
            "old": node.port,
            "new": new,
            "answered_after": answered,
            "stopped": round(stopped, 2),
        }

    def cluster_migrate(self) -> dict[str, Any]:
        """The slot of a shard of the Ick (or the dehydrator) moves to another primary, a
        key per MIGRATE, 0.1-1 s apart, while producers and consumer use it; then until the
        target's replica has the keys (MIGRATE does not wait for it)."""
        names = shard_names(ICK, self.settings.shards)
        if self.settings.dehydrator:
            names += shard_names(DEHYDRATOR, self.settings.shards)
        name = self.rng.choice(names)
        slot = key_slot(name)
        source = owner(self.cluster, slot)
        target = self.rng.choice([n for n in primaries(self.cluster) if n.port != source.port])
        migration = SlotMigration(self.cluster, slot, target, keys_per_step=1)
        began = time.monotonic()
        try:
            migration.run(lambda _: self._hold(self.rng.uniform(0.1, 1.0)))
        finally:
            if migration.source is not None and owner(self.cluster, slot).port != target.port:
                while migration.step():
                    pass
                migration.finish()
        moved = round(time.monotonic() - began, 2)
        with contextlib.closing(self.cluster.client()) as client:
            if not replicated(client, name, timeout_ms=30_000):
                raise TimeoutError(f"{target.port}'s replica lacks the keys moved in 30 s")
        self._settled()
        return {
            "hit": True,
            "shard": name,
            "slot": slot,
            "old": source.port,
            "new": target.port,
            "keys": migration.moved,
            "seconds": moved,
        }

    def heal_cluster(self) -> None:
        """Every node running and continued, killed ones back as replicas, and settled."""
        for node in self.cluster.nodes:
            if node.process is not None and node.process.poll() is None:
                signal_pid(node.process.pid, signal.SIGCONT)
        for node in self.cluster.nodes:
            if node.process is not None and node.process.poll() is not None:
                self._rejoin(node)
        self._settled(120)
