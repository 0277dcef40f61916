"""The fault suite of issue 10: what a production Redis does, with real servers, while
readStream.format("ick") or format("dehydrator") runs.

- kill -9 of a durable Redis mid-stream, restarted on the same port ~3 s later;
- kill -9 of a cluster primary that owns a shard (3 primaries + 3 replicas, failover);
- a slot migration under load, keys moved in several MIGRATE steps, then SETSLOT NODE,
  for the Ick reader and the dehydrator source, with a read while the slot is MIGRATING
  and nothing has moved yet;
- a full Redis (maxmemory, noeviction): the consumer drains it, producers get a clear error;
- a query restarted after its reader crashed resumes in seconds without consumerId, while a
  second live query is refused at once;
- and the harness these use (tests/redis_faults.py, tests/cluster_faults.py): kill -9 and
  restart, slot migration.

Each stream query must ride the fault out by itself (no restart from the checkpoint), and
every add Redis acknowledged is checked against the deliveries (I1: a delivery that started
after it; tests/faults_support.py). One test at a time, each bounded by its deadlines.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from cluster_faults import (
    SlotMigration,
    key_slot,
    migrate_slot,
    owner,
    primaries,
    start_cluster_with_replicas,
    wait_healthy,
)
from faults_support import (
    Parker,
    Producer,
    check_deliveries,
    check_i1,
    drained,
    source_runners,
    wait_running,
)
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode
from redis.retry import Retry
from redis_faults import kill, restart
from support import Delivery, Sink, failure_of, stop_all, stream

from pyspark_ick import Dehydrator, IckError, ShardedIck, connect
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import RedisClusterServers, RedisServer, start_binary, start_cluster

pytestmark = pytest.mark.slow  # servers killed, failed over and migrated under load

RETRY = {"redis.retryTimeout": "30s", "leaseTimeout": "10s"}  # outages here last < 10 s


def ick_options(url: str, ick: str, shards: int, **more: Any) -> dict[str, Any]:
    """Stream options of format("ick") with the retry and lease settings of this suite."""
    return {"redis.url": url, "ick": ick, "shards": shards, **RETRY, **more}


def cluster_client(cluster: RedisClusterServers) -> redis.RedisCluster:
    """A plain redis-py cluster client seeded with every node (the producers' client)."""
    return redis.RedisCluster(
        startup_nodes=[ClusterNode(n.host, n.port) for n in cluster.nodes],
        socket_timeout=2,
        socket_connect_timeout=1,
    )


# --- kill -9 of Redis, restart on the same port ---------------------------------------


def test_redis_killed_and_restarted_mid_stream(spark, durable, tmp_path):
    ick, shards = "restarted", 2
    # no retries inside redis-py: a MULTI it re-sent after a lost reply would be recorded
    # with the reservation number of the second send, not of the add that counted
    producer = Producer(
        durable.client(socket_timeout=2, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)),
        ick,
        shards,
    )
    sink = Sink()
    query = stream(
        spark,
        "ick",
        ick_options(durable.url, ick, shards, maxMembersPerTrigger=40),
        sink,
        str(tmp_path / "ckpt"),
    )
    try:
        producer.start()
        wait_running(query, lambda: len(sink.snapshot()) >= 3, 60, "three batches")
        kill(durable)
        killed = time.monotonic()
        time.sleep(3)  # the outage
        restart(durable)
        back = time.monotonic()
        wait_running(
            query,
            lambda: producer.acked_since(back) >= 100 and sink.batches_since(back) >= 3,
            60,
            "adds and batches after the restart",
        )
        producer.stop()
        client = connect(durable.url)
        wait_running(query, lambda: drained(client, ick, shards), 60, "the drain")
        assert query.exception() is None
    finally:
        stop_all(producer, query)
    check_deliveries(sink)
    assert any(a.at < killed for a in producer.adds) and producer.acked_since(back)
    print(
        f"first batch {sink.first_since(back):.1f} s after the restart; "
        f"{check_i1(producer.adds, sink, ick)} adds delivered, {len(producer.errors)} refused"
    )


