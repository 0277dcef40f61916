"""The project's own Redis Cluster fault tools, on top of pyspark_ick.testing's clusters:
replicas of the primaries (``start_cluster_with_replicas``: kill -9 of a primary fails
over), which node serves a slot (``owner``, ``primaries``, ``wait_healthy``), and a hash slot
moved step by step as ``redis-cli --cluster reshard`` does (``SlotMigration``,
``migrate_slot``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from pyspark_ick import IckError
from pyspark_ick.testing import (
    RedisClusterServers,
    RedisServer,
    meet,
    role,
    start_cluster,
    start_cluster_node,
    wait_until,
)


def node_id(node: RedisServer) -> str:
    """The cluster node id of ``node`` (CLUSTER MYID)."""
    with node.client() as c:
        value = c.execute_command("CLUSTER", "MYID")
    return value.decode() if isinstance(value, bytes) else str(value)


# --- replicas and failover ---------------------------------------------------------------


def start_cluster_with_replicas(
    masters: int = 3,
    replicas: int = 1,
    *,
    node_timeout_ms: int = 2000,
    args: Sequence[str] = (),
) -> RedisClusterServers:
    """``start_cluster(masters)`` plus ``replicas`` replicas per primary attached by CLUSTER
    REPLICATE (``nodes`` lists the primaries first); ``node_timeout_ms`` is
    cluster-node-timeout (2000: a failover takes a few seconds)."""
    args = ("--repl-diskless-sync-delay", "0", *args)  # else a first sync waits 5 s
    cluster = start_cluster(masters, node_timeout_ms=node_timeout_ms, args=args)
    try:
        for _ in range(masters * replicas):
            cluster.nodes.append(start_cluster_node(None, *args, node_timeout_ms=node_timeout_ms))
        meet(cluster.nodes)
        _attach_replicas(cluster.nodes, masters)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _attach_replicas(nodes: list[RedisServer], masters: int) -> None:
    """Make ``nodes[masters:]`` replicas of the primaries, in turn; wait until each has
    synced and every node knows it as a replica of its primary (so it can fail over)."""
    ids = [node_id(n) for n in nodes]
    pairs = [(nodes[i], ids[(i - masters) % masters]) for i in range(masters, len(nodes))]
    for replica, master in pairs:
        with replica.client() as c:
            c.execute_command("CLUSTER", "REPLICATE", master)
    for replica, master in pairs:
        wait_until(
            lambda r=replica: replica_link(r)[0], timeout=30, what=f"replica {replica.port} in sync"
        )
        for node in nodes:
            wait_until(
                lambda n=node, r=replica, m=master: _knows_replica(n, node_id(r), m),
                timeout=30,
                what=f"node {node.port} knowing replica {replica.port}",
            )


def replica_link(node: RedisServer) -> tuple[bool, int | None]:
    """(whether ``node`` is a replica with its link to its primary up, the port of that
    primary); (False, None) for a primary."""
    with node.client(socket_timeout=2) as c:
        info = c.info("replication")
    if info.get("role") != "slave":
        return False, None
    return info.get("master_link_status") == "up", int(info["master_port"])


def _knows_replica(node: RedisServer, replica: str, master: str) -> bool:
    with node.client(socket_timeout=2) as c:
        text = c.execute_command("CLUSTER", "NODES")
    text = text.decode() if isinstance(text, bytes) else str(text)
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == replica:
            return "slave" in fields[2] and fields[3] == master
    return False


def live(cluster: RedisClusterServers) -> list[RedisServer]:
    """The nodes whose process runs."""
    return [n for n in cluster.nodes if n.process is None or n.process.poll() is None]


def by_port(cluster: RedisClusterServers, port: int) -> RedisServer:
    """The node listening on ``port``."""
    return next(n for n in cluster.nodes if n.port == port)


def owner(cluster: RedisClusterServers, slot: int) -> RedisServer:
    """The primary serving hash ``slot``, as the first live node answering sees it."""
    for node in live(cluster):
        with contextlib.suppress(redis.RedisError), node.client(socket_timeout=2) as c:
            for first, last, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if int(first) <= slot <= int(last):
                    return by_port(cluster, int(primary[1]))
    raise IckError(f"no live node knows an owner of slot {slot}")


def primaries(cluster: RedisClusterServers) -> list[RedisServer]:
    """The live nodes that are primaries now (after a failover: the promoted ones)."""
    return [n for n in live(cluster) if role(n) == "master"]


def wait_healthy(cluster: RedisClusterServers, timeout: float = 30.0) -> None:
    """Until every live node says cluster_state:ok and the 16384 slots are served by live
    primaries (after a failover: the replica was promoted everywhere)."""

    def healthy() -> bool:
        ports = {n.port for n in live(cluster)}
        for node in live(cluster):
            with node.client(socket_timeout=2) as c:
                if c.cluster("INFO").get("cluster_state") != "ok":
                    return False
                ranges = c.execute_command("CLUSTER", "SLOTS")
            if sum(int(r[1]) - int(r[0]) + 1 for r in ranges) != 16384:
                return False
            if any(int(r[2][1]) not in ports for r in ranges):
                return False
        return True

    wait_until(healthy, timeout=timeout, interval=0.1, what="a healthy cluster")


# --- slot migration ----------------------------------------------------------------------


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster hash slot of ``key`` (CRC16, hash tags honoured)."""
    from redis.crc import key_slot as crc_slot

    return int(crc_slot(key.encode() if isinstance(key, str) else key))


