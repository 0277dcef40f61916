"""A throwaway Redis Cluster of ``redis-server`` processes (``redis_cluster()``)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from .servers import HOST, RedisServer, running, start_binary, wait_until


@dataclass
class RedisClusterServers:
    """The nodes of a throwaway cluster; ``url`` points at the first one."""

    nodes: list[RedisServer]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def client(self, **kw: Any) -> redis.RedisCluster:
        return redis.RedisCluster(host=HOST, port=self.nodes[0].port, **kw)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def seed_url(self, nodes: Sequence[RedisServer] | None = None) -> str:
        """``redis://host:port,host:port/0``: several seed nodes (default: every node)."""
        seeds = ",".join(f"{n.host}:{n.port}" for n in (nodes or self.nodes))
        return f"redis://{seeds}/0"


def start_cluster_node(
    binary: str | None = None, *args: str, node_timeout_ms: int = 5000
) -> RedisServer:
    """A cluster-enabled ``redis-server`` (its bus port free too), in no cluster yet;
    ``node_timeout_ms`` is its cluster-node-timeout, ``args`` more settings."""
    return start_binary(
        binary,
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        str(node_timeout_ms),
        *args,
        cluster_bus=True,
    )


def meet(nodes: Sequence[RedisServer]) -> None:
    """CLUSTER MEET every node from the first; returns once each node knows them all and
    says cluster_state:ok."""
    with nodes[0].client() as c:
        for node in nodes[1:]:
            c.execute_command("CLUSTER", "MEET", HOST, node.port)
    for node in nodes:
        wait_until(
            lambda n=node: _cluster_ok(n, len(nodes)), timeout=30, what=f"cluster node {node.port}"
        )


def start_cluster(
    masters: int = 3,
    binary: str | None = None,
    *,
    node_timeout_ms: int = 5000,
    args: Sequence[str] = (),
) -> RedisClusterServers:
    """A cluster of ``masters`` primaries with the 16384 slots split evenly;
    ``node_timeout_ms`` is cluster-node-timeout, ``args`` go to every redis-server."""
    nodes: list[RedisServer] = []
    try:
        for _ in range(masters):
            nodes.append(start_cluster_node(binary, *args, node_timeout_ms=node_timeout_ms))
        step = 16384 // masters
        for i, node in enumerate(nodes):
            first, last = i * step, (16383 if i == masters - 1 else (i + 1) * step - 1)
            with node.client() as c:
                c.execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))
        meet(nodes)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return RedisClusterServers(nodes)


def _cluster_ok(node: RedisServer, count: int) -> bool:
    with node.client(socket_timeout=1) as c:
        info = c.cluster("INFO")  # parsed by redis-py into a dict
        return info.get("cluster_state") == "ok" and int(info["cluster_known_nodes"]) == count


def redis_cluster(masters: int = 3) -> contextlib.AbstractContextManager[RedisClusterServers]:
    """A throwaway Redis Cluster for the duration of the block."""
    return running(lambda: start_cluster(masters))