# --- a primary dies, its replica takes over -----------------------------------------


@pytest.fixture
def replicated_cluster() -> Iterator[RedisClusterServers]:
    """3 primaries, a replica each, cluster-node-timeout 2000 ms (a failover in seconds)."""
    cluster = start_cluster_with_replicas(3, replicas=1, node_timeout_ms=2000)
    yield cluster
    cluster.stop()


def test_cluster_failover_mid_stream(spark, replicated_cluster, tmp_path):
    cluster, ick, shards = replicated_cluster, "failover", 3
    doomed = owner(cluster, key_slot("failover:0"))
    on_doomed = {i for i in range(shards) if owner(cluster, key_slot(f"{ick}:{i}")) is doomed}
    others = [n for n in primaries(cluster) if n is not doomed]
    url = cluster.seed_url([doomed, *others])  # the seed that dies comes first
    producer = Producer(cluster_client(cluster), ick, shards, wait_replica=True)
    sink = Sink()
    query = stream(
        spark,
        "ick",
        ick_options(url, ick, shards, maxMembersPerTrigger=60),
        sink,
        str(tmp_path / "ckpt"),
    )
    try:
        producer.start()
        wait_running(query, lambda: len(sink.snapshot()) >= 3, 60, "three batches")
        kill(doomed)
        killed = time.monotonic()
        wait_healthy(cluster, 30)
        healed = time.monotonic()
        producer.wait_replica = False  # the promoted primary has no replica
        wait_running(
            query,
            lambda: (
                producer.acked_since(healed, on_doomed) >= 50 and sink.batches_since(healed) >= 3
            ),
            60,
            "adds and batches after failover",
        )
        producer.stop()
        client = connect(others[0].url)
        wait_running(query, lambda: drained(client, ick, shards), 60, "the drain")
        assert query.exception() is None
    finally:
        stop_all(producer, query)
    check_deliveries(sink)
    kept = [a for a in producer.adds if a.kept or a.at > healed or a.shard not in on_doomed]
    unconfirmed = [a for a in producer.adds if a not in kept]
    # only what the dead primary acknowledged in its last moments may have died with it
    assert all(a.at > killed - 1.0 for a in unconfirmed), unconfirmed[:5]
    print(
        f"failover in {healed - killed:.1f} s, first batch {sink.first_since(healed):.1f} s "
        f"later; {check_i1(kept, sink, ick)} adds delivered, "
        f"{len(unconfirmed)} not confirmed by a replica before the kill"
    )


# --- slot migration under load ---------------------------------------------------------


@pytest.fixture(scope="module")
def migration_cluster() -> Iterator[RedisClusterServers]:
    """A 3-primary cluster of the migration tests (their slots move)."""
    cluster = start_cluster(3)
    yield cluster
    cluster.stop()


def migration_to_another(cluster: RedisClusterServers, key: str) -> SlotMigration:
    """A migration of the slot of ``key`` to a primary that does not serve it, a key a step."""
    slot = key_slot(key)
    source = owner(cluster, slot)
    target = next(n for n in primaries(cluster) if n is not source)
    return SlotMigration(cluster, slot, target, keys_per_step=1)


def complete(migration: SlotMigration) -> None:
    """Finish a migration a failed test left half done (the fixture's cluster is shared)."""
    if (
        migration.source is not None
        and owner(migration.cluster, migration.slot) is not migration.target
    ):
        while migration.step():
            pass
        migration.finish()


def first_batch_then_fail(spark: Any, fmt: str, options: dict[str, Any], checkpoint: str) -> Sink:
    """Run a query whose sink fails its first batch: the batch stays reserved (offset
    logged, not committed), so a restart replays it. Returns the sink (one delivery)."""
    sink = Sink(fail_first=True)
    query = stream(spark, fmt, options, sink, checkpoint)
    with pytest.raises(Exception, match="fails batch 0 on purpose"):
        query.awaitTermination(60)
    assert len(sink.snapshot()) == 1, "the first query ended without its first batch"
    return sink


