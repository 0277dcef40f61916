"""The layout knows its version (issue 40): the first reader, writer or client of this
release records the layout it writes, a release meeting a newer one refuses (faked here by
recording a higher version), and a rollback lowers it only once nothing is left that the
older release would strand (the runbook's condition, checked by `pyspark-ick layout`).
Hand-backs that release 0.1 left behind (it commits without reading them) are cleared by
the next commit that leaves no reservation open, and by `release`."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from test_cli import as_json, cli, failed

from pyspark_ick import Dehydrator, Ick, LayoutError, ShardedIck
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.keys import layout_key
from pyspark_ick.layout import LAYOUT
from pyspark_ick.release import release
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.retries import RetryPolicy

NEWER = LAYOUT + 1


def refused(error: BaseException, label: str) -> None:
    said = str(error)
    for part in (
        label,
        f"layout version {NEWER}",
        f"knows layout {LAYOUT} at most",
        "Runbook: upgrading under a running pipeline",
        "--rollback-to",
    ):
        assert part in said, said


def test_the_first_use_records_the_layout_and_a_newer_one_is_refused(any_client):
    client = any_client
    docs = ShardedIck(client, "docs", 2)
    assert client.get(layout_key("docs")) is None
    docs.stats()  # a reading call records nothing
    assert client.get(layout_key("docs")) is None
    docs.add({"a": 1.0})
    Dehydrator(client, "parked", 2).push("x", "element", 60_000)
    assert client.get(layout_key("docs")) == client.get(layout_key("parked", "dehydrator"))
    assert client.get(layout_key("docs")) == str(LAYOUT).encode()

    client.set(layout_key("docs"), 1)  # release 0.1's (it records none): raised on first use
    ShardedIck(client, "docs", 2).add({"b": 2.0})
    assert client.get(layout_key("docs")) == str(LAYOUT).encode()

    client.set(layout_key("docs"), NEWER)
    client.set(layout_key("parked", "dehydrator"), NEWER)
    for call in (
        lambda: ShardedIck(client, "docs", 2).add({"c": 3.0}),
        lambda: ShardedIck(client, "docs", 2).stats(),
    ):
        with pytest.raises(LayoutError) as info:
            call()
        refused(info.value, "Ick 'docs'")
    with pytest.raises(LayoutError) as info:
        Dehydrator(client, "parked", 2).push("y", "element", 60_000)
    refused(info.value, "dehydrator 'parked'")
    assert "--dehydrator --rollback-to" in str(info.value)
    assert client.get(layout_key("docs")) == str(NEWER).encode()  # never lowered
    psets = [ShardedIck(client, "docs", 2).shard(i).keys.pset for i in range(2)]
    assert sum(client.zcard(p) for p in psets) == 2  # "c" was not added


def test_spark_readers_and_writers_refuse_a_newer_layout(spark, client, redis_url, tmp_path):
    ShardedIck(client, "docs", 2).add({"a": 1.0})
    client.set(layout_key("docs"), NEWER)
    options = {"redis.url": redis_url, "ick": "docs", "shards": "2"}
    with pytest.raises(Exception) as info:
        spark.createDataFrame([("b",)], "member string").write.format("ick").options(
            **options
        ).mode("append").save()
    refused(info.value, "Ick 'docs'")
    query = (
        spark.readStream.format("ick")
        .options(**options)
        .load()
        .writeStream.foreachBatch(lambda df, _: df.count())
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        with pytest.raises(Exception) as info:
            query.awaitTermination(120)
    finally:
        query.stop()
    refused(info.value, "Ick 'docs'")
    assert client.zcard(ShardedIck(client, "docs", 2).shard(0).keys.cset) == 0  # no reserve
    assert client.zcard(ShardedIck(client, "docs", 2).shard(1).keys.cset) == 0


def failed_then_committed_by_release_0_1(client: Any, name: str) -> ReservationLog:
    """A member handed back in reservation 1, then that reservation committed the way
    release 0.1 did (it knows no failed hash): the entry is left behind."""
    Ick(client, name).add({"m": 1.0, "n": 2.0})
    log = ReservationLog(client, name)
    fence = log.lease.acquire("me", 30_000)
    end = log.reserve(None, 0, fence).head
    assert log.fail(end, 1, {"m": "boom"})[0] == 1
    client.hset(log.keys.rlog, "committed", end)  # 0.1's commit: the log closed, ...
    client.hdel(log.keys.rlog, f"size:{end}")
    client.delete(log.keys.reservation(end))  # ... the manifest gone, ...
    client.zrem(log.keys.cset, "m", "n")  # ... the members done
    log.lease.release(fence)
    assert client.hlen(log.keys.failed) == 1
    return log


def test_hand_backs_release_0_1_committed_are_cleared_by_the_next_commit(client):
    log = failed_then_committed_by_release_0_1(client, "q")
    fence = log.lease.acquire("me", 30_000)
    Ick(client, "q").add({"later": 3.0})
    end = log.reserve(None, 1, fence).head
    list(log.read(1, end, "run-2"))  # its first delivery
    assert log.fail(end, 1, {"later": "again"})[0] == 1
    log.commit(end, fence)  # no reservation left open: nothing handed back is current
    assert client.exists(log.keys.failed) == 0
    assert log.fates["retried"] == 1  # the current hand-back still counted


def test_hand_backs_release_0_1_committed_are_cleared_by_release(client):
    log = failed_then_committed_by_release_0_1(client, "q")
    ShardedIck(client, "q").stats()  # records the shard count, as a 0.1 reader had
    ShardedIck(client, "q").check_shards()
    release(client, "q")
    assert client.exists(log.keys.failed) == 0


def test_the_cli_checks_the_rollback_condition_and_rolls_back(client, redis_url):
    docs = ShardedIck(client, "docs", 2)
    docs.add({f"m{i}": float(i) for i in range(6)})
    Dehydrator(client, "parked").push("x", "element", 60_000)
    report = as_json(cli("layout", "docs", "--json", url=redis_url))
    assert report["layout"] == LAYOUT and report["rollback_to"] == LAYOUT - 1
    assert report["rollback_blocked_by"] == []

    # what 0.1 would strand: a retry waiting, a dead letter (a hand-back in an open
    # reservation strands nothing: 0.1 replays that batch)
    log = ReservationLog(client, "docs:0")
    fence = log.lease.acquire("me", 30_000)
    end = log.reserve(None, 0, fence).head
    members = [m for manifest in log.read(0, end, "t") for m in manifest.items[0::2]]
    log.fail(end, 1, {members[0]: "boom"})
    log.lease.release(fence)
    shard1 = docs.shard(1)
    taken = [m for m, _ in shard1.reserve(10)]
    shard1.fail({taken[0]: "x"}, RetryPolicy(max_attempts=1))
    shard1.fail({taken[1]: "y"}, RetryPolicy(max_attempts=5))
    said = failed(cli("layout", "docs", "--rollback-to", "1", url=redis_url), 1)
    for part in (
        "cannot go back to layout 1 (pyspark-ick 0.1)",
        "shard 1 (docs:1): 1 member(s) waiting for a retry",
        "shard 1 (docs:1): 1 dead letter(s)",
        "pyspark-ick dead redrive docs",
    ):
        assert part in said, said
    assert "docs:0" not in said
    assert client.get(layout_key("docs")) == str(LAYOUT).encode()  # nothing changed
    text = cli("layout", "docs", url=redis_url).stdout
    assert "a rollback to layout 1 (pyspark-ick 0.1) is blocked by" in text, text

    # the runbook's steps clear it: retries come back and are delivered, dead re-driven
    client.zadd(shard1.keys.retry, {taken[1]: 0})  # due now
    shard1.commit(*[m for m, _ in shard1.reserve(10)])
    DeadLetters(docs).redrive()
    shard1.commit(*[m for m, _ in shard1.reserve(10)])
    done = cli("layout", "docs", "--rollback-to", "1", url=redis_url)
    assert done.returncode == 0, done.stderr
    assert "layout 1 recorded (was 2): pyspark-ick 0.1 may run it now" in done.stdout
    assert client.get(layout_key("docs")) == b"1"
    ShardedIck(client, "docs", 2).add({"new": 1.0})  # this release again: raised back
    assert client.get(layout_key("docs")) == str(LAYOUT).encode()

    # a dehydrator holds nothing 0.1 cannot read; a newer layout is shown and refused
    done = cli("layout", "parked", "--dehydrator", "--rollback-to", "1", url=redis_url)
    assert done.returncode == 0, done.stderr
    client.set(layout_key("docs"), NEWER)
    report = as_json(cli("layout", "docs", "--json", url=redis_url))
    assert report["layout"] == NEWER and "knows layout 2 at most" in report["refused"]
    refused_line = failed(cli("stats", "docs", url=redis_url), 1)
    assert f"layout version {NEWER}" in refused_line and "--rollback-to 2" in refused_line
    said = failed(cli("layout", "docs", "--rollback-to", "1", url=redis_url), 1)
    assert f"layout version {NEWER}" in said
    assert "'nothing' does not exist" in failed(cli("layout", "nothing", url=redis_url), 3)
    client.set("gemq", "ick.v1")  # the gem's Ick: it exists, and no release recorded it
    assert "no shard count" in failed(cli("layout", "gemq", url=redis_url), 3)


def test_a_rollback_is_refused_while_a_query_holds_the_lease(client, redis_url):
    ShardedIck(client, "docs", 2).add({"a": 1.0})
    log = ReservationLog(client, "docs:1")
    fence, stop = log.lease.acquire("live-query", 30_000, 100), threading.Event()

    def heartbeat() -> None:
        while not stop.wait(0.05):
            log.lease.renew(fence)

    beating = threading.Thread(target=heartbeat, daemon=True)
    beating.start()
    try:
        said = failed(cli("layout", "docs", "--rollback-to", "1", url=redis_url), 1)
    finally:
        stop.set()
        beating.join()
    assert "'live-query' holds the lease" in said and "Stop that query first" in said
    assert client.get(layout_key("docs")) == str(LAYOUT).encode()
