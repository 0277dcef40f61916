"""Redis Sentinel (issue 25), with real processes: a primary, 2 replicas and 3 sentinels
(``redis-server --sentinel``) from pyspark_ick.testing.start_sentinels.

- the URL form (``redis+sentinel://``, ``rediss+sentinel://``), its redaction and errors;
- connect(), the CLI and every Spark format through one sentinel URL (batch write and
  snapshot read, the dehydrator sink and source);
- the first sentinel of the URL down at start, sentinel auth, an unknown service, no
  sentinel reachable, a wrong sentinel password: each says what to fix;
- a stream query and a producer riding out kill -9 of the primary and SENTINEL FAILOVER;
- redis.waitReplicas: a write returns once replicas have it, or fails naming the option;
  kill -9 of a primary whose replicas lag loses acknowledged adds without it (the control)
  and none with it; a stream reader with it delivers no batch whose reservation only the
  primary has, so a batch replayed after the failover holds what it held (I3).
"""

from __future__ import annotations

import pickle
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from faults_support import (
    Loop,
    Producer,
    check_deliveries,
    check_i1,
    drained,
    wait_running,
)
from redis_faults import (
    failover,
    kill,
    kill_primary,
    replicas_behind,
    wait_promoted,
    wait_replicated,
)
from support import Sink, cli_command, failure_of, stop_all, stream

from pyspark_ick import (
    Dehydrator,
    IckConfigError,
    IckConnectionError,
    ReplicationError,
    ShardedIck,
    connect,
)
from pyspark_ick.connection import ConnectionSpec
from pyspark_ick.keys import IckKeys
from pyspark_ick.testing import RedisServer, SentinelSet, free_port, start_sentinels, wait_until
from pyspark_ick.urls import check_url, parse_sentinel, redact, secrets, where

pytestmark = pytest.mark.slow  # Sentinel sets and their failovers

SECRET, SENTINEL_SECRET = "primary-secret-1", "sentinel-secret-2"
RETRY = {"redis.retryTimeout": "30s", "leaseTimeout": "10s"}


# --- the URL, without servers ------------------------------------------------------------


def test_the_url_form_parses_redacts_and_names_every_sentinel():
    url = (
        f"rediss+sentinel://app:{SECRET}@s1,s2:26380,s3:1/orders/2?ssl_ca_certs=/ca.pem"
        f"&sentinel_username=watch&sentinel_password={SENTINEL_SECRET}"
    )
    assert check_url(url) == url
    target = parse_sentinel(url)
    assert target.sentinels == (("s1", 26379), ("s2", 26380), ("s3", 1))
    assert (target.service, target.tls) == ("orders", True)
    assert (target.sentinel_username, target.sentinel_password) == ("watch", SENTINEL_SECRET)
    assert target.primary_url == f"rediss://app:{SECRET}@localhost/2?ssl_ca_certs=%2Fca.pem"
    assert where(url) == "rediss+sentinel://s1:26379,s2:26380,s3:1/orders/2"
    assert (
        where(url.replace("/orders/2", "/orders"))
        == "rediss+sentinel://s1:26379,s2:26380,s3:1/orders"
    )
    shown = redact(url)
    assert SECRET not in shown and SENTINEL_SECRET not in shown
    assert "app:***@" in shown and "sentinel_password=***" in shown
    assert set(secrets(url)) == {SECRET, SENTINEL_SECRET}
    spec = ConnectionSpec(url=url)
    assert SECRET not in repr(spec) and pickle.loads(pickle.dumps(spec)) == spec


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://s1,s2/", "the path must be the service name"),
        ("redis+sentinel:///orders", "no sentinel host"),
        ("redis+sentinel://s1:port/orders", "sentinel port 'port' is not a number"),
        ("redis+sentinel://s1/orders/zero", "db 'zero' is not a number"),
    ],
)
def test_a_malformed_sentinel_url_says_what_is_wrong(url, says):
    with pytest.raises(IckConfigError, match=says) as info:
        connect(url + f"?sentinel_password={SENTINEL_SECRET}")
    assert "redis+sentinel://[user:password@]host1[:port1]" in str(info.value)
    assert SENTINEL_SECRET not in str(info.value)