def flushed(cluster: RedisClusterServers) -> Any:
    """A connector client of ``cluster``, every primary flushed first (tests share it)."""
    for node in primaries(cluster):
        with node.client() as c:
            c.flushall()
    return connect(cluster.nodes[0].url)


def replay_then_move(
    query: Any, sink: Sink, first: Delivery, migration: SlotMigration, what: str
) -> float:
    """The restarted query replays batch 0 (``first``, the ``what`` one) while the slot is
    MIGRATING with nothing moved; then the rest of the slot moves in MIGRATE steps, the
    query and the producer working on it for 0.5 s after each, and SETSLOT NODE. Returns
    when the move was done (time.monotonic())."""
    wait_running(query, sink.snapshot, 20, "the replay of batch 0 while MIGRATING")
    assert migration.moved == 0
    replay = sink.snapshot()[0]
    assert (replay.batch, len(replay.rows)) == (first.batch, 400), (
        f"the batch read while the slot was MIGRATING is not the {what} one"
    )
    assert replay.sorted_rows == first.sorted_rows
    while migration.step():
        time.sleep(0.5)
        assert query.isActive, f"the query stopped during the migration: {query.exception()}"
    migration.finish()
    done = time.monotonic()
    assert owner(migration.cluster, migration.slot) is migration.target
    assert migration.steps >= 3
    return done


def test_slot_migration_under_load_ick(spark, migration_cluster, tmp_path):
    cluster, ick, shards = migration_cluster, "moving", 2
    client = flushed(cluster)
    ShardedIck(client, ick, shards).add({f"pre{i}": float(i) for i in range(400)})
    options = ick_options(cluster.url, ick, shards, consumerId="mover", maxMembersPerTrigger=1000)
    first = first_batch_then_fail(spark, "ick", options, str(tmp_path / "ckpt")).snapshot()[0]
    assert len(first.rows) == 400
    ShardedIck(client, ick, shards).add({f"q{i}": 1000.0 + i for i in range(100)})  # queued
    migration = migration_to_another(cluster, f"{ick}:0")
    producer = Producer(cluster_client(cluster), ick, shards)
    sink, query = Sink(), None
    try:
        migration.begin()
        # the client-level read of the open reservation, MIGRATING, nothing moved
        numbers = [r[3] for r in first.rows if r[2] == 0]  # batch 0's reservation of shard 0
        read = ReservationLog(client, f"{ick}:0").read(min(numbers) - 1, max(numbers))
        reserved = sorted(r[0] for r in first.rows if r[2] == 0)
        assert members_of(read) == reserved, (
            f"read while MIGRATING: {len(members_of(read))} of {len(reserved)} members"
        )
        producer.start()
        query = stream(
            spark, "ick", {**options, "maxMembersPerTrigger": 50}, sink, str(tmp_path / "ckpt")
        )
        done = replay_then_move(query, sink, first, migration, "reserved")
        wait_running(
            query,
            lambda: producer.acked_since(done, {0}) >= 30 and sink.batches_since(done) >= 3,
            60,
            "adds and batches after the move",
        )
        producer.stop()
        wait_running(query, lambda: drained(client, ick, shards), 60, "the drain")
        assert query.exception() is None
    finally:
        stop_all(producer, query)
        complete(migration)
    check_deliveries(sink)
    print(
        f"{check_i1(producer.adds, sink, ick)} adds delivered; {migration.moved} keys moved "
        f"in {migration.steps} steps; {len(producer.errors)} adds refused"
    )


def members_of(read: list[tuple[int, list[Any]]]) -> list[str]:
    """The members (sorted, as str) of ReservationLog.read's ``[(r, [m, s, ...]), ...]``."""
    return sorted(
        m.decode() if isinstance(m, bytes) else str(m)
        for manifest in read
        for m in manifest.items[::2]
    )


