"""Hand-offs to a Ruby consumer (issue 45): a Spark stream hands members back, stops, and a
consumer calling the redis-ick gem's scripts as the gem does (ickadd, and ickexchange with
the gem's three keys: ickreserve, ickcommit) takes over with ``pyspark-ick retry-due`` on a
schedule. Every member is delivered once it is due, a retry of a member the gem delivered
meanwhile is dropped, ``stats`` counts retries and dead letters, and ``del`` leaves no key.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from typing import Any

import pytest
from support import cli_command
from test_cli import cli

from pyspark_ick import Ick, ShardedIck, scripts
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.keys import IckKeys
from pyspark_ick.lease import Lease
from pyspark_ick.retries import RetryPolicy, release_due
from pyspark_ick.spark import retry_later
from pyspark_ick.testing import wait_until

SOON = RetryPolicy(backoff_ms=1, backoff_max_ms=1)  # due within a millisecond
LATER = RetryPolicy(backoff_ms=600_000, backoff_max_ms=600_000)  # due in 5 to 10 minutes


def gem_reserve(client: Any, master: str, n: int = 100) -> list[str]:
    """The gem's ickreserve: ickexchange with its three keys (no retries known)."""
    reply = scripts.run(client, "ickexchange", list(IckKeys(master).base), [n, "0"])
    return [m.decode() for m in reply[1][::2]]


def gem_commit(client: Any, master: str, members: list[str]) -> None:
    """The gem's ickcommit."""
    scripts.run(client, "ickexchange", list(IckKeys(master).base), [0, "0", *members])


def failed_once(client: Any, name: str, members: dict[str, float], policy: RetryPolicy) -> Ick:
    """Ick ``name`` whose ``members`` were reserved and failed once by Python (Ick.fail)."""
    ick = Ick(client, name)
    ick.add(members)
    ick.reserve(len(members))
    assert sum(ick.fail(dict.fromkeys(members, "boom"), policy)) == len(members)
    return ick


def test_a_gem_consumer_gets_due_retries_only_through_retry_due(client):
    failed_once(client, "h", {"a": 1.0, "b": 2.0}, SOON)
    Ick(client, "h").add({"c": 3.0})
    wait_until(lambda: client.zcount(IckKeys("h").retry, 0, "+inf") == 2, what="retries")
    assert gem_reserve(client, "h") == ["c"]  # the gem's scripts never release retries
    done = release_due(client, [IckKeys("h")], "Ick 'h'")
    assert (done.released, done.dropped) == (2, 0)
    assert gem_reserve(client, "h") == ["a", "b", "c"]
    assert client.exists(IckKeys("h").retry) == 0


def test_a_retry_of_a_member_the_gem_delivers_meanwhile_is_dropped(client):
    ick = failed_once(client, "h", {"x": 1.0, "y": 2.0}, SOON)
    ick.add({"x": 5.0, "y": 6.0})  # a gem producer re-adds both
    assert gem_reserve(client, "h", 1) == ["x"]  # the gem reserves x; y stays queued
    # retry-due finds x reserved and y queued: neither retry is needed any more
    done = release_due(client, [IckKeys("h")], "Ick 'h'", now_ms=0)  # nothing due yet
    assert (done.released, done.dropped) == (0, 2)
    gem_commit(client, "h", ["x"])
    assert gem_reserve(client, "h") == ["y"]
    gem_commit(client, "h", ["y"])
    assert release_due(client, [IckKeys("h")], "Ick 'h'").released == 0
    assert gem_reserve(client, "h") == []  # each delivered once
    # the attempt records stay, as Python's reserve leaves them: a failure counts on
    assert client.hlen(IckKeys("h").attempts) == 2


def test_one_run_of_retry_due_drops_every_retry_of_a_member_queued_or_reserved(client):
    """One rule, due or not: a member queued or reserved (re-added by a gem producer) loses
    its retry on the first run; a due retry of a member that is neither moves into the
    queue; a pending one of such a member waits."""
    failed_once(client, "h", {"p": 1.0, "w": 2.0}, LATER)  # pending retries
    ick = failed_once(client, "h", {"d": 3.0, "r": 4.0, "s": 5.0}, SOON)  # due soon
    ick.add({"r": 10.0, "p": 11.0, "d": 12.0})  # a gem producer re-adds p, d and r
    assert gem_reserve(client, "h", 1) == ["r"]  # and the gem reserves r
    now_ms = lambda: int(client.time()[0]) * 1000  # noqa: E731
    wait_until(lambda: client.zcount(IckKeys("h").retry, 0, now_ms() - 5) == 3, what="due")
    done = release_due(client, [IckKeys("h")], "Ick 'h'")
    assert client.zrange(IckKeys("h").retry, 0, -1) == [b"w"]  # p's went too, not due
    assert (done.released, done.dropped) == (3, 1)  # due: d, r, s; pending dropped: p
    queued = dict(client.zrange(IckKeys("h").pset, 0, -1, withscores=True))
    assert queued == {b"p": 11.0, b"d": 3.0, b"s": 5.0}  # d folded to its failed score
    assert client.zrange(IckKeys("h").cset, 0, -1) == [b"r"]  # r's retry dropped, r held


def test_python_reserve_drops_a_due_retry_of_a_member_the_gem_holds(client):
    failed_once(client, "h", {"m": 1.0}, SOON)
    Ick(client, "h").add({"m": 4.0})
    assert gem_reserve(client, "h") == ["m"]  # the gem delivers m while its retry waits
    wait_until(lambda: client.zcount(IckKeys("h").retry, 0, "+inf"), what="m's retry")
    wait_until(
        lambda: client.zcount(IckKeys("h").retry, 0, int(client.time()[0]) * 1000 - 5),
        what="m's retry due",
    )
    assert Ick(client, "h").reserve(5) == [("m", 4.0)]  # Python's reserve: the gem's batch
    assert client.exists(IckKeys("h").retry) == 0  # m's retry is gone, not queued
    gem_commit(client, "h", ["m"])
    assert Ick(client, "h").reserve(5) == []