# --- a healthy set: connect, CLI, Spark --------------------------------------------------


@pytest.fixture(scope="module")
def sentinels() -> Iterator[SentinelSet]:
    """One Sentinel set for the tests that fail nothing over."""
    found = start_sentinels(2, 3, service="calm")
    yield found
    found.stop()


@pytest.fixture
def calm(sentinels: SentinelSet) -> SentinelSet:
    with sentinels.primary().client() as c:
        c.flushall()
    return sentinels


def test_connect_reaches_the_primary_through_the_sentinels(calm):
    client = connect(calm.sentinel_url(db=3))
    ShardedIck(client, "q", 2).add({"a": 1.0, "b": 2.0})
    with calm.primary().client(db=3) as c, calm.primary().client(db=0) as zero:
        assert c.keys("q*") and not zero.keys("q*")  # db 3 of the URL
    with pytest.raises(IckConfigError, match="not a Redis Cluster"):
        connect(calm.url, cluster="true")


def test_the_first_sentinel_of_the_url_down_at_start(calm):
    down = f"127.0.0.1:{free_port()}"
    url = calm.url.replace("redis+sentinel://", f"redis+sentinel://{down},")
    started = time.monotonic()
    client = connect(url, retry_timeout=5)
    assert client.ping() and time.monotonic() - started < 3


def test_an_unknown_service_names_it_and_the_sentinels_asked(calm):
    url = calm.url.replace("/calm/", "/clam/")
    started = time.monotonic()
    with pytest.raises(IckConfigError) as info:
        connect(url, retry_timeout=30)
    assert time.monotonic() - started < 5  # not retried for redis.retryTimeout
    message = str(info.value)
    assert "know no service 'clam'" in message and "monitors 'calm'" in message
    assert all(f"127.0.0.1:{s.port}" in message for s in calm.sentinels)


def test_no_sentinel_reachable_names_them_all():
    ports = [free_port() for _ in range(3)]
    url = "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in ports) + "/calm"
    with pytest.raises(IckConnectionError, match="no sentinel answered") as info:
        connect(url + f"?sentinel_password={SENTINEL_SECRET}", retry_timeout=1)
    assert all(f"127.0.0.1:{p}" in str(info.value) for p in ports)
    assert SENTINEL_SECRET not in str(info.value)