def test_slot_migration_under_load_dehydrator(spark, migration_cluster, tmp_path):
    cluster, name, shards = migration_cluster, "parked", 2
    client = flushed(cluster)
    parked = Dehydrator(client, name, shards)
    parked.park([f"pre{i}" for i in range(400)], [f"early {i}" for i in range(400)], [0] * 400)
    options = {
        "redis.url": cluster.url,
        "dehydrator": name,
        "shards": shards,
        **RETRY,
        "consumerId": "mover",
        "maxElementsPerTrigger": 1000,
    }
    first = first_batch_then_fail(spark, "dehydrator", options, str(tmp_path / "ckpt")).snapshot()[
        0
    ]
    assert len(first.rows) == 400
    late = [f"late{i}" for i in range(100)]  # parked on the moving slot, due after the move
    parked.park(late, [f"late {i}" for i in range(100)], [4000] * 100)
    migration = migration_to_another(cluster, f"{name}:0")
    parker = Parker(Dehydrator(connect(cluster.url), name, shards))
    sink, query = Sink(), None
    try:
        migration.begin()
        claims = parked.claim_log(0)
        read = claims.read(claims.last_committed(), claims.last_claimed())
        assert sorted(entry[0] for entry in read) == sorted(
            r[0] for r in first.rows if r[3] == 0
        ), "the claim read while MIGRATING differs"
        parker.start()
        query = stream(
            spark,
            "dehydrator",
            {**options, "maxElementsPerTrigger": 50},
            sink,
            str(tmp_path / "ckpt"),
        )
        done = replay_then_move(query, sink, first, migration, "claimed")
        wait_running(
            query,
            lambda: parker.acked_since(done) >= 40 and sink.batches_since(done) >= 3,
            60,
            "parks and batches after the move",
        )
        parker.stop()
        acked = set(parker.parked) | set(late)
        wait_running(query, lambda: acked <= sink.values() and parked.size() == 0, 60, "the drain")
        wait_running(
            query,
            lambda: all(
                parked.claim_log(i).last_committed() == parked.claim_log(i).last_claimed()
                for i in range(shards)
            ),
            30,
            "the last commit",
        )
        assert query.exception() is None
    finally:
        stop_all(parker, query)
        complete(migration)
    check_deliveries(sink)
    print(
        f"{len(acked)} parks delivered; {migration.moved} keys moved in {migration.steps} "
        f"steps; {len(parker.errors)} parks refused"
    )


# --- a full Redis ---------------------------------------------------------------------


