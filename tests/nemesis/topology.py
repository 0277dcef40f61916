"""Where the soak's Ick lives: a durable redis-server behind the fault proxy, (--sentinel)
a Sentinel set, or (--cluster) a Redis Cluster."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from cluster_faults import start_cluster_with_replicas
from fault_proxy import FaultProxy
from redis_faults import start_durable

from nemesis.processes import signal_pid
from nemesis.settings import Settings
from pyspark_ick import connect
from pyspark_ick.testing import start_sentinels


@dataclass
class Target:
    """Where the soak's Ick lives: a durable server behind the fault proxy, (--sentinel)
    a Sentinel set, or (--cluster) a Redis Cluster; ``client()`` makes a producer's
    client."""

    url: str
    direct: Any  # a client that no fault touches (the proxy's server; the set's primary)
    client: Callable[[], Any]
    where: str
    servers: str  # the data nodes' settings, for the summary
    server: Any = None
    proxy: Any = None
    sentinels: Any = None
    cluster: Any = None  # --cluster: a testing.RedisClusterServers


def start_target(settings: Settings, on_exit: Callable[[Callable[[], Any]], None]) -> Target:
    """Start what the Ick lives on; ``on_exit`` takes each function that stops a part."""
    if settings.cluster:
        return start_cluster_target(settings, on_exit)
    if settings.sentinel:
        sentinels = start_sentinels(
            replicas=2,
            sentinels=3,
            args=(("--appendonly", "yes", "--appendfsync", "always") if settings.durable else ()),
        )
        on_exit(sentinels.stop)
        on_exit(
            lambda: keep_logs(
                [*sentinels.servers, *sentinels.sentinels], Path(settings.out).resolve() / "logs"
            )
        )
        on_exit(
            lambda: [
                signal_pid(n.process.pid, signal.SIGCONT) for n in sentinels.servers if n.alive
            ]
        )
        ports = {n.port for n in [*sentinels.servers, *sentinels.sentinels]}
        assert not ports & {6379, 26379}, ports

        def producer_client() -> Any:
            """A client that follows failovers and waits for replicas after each write."""
            return waiting_client(sentinels.url, settings)

        nodes = ", ".join(str(n.port) for n in sentinels.servers)
        watchers = ", ".join(str(n.port) for n in sentinels.sentinels)
        return Target(
            sentinels.url,
            connect(sentinels.url, timeout=10.0),
            producer_client,
            f"Sentinel set: redis {nodes} (primary {sentinels.primary_port()}), "
            f"sentinels {watchers}",
            "start_sentinels: a primary, 2 replicas, 3 sentinels (down-after 1 s, "
            "failover-timeout 2 s); "
            + (
                "appendonly yes, appendfsync always"
                if settings.durable
                else "nothing persisted (no AOF, no RDB: --durable for appendonly)"
            ),
            sentinels=sentinels,
        )
    server = start_durable()
    on_exit(server.stop)
    on_exit(lambda: server.process is not None and signal_pid(server.process.pid, signal.SIGCONT))
    assert server.port not in (6379, 26379)
    proxy = FaultProxy(server.port)
    on_exit(proxy.close)
    return Target(
        proxy.url,
        redis.Redis(port=server.port, socket_timeout=10),
        lambda: redis.Redis(port=proxy.port, socket_timeout=2, socket_connect_timeout=2),
        f"redis {server.port} behind proxy {proxy.port}",
        "one durable redis-server (appendonly, appendfsync always)",
        server=server,
        proxy=proxy,
    )


def start_cluster_target(
    settings: Settings, on_exit: Callable[[Callable[[], Any]], None]
) -> Target:
    """3 primaries with a replica each (cluster-node-timeout 2 s: a failover in seconds),
    nothing persisted; every client has every node as a seed, and a producer's waits for
    a replica of each primary it wrote (``connect(url, wait_replicas=...)``)."""
    cluster = start_cluster_with_replicas(3, replicas=1, node_timeout_ms=2000)
    on_exit(cluster.stop)
    on_exit(lambda: keep_logs(cluster.nodes, Path(settings.out).resolve() / "logs"))
    on_exit(lambda: [signal_pid(n.process.pid, signal.SIGCONT) for n in cluster.nodes])
    ports = {n.port for n in cluster.nodes}
    assert not ports & {6379, 26379}, ports
    url = cluster.seed_url()
    return Target(
        url,
        connect(url, timeout=10.0),
        lambda: waiting_client(url, settings),
        "Redis Cluster: primaries "
        + ", ".join(str(n.port) for n in cluster.nodes[:3])
        + ", replicas "
        + ", ".join(str(n.port) for n in cluster.nodes[3:]),
        "start_cluster_with_replicas: 3 primaries, a replica each, cluster-node-timeout "
        "2000 ms; nothing persisted (no AOF, no RDB)",
        cluster=cluster,
    )


def waiting_client(url: str, settings: Settings) -> Any:
    """A producer's client for ``url`` whose writes return once ``settings.wait_replicas``
    replicas have them, waiting again (``wait_timeout`` each) for up to 20 s: a killed
    primary rejoins as a replica within 2-6 s."""
    return connect(
        url,
        timeout=2.0,
        retry_timeout=20.0,
        wait_replicas=settings.wait_replicas,
        wait_timeout=settings.wait_timeout,
    )


def keep_logs(nodes: Any, into: Path) -> None:
    """Copy the log of every node (data nodes and sentinels: their +switch-master,
    failover and convert-to-slave events) into ``into`` before stop() removes their
    directories."""
    into.mkdir(parents=True, exist_ok=True)
    for node in nodes:
        for log in Path(node.directory or "/nonexistent").glob("*.log"):
            shutil.copy(log, into / f"{node.port}-{log.name}")