@dataclass
class SlotMigration:
    """Moves hash ``slot`` of ``cluster`` to ``target`` the way ``redis-cli --cluster
    reshard`` does, one step at a time, so a test can act in between.

    ``begin()``: CLUSTER SETSLOT IMPORTING on the target, then MIGRATING on the source
    (nothing moved yet); ``step()``: CLUSTER GETKEYSINSLOT and one MIGRATE of up to
    ``keys_per_step`` keys; ``finish()``: SETSLOT NODE on the target, the source, then
    every other primary. ``run()`` does it all, calling ``between`` after ``begin`` and
    after each step. ``moved`` counts the keys moved, ``steps`` the MIGRATE calls.
    """

    cluster: RedisClusterServers
    slot: int
    target: RedisServer
    keys_per_step: int = 10
    timeout_ms: int = 5000
    source: RedisServer | None = None
    moved: int = 0
    steps: int = 0

    def begin(self) -> None:
        """Mark the slot IMPORTING on the target and MIGRATING on the source."""
        self.source = owner(self.cluster, self.slot)
        if self.source.port == self.target.port:
            raise IckError(f"slot {self.slot} is served by port {self.target.port} already")
        with self.target.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING", node_id(self.source))
        with self.source.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING", node_id(self.target))

    def keys_left(self) -> int:
        """How many keys of the slot are still on the source."""
        assert self.source is not None, "begin() first"
        with self.source.client() as c:
            return int(c.execute_command("CLUSTER", "COUNTKEYSINSLOT", self.slot))

    def step(self) -> int:
        """MIGRATE up to ``keys_per_step`` keys of the slot; returns how many (0: none left)."""
        assert self.source is not None, "begin() first"
        with self.source.client() as c:
            keys = c.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, self.keys_per_step)
            if keys:
                c.execute_command(
                    "MIGRATE",
                    self.target.host,
                    self.target.port,
                    "",
                    0,
                    self.timeout_ms,
                    "KEYS",
                    *keys,
                )
        self.moved += len(keys)
        self.steps += bool(keys)
        return len(keys)

    def finish(self) -> None:
        """Assign the slot to the target on the target, the source and every other primary
        (call once ``step()`` returned 0)."""
        assert self.source is not None, "begin() first"
        target = node_id(self.target)
        others = [
            n for n in primaries(self.cluster) if n.port not in (self.target.port, self.source.port)
        ]
        for node in [self.target, self.source, *others]:
            with node.client() as c:
                c.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", target)

    def run(self, between: Callable[[SlotMigration], None] | None = None) -> int:
        """begin, step until the slot is empty on the source, finish; returns keys moved."""
        self.begin()
        if between is not None:
            between(self)
        while self.step():
            if between is not None:
                between(self)
        self.finish()
        return self.moved


def migrate_slot(
    cluster: RedisClusterServers,
    slot: int,
    target: RedisServer,
    *,
    keys_per_step: int = 10,
    between: Callable[[SlotMigration], None] | None = None,
) -> int:
    """Move hash ``slot`` to ``target`` in MIGRATE steps of ``keys_per_step`` keys, as
    ``redis-cli --cluster reshard`` does; ``between(migration)`` runs while the slot is
    MIGRATING with nothing moved and after each step. Returns how many keys moved."""
    return SlotMigration(cluster, slot, target, keys_per_step).run(between)
