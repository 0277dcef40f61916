"""A read of a reservation or claim that reaches a stale primary (issue 46), with real
servers: a primary A, its replica B and a sentinel. B is made the primary and the sentinel
told so, while A runs on as a master that nobody will demote: the "paused, replaced,
resumed" primary of a Sentinel failover, held still. A reader whose pool kept a connection
to A must read the manifests a reserve made on B there, never hand over an empty batch
that the commit on B would then close (acknowledged adds lost).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_ick import Dehydrator, Ick, IckConnectionError, connect, replication
from pyspark_ick.keys import IckKeys
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import (
    RedisServer,
    SentinelSet,
    free_port,
    start_sentinels,
    wait_until,
)

TTL = 30_000
ITEMS = 25


def ick_log(client: Any, fill: bool) -> ReservationLog:
    """Ick "q" (one shard), with ITEMS members when ``fill``."""
    if fill:
        Ick(client, "q").add({f"m{i:03}": float(i) for i in range(ITEMS)})
    return ReservationLog(client, "q")


def claim_log(client: Any, fill: bool) -> Any:
    """Dehydrator "d" (one shard), with ITEMS elements due now when ``fill``."""
    if fill:
        ids = [f"e{i:03}" for i in range(ITEMS)]
        Dehydrator(client, "d").park(ids, [f"x{i}" for i in ids], [0] * ITEMS)
    return Dehydrator(client, "d").claim_log(0)


LOGS = {"reservations": ick_log, "claims": claim_log}
WIDTH = {"reservations": 2, "claims": 3}  # values an item in a manifest


@pytest.fixture
def pair() -> Iterator[SentinelSet]:
    """A primary, one replica, one sentinel (this test's only)."""
    found = start_sentinels(1, 1, service="stale")
    yield found
    found.stop()


def replace_primary(sentinels: SentinelSet) -> tuple[RedisServer, RedisServer]:
    """Promote the replica and point the sentinel at it, leaving the old primary a master
    that the sentinel no longer knows (so never demotes): (old, new)."""
    old, new = sentinels.primary(), sentinels.replicas()[0]
    with old.client() as c:
        # the replicas have every write so far; one that was just turned over to another
        # primary may still be counted while the old one has not noticed (2 under load)
        assert c.wait(1, 5000) >= 1
    with new.client() as c:
        c.replicaof("NO", "ONE")
    for sentinel in sentinels.sentinels:
        with sentinel.client() as c:
            c.sentinel_remove(sentinels.service)
            c.sentinel_monitor(sentinels.service, new.host, new.port, 1)
    wait_until(lambda: sentinels.primary_port() == new.port, timeout=10, what="the new primary")
    return old, new


@pytest.mark.parametrize("replicas", [0, 1])
@pytest.mark.parametrize("kind", LOGS)
def test_a_reader_connected_to_a_replaced_primary_reads_the_new_ones_manifests(
    pair, kind, replicas, caplog
):
    reader = connect(pair.url, wait_replicas=replicas, retry_timeout=10)
    log = LOGS[kind](reader, fill=True)
    assert log.counters() == (0, 0)  # the reader's pool holds a connection to the primary
    old, new = replace_primary(pair)

    driver = connect(pair.url)  # a new client: it asks the sentinel, and reaches the new one
    written = LOGS[kind](driver, fill=False)
    fence = written.lease.acquire("driver", TTL)
    head = written.reserve(None, 0, fence).head
    assert head >= 1
    with old.client() as c:
        assert c.hget(written.log_key, written.head_field) is None  # the stale node lacks it

    manifests = log.read_numbered(0, head, "run-1")
    assert sum(len(m.items) for m in manifests) == WIDTH[kind] * ITEMS
    assert [m.number for m in manifests] == list(range(1, head + 1))
    with new.client() as c:
        assert c.hget(written.log_key, "dlv:1") == b"1 run-1"  # counted where it lives
    assert "reading again on the primary named now (it moved)" in caplog.text
    assert "was lost" not in caplog.text


def test_a_number_missing_on_the_primary_fails_the_read_when_replicas_confirm(redis_url):
    """With redis.waitReplicas a reserve that returned is on a replica: a number past the
    head is never read as an empty batch. The read asks again for redis.retryTimeout, then
    fails naming the numbers (Spark runs the batch again)."""
    reader = connect(redis_url, wait_replicas=1, retry_timeout=1)
    log = ReservationLog(reader, "q")
    started = time.monotonic()
    with pytest.raises(IckConnectionError, match=r"number\(s\) 1, 2 of 1..2 are missing"):
        log.read_numbered(0, 2, "run-1")
    assert 1 <= time.monotonic() - started < 5


def test_without_replicas_a_number_lost_by_the_primary_reads_as_lost(client, caplog):
    """Without redis.waitReplicas a failover may lose a reserve: its items are back in the
    queue, and the read leaves it out, saying so (as before)."""
    log = ReservationLog(client, "q")
    assert log.read_numbered(0, 1, "run-1") == []
    assert "number 1 was lost with writes Redis did not keep" in caplog.text


# --- a write whose primary turned into a replica (issue 40 item 1) -----------------------


def demote(sentinels: SentinelSet) -> tuple[RedisServer, RedisServer]:
    """``replace_primary``, then make the old primary a replica of the new one: what a
    primary paused past the down-after time meets once it runs again. (old, new)"""
    old, new = replace_primary(sentinels)
    with old.client() as c:
        c.replicaof(new.host, new.port)
    return old, new


def test_a_wait_refused_by_a_demoted_primary_runs_the_write_again_on_the_new_one(pair):
    """The write ran on the primary, which is a replica by the time WAIT comes ("WAIT
    cannot be used with replica instances"): a failover, not a lost connection. The
    replay-safe write runs again on the primary the sentinel names, and WAITs there."""
    client = connect(pair.url, wait_replicas=1, retry_timeout=20)
    Ick(client, "q").add({"before": 1.0})  # the write's pinned connection, kept
    ran_on: list[int] = []
    nodes: list[RedisServer] = []

    def calls(c: Any) -> int:
        added = int(c.zadd("z", {"m": 1.0}))
        ran_on.append(int(c.connection.port))  # where it ran (opened again through Sentinel)
        if len(ran_on) == 1:
            nodes.extend(demote(pair))
        return added

    replication.write(client, calls, what="the test's write")
    old, new = nodes
    assert ran_on == [old.port, new.port]
    with new.client() as c:
        assert c.zscore("z", "m") == 1.0
    Ick(client, "q").add({"after": 2.0})  # the next write reaches the new primary too
    with new.client() as c:
        assert Ick(c, "q").stats()["pset_size"] == 2


@pytest.fixture
def trio() -> Iterator[SentinelSet]:
    """A primary, three replicas, one sentinel (this test's only)."""
    found = start_sentinels(3, 1, service="split")
    yield found
    found.stop()


def test_a_write_a_replaced_primarys_replica_confirmed_runs_again_on_the_new_one(trio):
    """A primary paused past its failover continues before Sentinel turns it and its other
    replica over to the promoted one: it is still a master, that replica still follows it,
    so WAIT 1 there counts 1, and both drop the write once turned over (issue 40's
    Sentinel storm lost 2 acknowledged adds so). A confirmed write counts only while the
    sentinels name its node: this one runs again on the new primary."""
    client = connect(trio.url, wait_replicas=1, retry_timeout=20)
    Ick(client, "q").add({"before": 1.0})  # the write's pinned connection, kept
    old = trio.primary()
    new, stays, follows = trio.replicas()
    with follows.client() as c:
        c.replicaof(new.host, new.port)  # the one Sentinel turned over already
    replace_primary(trio)  # ``new`` promoted; ``stays`` still follows ``old``
    with new.client() as c:  # the promoted primary has its replica
        wait_until(lambda: c.wait(1, 100) == 1, timeout=10, what="a replica of the new")

    Ick(client, "q").add({"m": 2.0})
    with new.client() as c:
        assert c.zscore(IckKeys("q").pset, "m") == 2.0  # where it survives
    for node in (old, stays):  # it ran there first, and that replica confirmed it
        with node.client() as c:
            assert c.zscore(IckKeys("q").pset, "m") == 2.0


def test_a_write_that_cannot_run_again_says_so_after_a_failover(pair):
    """A write that is not replay-safe (a push) whose node turned replica before WAIT is
    not run again, and its error says so and what to do, not that writing again is safe."""
    client = connect(pair.url, wait_replicas=1, retry_timeout=20)
    Ick(client, "q").add({"before": 1.0})  # the write's pinned connection, kept
    runs: list[int] = []

    def calls(c: Any) -> None:
        c.zadd("z", {"m": 1.0})
        runs.append(1)
        demote(pair)

    with pytest.raises(IckConnectionError, match="a failover happened") as failed:
        replication.write(client, calls, what="the test's push", replay_safe=False)
    assert runs == [1]
    assert "it was not run again" in str(failed.value)
    assert "see whether it is there" in str(failed.value)
    assert "writing it again is safe" not in str(failed.value)


def test_a_write_refused_as_a_replica_until_the_deadline_says_a_failover_happened(pair):
    """Through a plain URL nobody names a new primary: the write fails when
    redis.retryTimeout is up, saying a failover happened and what WAIT counted."""
    old = pair.primary()
    client = connect(f"redis://{old.host}:{old.port}/0", wait_replicas=1, retry_timeout=2)
    ran = 0

    def calls(c: Any) -> int:
        nonlocal ran
        ran += 1
        added = int(c.zadd("z", {"m": 1.0}))
        if ran == 1:
            demote(pair)
        return added

    started = time.monotonic()
    with pytest.raises(IckConnectionError, match="a failover happened") as failed:
        replication.write(client, calls, what="the test's write")
    took = time.monotonic() - started
    assert "is a replica now" in str(failed.value) and "connection" not in str(failed.value)
    assert 2 <= took < 8, took
    assert ran > 1  # it ran again (each time refused: READONLY), until the deadline


def test_a_wait_blocked_when_its_primary_turns_into_a_replica_is_a_failover(pair):
    """WAIT blocks (the replica is stopped) and the primary turns into a replica: Redis
    unblocks it ("UNBLOCKED ... master -> replica?"), as the cluster storm of
    docs/records/failover-storms.md met it. A failover: the write runs again until
    redis.retryTimeout, then says so."""
    old, replica = pair.primary(), pair.replicas()[0]
    assert replica.process is not None
    client = connect(f"redis://{old.host}:{old.port}/0", wait_replicas=1, retry_timeout=2)

    def demote_soon() -> None:
        with old.client() as c:
            wait_until(lambda: blocked(c) == 1, timeout=10, what="a client in WAIT")
            c.replicaof(old.host, free_port())

    def calls(c: Any) -> int:
        if not demoting.is_alive() and demoting.ident is None:
            os.kill(replica.process.pid, signal.SIGSTOP)  # WAIT 1 blocks
            demoting.start()
        return int(c.zadd("z", {"m": 1.0}))

    demoting = threading.Thread(target=demote_soon)
    try:
        with pytest.raises(IckConnectionError, match="a failover happened") as failed:
            replication.write(client, calls, what="the test's write")
    finally:
        os.kill(replica.process.pid, signal.SIGCONT)
        demoting.join(10)
    assert "UNBLOCKED" in str(failed.value) or "replica" in str(failed.value)


def blocked(c: Any) -> int:
    """Clients blocked (in WAIT) on the server of ``c``."""
    return int(c.info("clients")["blocked_clients"])