@pytest.fixture
def small_redis() -> Iterator[RedisServer]:
    """A Redis of 4 MB, maxmemory-policy noeviction (what conf/redis.conf recommends)."""
    server = start_binary("redis-server", "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    yield server
    server.stop()


def fill(ick: ShardedIck, chunk: int = 1000, most: int = 200_000) -> tuple[list[str], IckError]:
    """Add chunks of new members until Redis refuses; returns the acknowledged members and
    the error."""
    members: list[str] = []
    while len(members) < most:
        batch = {f"doc:{len(members) + i}": float(len(members) + i) for i in range(chunk)}
        try:
            ick.add(batch)
        except IckError as exc:
            return members, exc
        members += batch
    raise AssertionError(f"Redis took {most} members without refusing: is maxmemory set?")


def assert_names_full(exc: BaseException, name: str) -> None:
    """The producer's error names ``name`` and says Redis is full (maxmemory)."""
    message = str(exc)
    assert name in message, f"the error does not name {name!r}: {message[:500]}"
    assert "full" in message.lower() or "maxmemory" in message.lower(), message[:500]


def test_full_redis_drains_and_producers_get_a_clear_error(spark, small_redis, tmp_path):
    client = connect(small_redis.url)
    ick = ShardedIck(client, "oomq", 2)
    members, error = fill(ick)
    assert len(members) > 1000
    assert_names_full(error, "oomq")
    with pytest.raises(IckError) as parked:
        Dehydrator(client, "oomdh").park(
            [f"x{i}" for i in range(2000)], ["y" * 50] * 2000, [1000] * 2000
        )
    assert_names_full(parked.value, "oomdh")
    frame = spark.createDataFrame(
        [(f"w{i}", 1.0) for i in range(5000)], "member string, score double"
    )
    with pytest.raises(Exception) as written:
        frame.write.format("ick").option("redis.url", small_redis.url).option("ick", "oomq").option(
            "shards", 2
        ).mode("append").save()
    assert_names_full(written.value, "oomq")
    sink = Sink()
    query = stream(
        spark,
        "ick",
        ick_options(small_redis.url, "oomq", 2, maxMembersPerTrigger=5000),
        sink,
        str(tmp_path / "ckpt"),
    )
    try:
        wait_running(query, lambda: drained(client, "oomq", 2), 90, "the drain of a full Redis")
        assert query.exception() is None
    finally:
        stop_all(query)
    check_deliveries(sink)
    assert set(members) <= sink.values()
    assert ick.add({"after": 1.0}) == (1, 0)  # the drain freed memory: producers go on


# --- a crashed query restarts in seconds; a live second one is refused ----------------


def test_restart_after_crash_resumes_without_consumer_id(spark, client, redis_url, tmp_path):
    ick = ShardedIck(client, "crashed", 2)
    options = {
        "redis.url": redis_url,
        "ick": "crashed",
        "shards": 2,
        "redis.retryTimeout": "30s",
    }  # no consumerId; leaseTimeout: the default 60 s
    checkpoint = str(tmp_path / "ckpt")
    before = source_runners()
    first = Sink()
    query = stream(spark, "ick", options, first, checkpoint)
    second = third = None
    try:
        ick.add({f"a{i}": float(i) for i in range(20)})
        wait_running(
            query,
            lambda: {f"a{i}" for i in range(20)} <= first.values(),
            60,
            "the first query's delivery",
        )
        runners = source_runners() - before
        assert len(runners) == 1, f"expected one reader process of the query, got {runners}"
        os.kill(runners.pop(), signal.SIGKILL)  # the reader dies: no stop(), lease held
        failure_of(query, 60)  # Spark fails the query: its reader process is gone
        ick.add({f"b{i}": float(i) for i in range(20)})
        sink = Sink()
        restarted = time.monotonic()
        second = stream(spark, "ick", options, sink, checkpoint)
        wait_running(
            second,
            lambda: {f"b{i}" for i in range(20)} <= sink.values(),
            15,
            "the restarted query's first delivery (15 s, the lease lasts 60 s)",
        )
        resumed = time.monotonic() - restarted
        started = time.monotonic()
        third = stream(spark, "ick", options, Sink(), str(tmp_path / "other"))
        error = failure_of(third, 15)  # refused at once: within 15 s, not after the lease
        refused = time.monotonic() - started
        assert "Ick 'crashed' shard" in error and "lease" in error, error
        ick.add({"c": 1.0})
        wait_running(second, lambda: "c" in sink.values(), 30, "delivery after the refusal")
    finally:
        stop_all(query, second, third)
    check_deliveries(sink)
    print(f"resumed in {resumed:.1f} s; a second live query refused in {refused:.1f} s")


# --- the harness itself -----------------------------------------------------------------


def test_a_durable_server_keeps_acknowledged_writes_across_kill_and_restart(durable):
    with durable.client() as c:
        c.set("kept", "yes")
    port = durable.port
    kill(durable)
    assert not durable.alive
    restart(durable)
    assert durable.port == port
    with durable.client() as c:
        assert c.get("kept") == b"yes"


def test_migrate_slot_moves_every_key_in_steps(migration_cluster):
    cluster = migration_cluster
    keys = [f"{{harness}}:{i}" for i in range(25)]
    with cluster_client(cluster) as c:
        c.mset(dict.fromkeys(keys, "v"))
    slot = key_slot(keys[0])
    source = owner(cluster, slot)
    target = next(n for n in primaries(cluster) if n is not source)
    seen: list[tuple[int, int]] = []
    moved = migrate_slot(
        cluster,
        slot,
        target,
        keys_per_step=10,
        between=lambda m: seen.append((m.moved, m.keys_left())),
    )
    assert moved == 25 and seen == [(0, 25), (10, 15), (20, 5), (25, 0)]
    assert owner(cluster, slot) is target
    with cluster_client(cluster) as c:
        assert c.mget(keys) == [b"v"] * 25