def test_what_no_run_of_retry_due_saw_is_delivered_again(client):
    """The documented limit: a member the gem adds, reserves and commits between two runs
    leaves no trace, so its retry delivers it once more (at least once, as a re-add)."""
    failed_once(client, "h", {"m": 1.0}, SOON)
    Ick(client, "h").add({"m": 4.0})
    assert gem_reserve(client, "h") == ["m"]
    gem_commit(client, "h", ["m"])
    wait_until(lambda: release_due(client, [IckKeys("h")], "Ick 'h'").released, what="m due")
    assert gem_reserve(client, "h") == ["m"]


def test_stats_counts_retries_and_dead_letters(redis_url, client):
    failed_once(client, "h", {"r1": 1.0, "r2": 2.0}, LATER)
    failed_once(client, "h", {"d": 3.0}, RetryPolicy(max_attempts=1))
    Ick(client, "h").add({"q": 4.0})
    done = cli("stats", "h", "--json", url=redis_url)
    totals = json.loads(done.stdout)["totals"]
    assert (totals["queued"], totals["reserved"], totals["retrying"], totals["dead"]) == (
        1,
        0,
        2,
        1,
    )
    table = cli("stats", "h", url=redis_url).stdout
    assert "retrying" in table and "dead" in table, table


def test_del_leaves_no_key_after_a_full_workout(redis_url, client):
    sharded = ShardedIck(client, "w", 2)
    sharded.add({f"m{i}": float(i) for i in range(20)})
    for i in range(2):
        shard = sharded.shard(i)
        got = [m for m, _ in shard.reserve(10)]
        shard.fail({got[0]: "later"}, LATER)
        shard.fail({got[1]: "dead"}, RetryPolicy(max_attempts=1))
        shard.commit(*got[2:4])
        lease = Lease(client, shard.keys.lease, f"Ick 'w' shard {i}")
        lease.release(lease.acquire("worker", 60_000))
    assert DeadLetters(sharded).count() == [1, 1]
    assert client.dbsize() > 0
    done = cli("del", "w", "--yes", url=redis_url)
    assert done.returncode == 0, done.stderr
    assert list(client.scan_iter()) == []


@pytest.mark.slow  # 12 s at rest: a stream query, then retry-due and a gem consumer
def test_a_stream_hands_back_then_a_gem_consumer_drains_with_retry_due(
    spark, redis_url, client, tmp_path
):
    """The issue's run: 60 members in 2 shards; the sink hands 10 back and stops; a gem
    producer adds 5 more and re-adds one that waits for its retry; a gem consumer with
    `retry-due --every 0.5` delivers each of the 15 once; `del` leaves an empty Redis."""
    members = {f"m{i}": float(i) for i in range(60)}
    ShardedIck(client, "handoff", 2).add(members)
    options = {
        "redis.url": redis_url,
        "ick": "handoff",
        "shards": "2",
        "retryBackoff": "10s",
        "retryBackoffMax": "10s",
    }
    handed_back = {f"m{i}" for i in range(0, 60, 6)}
    processed: list[str] = []

    def sink(batch: Any, batch_id: int) -> None:
        rows = batch.collect()
        retry_later([(r, "index down") for r in rows if r["member"] in handed_back], options)
        processed.extend(r["member"] for r in rows if r["member"] not in handed_back)

    query = (
        spark.readStream.format("ick")
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    letters = DeadLetters(ShardedIck(client, "handoff", 2))
    try:
        wait_until(
            lambda: (len(processed) == 50 and sum(letters.retrying()) == 10) or not query.isActive,
            timeout=120,
            what="50 processed, 10 handed back",
        )
    finally:
        query.stop()
    assert sorted(processed) == sorted(set(members) - handed_back)
    assert (
        json.loads(cli("stats", "handoff", "--json", url=redis_url).stdout)["totals"]["retrying"]
        == 10
    )

    Ick(client, "handoff:0").add({"new0": 1.0, "new1": 2.0})  # a gem producer: new members
    Ick(client, "handoff:1").add({"new2": 1.0, "new3": 2.0, "new4": 3.0})
    shard = ShardedIck(client, "handoff", 2).shard_of("m6")
    Ick(client, f"handoff:{shard}").add({"m6": 100.0})  # re-added while it waits
    schedule = subprocess.Popen(
        [*cli_command(url=redis_url), "retry-due", "handoff", "--every", "0.5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert schedule.stdout is not None
        first = schedule.stdout.readline()  # its first run drops m6's retry
        assert "1 pending retry dropped" in first, first
        delivered: Counter[str] = Counter()
        expected = handed_back | {f"new{i}" for i in range(5)}

        def consume() -> bool:
            for master in ("handoff:0", "handoff:1"):
                got = gem_reserve(client, master)
                delivered.update(got)
                gem_commit(client, master, got)
            return set(delivered) == expected and sum(letters.retrying()) == 0

        wait_until(consume, timeout=60, interval=0.1, what="every member delivered")
        assert consume() and all(n == 1 for n in delivered.values()), delivered
    finally:
        schedule.send_signal(signal.SIGINT)
        assert schedule.wait(timeout=30) == 0
    assert cli("del", "handoff", "--yes", url=redis_url).returncode == 0
    assert list(client.scan_iter()) == []
