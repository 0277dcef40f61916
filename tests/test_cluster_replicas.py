"""redis.waitReplicas on Redis Cluster (issue 33), with real processes: 3 primaries with a
replica each (tests/cluster_faults.py). Every call of one shard goes to the primary that
owns its slot, so the connector WAITs on a connection of each primary a write touched
(pyspark_ick.pinned.PinnedCluster):

- a writer (``df.write.format("ick")``, the client's park) and both stream readers wait:
  WAIT reaches every primary written, and the replicas hold the writes, the reservations
  and claims and their commits when the call returns;
- a replica that cannot confirm (SIGSTOP) fails the writer and the stream reader naming
  ``redis.waitReplicas``, and the reader delivers nothing it could not replicate;
- a slot moved to another primary: the waiting calls follow it (MOVED) and WAIT there.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_faults import (
    key_slot,
    migrate_slot,
    owner,
    primaries,
    replica_link,
    start_cluster_with_replicas,
)
from support import Sink, drain, failure_of, stop_all, stream

from pyspark_ick import Dehydrator, ReplicationError, ShardedIck, connect
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import RedisClusterServers, RedisServer, wait_until

pytestmark = pytest.mark.slow  # a cluster with replicas of its own

WAITING = {"redis.waitReplicas": 1, "redis.waitTimeout": "2s", "redis.retryTimeout": "20s"}


@pytest.fixture(scope="module")
def replicated() -> Iterator[RedisClusterServers]:
    """3 primaries with a replica each (this module's own: a test stops a replica)."""
    cluster = start_cluster_with_replicas(3, replicas=1, node_timeout_ms=2000)
    yield cluster
    cluster.stop()


def replica_of(cluster: RedisClusterServers, primary: RedisServer) -> RedisServer:
    """The replica of ``primary``."""
    for node in cluster.nodes:
        if replica_link(node)[1] == primary.port:
            return node
    raise AssertionError(f"no replica of {primary.port}")


def waits(node: RedisServer) -> int:
    """WAIT calls ``node`` has served."""
    with node.client(socket_timeout=2) as c:
        return int(c.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


def on_replica(cluster: RedisClusterServers, key: str, *command: Any) -> Any:
    """``command`` (its first argument is ``key``) on the replica of the primary of ``key``."""
    with replica_of(cluster, owner(cluster, key_slot(key))).client(socket_timeout=2) as c:
        c.execute_command("READONLY")
        return c.execute_command(command[0], key, *command[1:])


def test_writers_and_readers_wait_for_the_replica_of_each_primary(spark, replicated, tmp_path):
    cluster, ick, shards, url = replicated, "waited", 3, replicated.url
    before = {n.port: waits(n) for n in primaries(cluster)}
    rows = [(f"m{i}", float(i)) for i in range(300)]
    df = spark.createDataFrame(rows, "member string, score double")
    options = {"redis.url": url, "ick": ick, "shards": shards}
    df.write.format("ick").options(**options, **WAITING).mode("append").save()
    keys = [IckKeys(master) for master in shard_names(ick, shards)]
    assert sum(on_replica(cluster, k.pset, "ZCARD") for k in keys) == 300
    owners = {owner(cluster, key_slot(k.master)).port for k in keys}
    assert all(waits(n) > before[n.port] for n in primaries(cluster) if n.port in owners)

    query, sink = drain(
        spark, "ick", {**options, **WAITING, "maxMembersPerTrigger": 120}, str(tmp_path / "i")
    )
    try:
        query.awaitTermination(120)
        assert query.exception() is None
    finally:
        stop_all(query)
    assert sorted(r[0] for r in sink.rows()) == sorted(m for m, _ in rows)
    for k in keys:  # the reservations and their commits are on the replicas
        reserved, committed = on_replica(cluster, k.rlog, "HMGET", "reserved", "committed")
        assert int(reserved) > 0 and committed == reserved, (k.master, reserved, committed)

    parker = Dehydrator(connect(url, wait_replicas=1, wait_timeout=2), "waited-dh")
    assert parker.park([f"e{i}" for i in range(50)], ["x"] * 50, [0] * 50) == (50, 0)
    dh = {"redis.url": url, "dehydrator": "waited-dh", **WAITING}
    query, sink = drain(spark, "dehydrator", dh, str(tmp_path / "d"))
    try:
        query.awaitTermination(120)
        assert query.exception() is None
    finally:
        stop_all(query)
    assert sorted(r[0] for r in sink.rows()) == sorted(f"e{i}" for i in range(50))


def test_a_replica_that_cannot_confirm_fails_naming_the_option(spark, replicated, tmp_path):
    cluster, ick, url = replicated, "frozen", replicated.url
    stopped = replica_of(cluster, owner(cluster, key_slot(ick)))
    assert stopped.process is not None
    client = connect(url, wait_replicas=1, wait_timeout=0.3, retry_timeout=1)
    assert ShardedIck(client, ick, 1).add({"a": 1.0}) == (1, 0)
    os.kill(stopped.process.pid, signal.SIGSTOP)
    query = None
    try:
        with pytest.raises(ReplicationError, match=r"redis\.waitReplicas.*redis\.waitTimeout"):
            ShardedIck(client, ick, 1).add({"b": 2.0})
        sink = Sink()
        options = {"redis.url": url, "ick": ick, "shards": 1, "redis.waitReplicas": 1}
        options.update({"redis.waitTimeout": "300ms", "redis.retryTimeout": "1s"})
        query = stream(spark, "ick", options, sink, str(tmp_path / "ckpt"))
        message = failure_of(query, 120)
        assert "redis.waitReplicas" in message and "redis.waitTimeout" in message, message
        assert sink.snapshot() == []  # no batch whose reservation the replica lacks
    finally:
        os.kill(stopped.process.pid, signal.SIGCONT)
        stop_all(query)
    wait_until(
        lambda: on_replica(cluster, IckKeys(ick).pset, "ZSCORE", "b") is not None,
        timeout=30,
        what="the replica caught up",
    )


def test_a_moved_slot_sends_the_waiting_calls_to_its_new_primary(replicated):
    cluster, ick, url = replicated, "moving", replicated.url
    client = connect(url, wait_replicas=1, wait_timeout=2, retry_timeout=20)
    queue, log = ShardedIck(client, ick, 1), ReservationLog(client, ick)
    assert queue.add({"a": 1.0}) == (1, 0)  # pins a connection of the slot's owner
    source = owner(cluster, key_slot(ick))
    target = next(n for n in primaries(cluster) if n.port != source.port)
    migrate_slot(cluster, key_slot(ick), target)
    before = waits(target)
    assert queue.add({"b": 2.0}) == (1, 0)  # MOVED: asked again, run on the target
    fence = log.lease.acquire("mover", 10_000)
    head = log.reserve(None, 0, fence).head
    assert log.commit(head, fence) == head
    assert waits(target) >= before + 3  # the add, the reserve, the commit
    with replica_of(cluster, target).client(socket_timeout=2) as c:  # confirmed there
        c.execute_command("READONLY")
        assert c.hget(IckKeys(ick).rlog, "committed") == str(head).encode()