def test_the_cli_stats_through_a_sentinel_url(calm):
    ShardedIck(connect(calm.url), "cli_q", 1).add({"a": 1.0, "b": 2.0})
    done = subprocess.run(
        cli_command("stats", "cli_q", "--json", url=calm.url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '"queued": 2' in done.stdout


def test_batch_write_snapshot_read_and_the_dehydrator_through_sentinel(spark, calm, tmp_path):
    url = calm.url
    df = spark.createDataFrame(
        [(f"m{i}", float(i)) for i in range(50)], "member string, score double"
    )
    df.write.format("ick").option("redis.url", url).option("ick", "batch").option("shards", 2).mode(
        "append"
    ).save()
    read = (
        spark.read.format("ick")
        .option("redis.url", url)
        .option("ick", "batch")
        .option("shards", 2)
        .load()
    )
    assert sorted(r.member for r in read.collect()) == sorted(f"m{i}" for i in range(50))

    parked = spark.createDataFrame([(f"e{i}",) for i in range(20)], "element string")
    parked.write.format("dehydrator").option("redis.url", url).option("dehydrator", "later").option(
        "delay", "0ms"
    ).mode("append").save()
    assert Dehydrator(connect(url), "later").size() == 20
    sink = Sink()
    query = stream(
        spark,
        "dehydrator",
        {"redis.url": url, "dehydrator": "later", **RETRY},
        sink,
        str(tmp_path / "ckpt"),
    )
    try:
        wait_running(query, lambda: len(sink.values(1)) == 20, 60, "20 released elements")
    finally:
        query.stop()
    assert sink.values(1) == {f"e{i}" for i in range(20)}


# --- auth --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded() -> Iterator[SentinelSet]:
    """A set whose data nodes and sentinels have passwords (1 replica, 1 sentinel)."""
    found = start_sentinels(
        1, 1, service="guarded", password=SECRET, sentinel_password=SENTINEL_SECRET
    )
    yield found
    found.stop()


def test_sentinel_auth(guarded):
    client = connect(guarded.url)
    assert client.ping()
    for url, whose in [
        (guarded.sentinel_url(sentinel_password="wrong-one"), "sentinel username or password"),
        (
            guarded.url.replace(f"?sentinel_password={SENTINEL_SECRET}", ""),
            "sentinel username or password",
        ),
        (guarded.sentinel_url(password="wrong-two"), "primary of service 'guarded'"),
    ]:
        started = time.monotonic()
        with pytest.raises(IckConnectionError, match=whose) as info:
            connect(url, retry_timeout=30)
        assert time.monotonic() - started < 5, url  # not retried
        for secret in (SECRET, SENTINEL_SECRET, "wrong-one", "wrong-two"):
            assert secret not in str(info.value)
    done = subprocess.run(
        cli_command("stats", "x", url=guarded.sentinel_url(sentinel_password="wrong-one")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "sentinel_password" in done.stderr
    assert "wrong-one" not in done.stderr and SECRET not in done.stderr


# --- failovers mid-stream ----------------------------------------------------------------


@pytest.fixture
def doomed() -> Iterator[SentinelSet]:
    """A Sentinel set of this test only (its primary is killed or failed over)."""
    found = start_sentinels(2, 3, service="doomed")
    yield found
    found.stop()


def stream_of(
    spark: Any, url: str, ick: str, shards: int, checkpoint: str, **more: Any
) -> tuple[Any, Sink]:
    """A stream query of ``ick`` (40 members a batch at most, this suite's retry and lease
    settings, ``more`` options) into a new Sink: (query, sink)."""
    sink = Sink()
    options = {"redis.url": url, "ick": ick, "shards": shards, "maxMembersPerTrigger": 40}
    return stream(spark, "ick", {**options, **RETRY, **more}, sink, checkpoint), sink


@pytest.mark.parametrize("how", ["kill -9", "SENTINEL FAILOVER"])
def test_a_stream_query_rides_out_a_sentinel_failover(spark, doomed, tmp_path, how):
    ick, shards, url = "failover", 2, doomed.url
    producer = Producer(connect(url, timeout=2, retry_timeout=0), ick, shards)
    query, sink = stream_of(spark, url, ick, shards, str(tmp_path / "ckpt"))
    try:
        producer.start()
        wait_running(query, lambda: len(sink.snapshot()) >= 3, 60, "three batches")
        producer.stop()  # the replicas catch up, then the primary goes
        wait_replicated(doomed)
        started = time.monotonic()
        promoted = kill_primary(doomed) if how == "kill -9" else failover(doomed)
        failed_over = time.monotonic() - started
        after = Producer(producer.client, ick, shards)
        after.start()
        back = time.monotonic()
        wait_running(
            query,
            lambda: after.acked_since(back) >= 60 and sink.batches_since(back) >= 3,
            60,
            "adds and batches after failover",
        )
        after.stop()
        wait_running(query, lambda: drained(connect(url), ick, shards), 60, "the drain")
        assert query.exception() is None
    finally:
        stop_all(producer, query)
    check_deliveries(sink)
    delivered = check_i1(producer.adds + after.adds, sink, ick)
    print(
        f"{how}: promoted {promoted.port} in {failed_over:.1f} s, first batch "
        f"{sink.first_since(back):.1f} s later; {delivered} adds delivered, "
        f"{len(after.errors)} refused while failing over"
    )


# --- redis.waitReplicas ------------------------------------------------------------------


def test_wait_replicas_confirms_or_fails_naming_the_option(spark, calm):
    waited = connect(calm.url, wait_replicas=2, wait_timeout=2)
    assert ShardedIck(waited, "w", 2).add({"a": 1.0, "b": 2.0}) == (2, 0)
    assert Dehydrator(waited, "wd").park(["i"], ["e"], [0]) == (1, 0)
    too_many = connect(calm.url, wait_replicas=3, wait_timeout=0.2, retry_timeout=0.5)
    with pytest.raises(
        ReplicationError, match=r"only 2 of the 3 replica\(s\).*redis\.waitReplicas"
    ):
        ShardedIck(too_many, "w", 2).add({"c": 1.0})
    with pytest.raises(ReplicationError, match=r"redis\.waitTimeout"):
        Dehydrator(too_many, "wd").push("j", "e", 0)
    df = spark.createDataFrame([("m", 1.0)], "member string, score double")
    with pytest.raises(Exception, match=r"redis\.waitReplicas"):
        df.write.format("ick").option("redis.url", calm.url).option("ick", "w").option(
            "shards", 2
        ).option("redis.waitReplicas", 3).option("redis.waitTimeout", "200ms").option(
            "redis.retryTimeout", "500ms"
        ).mode("append").save()
    df.write.format("ick").option("redis.url", calm.url).option("ick", "w").option(
        "shards", 2
    ).option("redis.waitReplicas", 2).mode("append").save()
    # a batch read takes and ignores its format's write options (one SQL view for both)
    read = spark.read.format("ick").option("redis.url", calm.url).option("ick", "w")
    assert "m" in {row.member for row in read.option("redis.waitReplicas", 1).load().collect()}


class Adder(Loop):
    """Adds a new member (``u0``, ``u1``, ...) per tick through the connector's
    ShardedIck.add; ``acked`` maps each acknowledged member to its time.monotonic()."""

    def __init__(self, client: Any, ick: str, shards: int, period: float = 0.01) -> None:
        super().__init__(f"adder-{ick}", period)
        self.sharded = ShardedIck(client, ick, shards)
        self.acked: dict[str, float] = {}
        self._next = 0

    def tick(self) -> None:
        member = f"u{self._next}"
        self._next += 1
        self.sharded.add({member: time.time()})
        self.acked[member] = time.monotonic()

    def acked_since(self, moment: float) -> int:
        return sum(1 for at in list(self.acked.values()) if at > moment)


def kill_with_replicas_behind(
    sentinels: SentinelSet, adder: Adder, waiting: int = 0
) -> tuple[float, int]:
    """kill -9 of the primary while its replicas lag (replicas_behind), adds going on;
    returns (seconds to the promotion, adds acknowledged while the replicas lagged).
    ``waiting`` > 0: the kill comes once that many clients wait in WAIT for the replicas
    (a waiting adder, a waiting reader: each has a write only the primary has), else
    0.3 s into the lag."""
    with replicas_behind(sentinels) as primary:
        lagging = time.monotonic()
        if waiting:
            wait_until(lambda: blocked(primary) >= waiting, timeout=10, what=f"{waiting} in WAIT")
        else:
            time.sleep(0.3)  # adds the replicas will never see (unless the adder waited)
        kill(primary)
        killed = time.monotonic()
        during = adder.acked_since(lagging)
    wait_promoted(sentinels, primary)
    return time.monotonic() - killed, during


def blocked(server: RedisServer) -> int:
    """Clients of ``server`` blocked (in WAIT, here: nothing else blocks)."""
    with server.client(socket_timeout=2) as c:
        return int(c.info("clients")["blocked_clients"])


def test_without_wait_replicas_such_a_kill_loses_acknowledged_adds(doomed):
    """The control: the same fault as the next test loses acknowledged adds when the
    producer does not wait for replicas (so the next test can fail)."""
    adder = Adder(connect(doomed.url, timeout=2, retry_timeout=30), "lossy", 1)
    adder.start()
    try:
        wait_until(lambda: len(adder.acked) >= 20, timeout=30, what="20 adds")
        wait_replicated(doomed)
        _, during = kill_with_replicas_behind(doomed, adder)
        wait_until(lambda: len(adder.acked) >= during + 40, timeout=60, what="adds after")
    finally:
        adder.stop()
    with doomed.primary().client() as c:
        kept = {m.decode() for m in c.zrange("lossy/ick/{lossy}/pset", 0, -1)}
    lost = set(adder.acked) - kept
    assert during > 0 and lost, (during, len(adder.acked))
    print(
        f"without redis.waitReplicas: {len(lost)} of {during} adds acknowledged while the "
        "replicas lagged were lost"
    )


def test_wait_replicas_loses_no_acknowledged_add_when_the_primary_dies(spark, doomed, tmp_path):
    """The adder and the reader both wait for a replica. The primary is killed once both
    wait in WAIT behind the frozen replicas (a state, not a race with the trigger: this
    test once failed, "batch 4 was delivered empty", when the reader did not wait and a
    reservation Spark had logged died with the primary)."""
    ick, shards, url = "kept", 2, doomed.url
    adder = Adder(
        connect(url, timeout=2, retry_timeout=30, wait_replicas=1, wait_timeout=20), ick, shards
    )
    waits = {"redis.waitReplicas": 1, "redis.waitTimeout": "20s"}
    query, sink = stream_of(spark, url, ick, shards, str(tmp_path / "ckpt"), **waits)
    try:
        adder.start()
        wait_running(query, lambda: len(sink.snapshot()) >= 3, 60, "three batches")
        failed_over, during = kill_with_replicas_behind(doomed, adder, waiting=2)
        back = time.monotonic()
        wait_running(
            query,
            lambda: adder.acked_since(back) >= 40 and sink.batches_since(back) >= 3,
            60,
            "adds and batches after failover",
        )
        adder.stop()
        wait_running(query, lambda: set(adder.acked) <= sink.values(), 60, "every add")
        assert query.exception() is None
    finally:
        stop_all(adder, query)
    check_deliveries(sink)
    assert during == 0  # nothing was acknowledged that only the dead primary had
    print(
        f"redis.waitReplicas=1: promoted in {failed_over:.1f} s; all {len(adder.acked)} "
        f"acknowledged adds delivered, {len(adder.errors)} refused"
    )


class FailOnce(Sink):
    """A Sink that fails one batch, so that a restarted query replays it: the first batch
    holding a reservation past ``frozen`` (made while the replicas were frozen), or, once
    ``killed`` is set, the first batch at all."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen: int | None = None
        self.killed = False
        self.failed: int | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        super().__call__(df, batch_id)
        rows = self.snapshot()[-1].rows
        past = self.frozen is not None and any(r.reservation > self.frozen for r in rows)
        if self.failed is None and (past or self.killed):
            self.failed = batch_id
            raise RuntimeError(f"the sink fails batch {batch_id} on purpose")


READERS_WAIT = 1
"""The reader's redis.waitReplicas in the next test (0 shows it fail: an empty replay)."""


def test_a_batch_replayed_after_a_failover_holds_what_it_held(spark, doomed, tmp_path):
    """I3 across a failover: a batch that the sink fails, replayed by the restarted query
    after kill -9 of the primary, holds exactly the members it held. The reader waits for
    a replica, so no batch is delivered whose reservation only the primary has: the kill
    comes while the reader waits in WAIT for its frozen replicas, and the batch is
    reserved again on the promoted replica."""
    ick, url, members = "replayed", doomed.url, {f"m{i}": float(i) for i in range(400)}
    ShardedIck(connect(url, wait_replicas=2), ick, 1).add(members)
    options = {"redis.url": url, "ick": ick, "maxMembersPerTrigger": 40, **RETRY}
    options.update({"redis.waitReplicas": READERS_WAIT, "redis.waitTimeout": "20s"})
    sink, checkpoint, query = FailOnce(), str(tmp_path / "ckpt"), None
    try:
        query = stream(spark, "ick", options, sink, checkpoint)
        wait_running(query, lambda: len(sink.snapshot()) >= 2, 60, "two batches")
        with replicas_behind(doomed) as primary:
            with primary.client() as c:  # what the reader reserves from here on dies
                sink.frozen = int(c.hget(IckKeys(ick).rlog, "reserved") or 0)
            wait_until(
                lambda: not query.isActive or blocked(primary) >= 1,
                timeout=10,
                what="the reader waiting for its replicas, or a batch past them failed",
            )
            sink.killed = True
            kill(primary)
        wait_promoted(doomed, primary)
        assert "on purpose" in failure_of(query, 120)
        query = stream(spark, "ick", options, sink, checkpoint, trigger=None)  # the replay
        assert query.awaitTermination(120) and query.exception() is None
    finally:
        stop_all(query)
    replays = check_deliveries(sink)  # no empty batch, each replay as first delivered
    assert replays >= 1 and sink.failed is not None
    assert {r.member for r in sink.rows()} == set(members)
