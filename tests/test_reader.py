"""spark.readStream.format("ick") and spark.read.format("ick") end to end, and the lease
protocol of the stream reader on the driver."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

import pytest
from support import Sink, drain, stream

from pyspark_ick import IckConfigError, LeaseError, ShardCountError, ShardedIck
from pyspark_ick.option_table import OPTIONS
from pyspark_ick.reservations import ReservationLog, describe
from pyspark_ick.spark.ick_reader import SNAPSHOT_SCHEMA, STREAM_SCHEMA, stream_reader
from pyspark_ick.testing import wait_until

LEASE_TIMEOUT_S = next(o.default for o in OPTIONS if o.name == "leaseTimeout") / 1000
"""What a takeover of another owner's lease waits for (default leaseTimeout)."""


def test_write_then_drain_with_available_now(spark, redis_url, client, tmp_path):
    members = [(f"doc:{i}", float(i % 97)) for i in range(3000)]
    spark.createDataFrame(members, "member string, score double").write.format("ick").option(
        "redis.url", redis_url
    ).option("ick", "docs").option("shards", 3).mode("append").save()
    options = {"redis.url": redis_url, "ick": "docs", "shards": 3, "maxMembersPerTrigger": 1000}
    query, sink = drain(spark, "ick", options, str(tmp_path / "ckpt"))
    assert query.awaitTermination(120)
    rows = sink.rows()
    assert sorted(r.member for r in rows) == sorted(m for m, _ in members)  # once each
    assert {r.member: r.score for r in rows} == dict(members)
    batches = sink.batches()
    assert len(batches) == 3 and all(len(b.rows) <= 1000 for b in batches.values())
    ick = ShardedIck(client, "docs", 3)
    for batch in batches.values():
        by_shard: dict[int, list[Any]] = defaultdict(list)
        for row in batch.rows:
            assert row.shard == ick.shard_of(row.member)
            by_shard[row.shard].append(row)
        for shard_rows in by_shard.values():  # the order within a shard is by score
            assert [r.score for r in shard_rows] == sorted(r.score for r in shard_rows)
    # the last batch was acknowledged too: nothing stays reserved
    assert ick.stats()["total_size"] == 0
    assert {describe(client, f"docs:{i}")["open_reservations"] for i in range(3)} == {0}


@pytest.mark.slow
def test_redelivery_and_a_second_query_is_refused(spark, redis_url, client, tmp_path):
    ick = ShardedIck(client, "live", 2)
    sink = Sink()
    options = {"redis.url": redis_url, "ick": "live", "shards": 2}
    query = stream(
        spark, "ick", {**options, "consumerId": "indexer"}, sink, str(tmp_path / "a"), "0 seconds"
    )
    try:
        ick.add({"x": 1.0, "y": 2.0})
        wait_until(
            lambda: {"x", "y"} <= {r.member for r in sink.rows()}, timeout=60, what="first delivery"
        )
        ick.add({"x": 5.0})  # dirty again: delivered again
        wait_until(
            lambda: [r.score for r in sink.rows() if r.member == "x"] == [1.0, 5.0],
            timeout=60,
            what="re-delivery of x",
        )
        second = stream(spark, "ick", options, lambda df, i: None, str(tmp_path / "b"), "0 seconds")
        with pytest.raises(Exception, match=r"Ick 'live' shard \d .*'indexer' holds its lease"):
            second.awaitTermination(120)
        assert query.isActive
    finally:
        query.stop()


def test_snapshot_reader_shows_both_sets(spark, redis_url, client):
    ick = ShardedIck(client, "snap", 2)
    ick.add({f"m{i}": float(i) for i in range(10)})
    shard = ick.shard_of("m0")
    log = ReservationLog(client, f"snap:{shard}")
    token = log.lease.acquire("t", 10_000)
    number, moved, _ = log.reserve(2, 0, token)

    def base() -> Any:  # a fresh reader each time: .schema() changes the reader it is given
        return (
            spark.read.format("ick")
            .option("redis.url", redis_url)
            .option("ick", "snap")
            .option("shards", 2)
        )

    rows = base().schema(SNAPSHOT_SCHEMA).load().collect()
    assert sorted(r.member for r in rows) == sorted(f"m{i}" for i in range(10))
    reserved = [r for r in rows if r.state == "reserved"]
    assert len(reserved) == moved == 2
    assert {(r.shard, r.reservation) for r in reserved} == {(shard, number)}
    assert all(r.reservation is None for r in rows if r.state == "queued")
    default = base().load().collect()  # the default schema: member, score, shard, reservation
    assert sorted((r.member, r.reservation) for r in default) == sorted(
        (r.member, r.reservation) for r in rows
    )
    assert ick.stats()["total_size"] == 10  # nothing moved
    with pytest.raises(Exception, match="column 'colour' is not one of"):
        base().schema("member string, colour string").load().collect()


def test_options_are_checked_on_the_driver(redis_url, client):
    def make(**options: Any) -> Any:
        return stream_reader({"redis.url": redis_url, **options}, STREAM_SCHEMA)

    with pytest.raises(IckConfigError, match="needs option 'ick'"):
        make()
    with pytest.raises(IckConfigError, match="'maxMembersPerTrigger'"):
        make(ick="q", maxMembersPerTrigger="0")
    with pytest.raises(IckConfigError, match="'leaseTimeout'"):
        make(ick="q", leaseTimeout="soon")
    with pytest.raises(IckConfigError, match="'shards'"):
        make(ick="q", shards="many")
    with pytest.raises(IckConfigError, match="fixed schema"):
        stream_reader({"ick": "q"}, SNAPSHOT_SCHEMA)
    ShardedIck(client, "q", 4).check_shards()
    with pytest.raises(ShardCountError, match=r"4 shards recorded.*but 2"):
        make(ick="q", shards="2").initialOffset()


def test_lease_takeover_after_expiry_and_fencing(redis_url, client):
    """Driver side, no Spark: a dead query's lease expires, a new one takes over, and the
    old one (a zombie) can neither reserve nor commit."""
    ShardedIck(client, "t", 1).add({"a": 1.0, "b": 2.0})
    options = {"redis.url": redis_url, "ick": "t", "leaseTimeout": "300ms"}
    old = stream_reader(options, STREAM_SCHEMA)
    start = old.initialOffset()
    end = old.latestOffset(start, old.getDefaultReadLimit())
    assert end == {"0": 1}
    with pytest.raises(LeaseError, match=r"consumed by another query.*query-"):
        stream_reader(options, STREAM_SCHEMA).initialOffset()
    old._state.leases.halt()  # the old driver dies: no heartbeat, no release
    new = stream_reader(options, STREAM_SCHEMA)
    # refused while the old lease looks alive, then it expires and the new reader takes it
    assert wait_until(new.initialOffset, timeout=10, what="takeover") == {"0": 0}
    with pytest.raises(LeaseError, match="lost its lease"):
        old.commit(end)
    assert describe(client, "t")["last_committed"] == 0
    assert new.latestOffset({"0": 0}, new.getDefaultReadLimit()) == {"0": 1}
    rows = [
        r for batch in new.read(new.partitions({"0": 0}, {"0": 1})[0]) for r in batch.to_pylist()
    ]
    assert [r["member"] for r in rows] == ["a", "b"]
    new.commit({"0": 1})
    new.stop()
    assert describe(client, "t") | {"lease_expires_in_ms": None} == {
        "last_reserved": 1,
        "last_committed": 1,
        "open_reservations": 0,
        "open_members": 0,
        "lease_owner": None,
        "lease_expires_in_ms": None,
        "lease_idle_ms": None,
        "done": 2,
    }


def test_consumer_id_resumes_at_once(redis_url, client):
    ShardedIck(client, "c", 1).add({"a": 1.0})
    options = {"redis.url": redis_url, "ick": "c", "consumerId": "idx"}
    first = stream_reader(options, STREAM_SCHEMA)
    first.latestOffset(first.initialOffset(), first.getDefaultReadLimit())
    started = time.monotonic()
    second = stream_reader(options, STREAM_SCHEMA)  # a restart of the same query
    assert second.initialOffset() == {"0": 0}  # another owner would be refused (LeaseBusy)
    assert time.monotonic() - started < LEASE_TIMEOUT_S / 4  # not the takeover's wait
    with pytest.raises(LeaseError):
        first.commit({"0": 1})
    second.commit({"0": 1})
    first._state.leases.halt()
    second.stop()
    assert ShardedIck(client, "c", 1).stats()["total_size"] == 0


def test_members_reserved_by_another_consumer_are_adopted(redis_url, client):
    """A shard handed over by a gem consumer (or Ick.reserve) that reserved and never
    committed: the stream reader delivers those members too, with their scores."""
    ick = ShardedIck(client, "handed", 1)
    ick.add({"a": 1.0, "b": 2.0, "c": 3.0})
    assert ick.shard(0).reserve(2) == [("a", 1.0), ("b", 2.0)]  # never committed
    ick.add({"b": 0.5})  # dirty again meanwhile: the lower score wins
    reader = stream_reader({"redis.url": redis_url, "ick": "handed"}, STREAM_SCHEMA)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    rows = [
        (r["member"], r["score"])
        for p in reader.partitions(start, end)
        for batch in reader.read(p)
        for r in batch.to_pylist()
    ]
    assert rows == [("b", 0.5), ("a", 1.0), ("c", 3.0)]
    reader.commit(end)
    reader.stop()
    assert ick.stats()["total_size"] == 0


def test_a_member_dirtied_between_two_reservations_of_one_batch_names_the_later(redis_url, client):
    """A batch spanning reservations R and R+1 of a shard, the member re-added after R was
    made and reserved again in R+1: delivered once, with its first dirty score and R+1
    (the delivery covers the add; a row naming R would say it did not)."""
    ick = ShardedIck(client, "twice", 1)
    ick.add({"hot": 1.0, "cold": 2.0})
    reader = stream_reader({"redis.url": redis_url, "ick": "twice"}, STREAM_SCHEMA)
    start = reader.initialOffset()
    logs, fence = reader._driver(), reader._state.leases.fences[0]
    assert logs[0].reserve(1, start["0"], fence) == (start["0"] + 1, 1, 1)  # R: hot
    ick.add({"hot": 5.0})  # dirty again while in flight
    end = {"0": logs[0].reserve(3, start["0"], fence)[0]}  # R+1: cold, hot
    assert end["0"] == start["0"] + 2
    rows = [
        (r["member"], r["score"], r["reservation"])
        for p in reader.partitions(start, end)
        for batch in reader.read(p)
        for r in batch.to_pylist()
    ]
    assert rows == [("hot", 1.0, end["0"]), ("cold", 2.0, end["0"])]
    reader.commit(end)
    reader.stop()
    assert ick.stats()["total_size"] == 0


def test_progress_reports_the_backlog(spark, redis_url, client, tmp_path):
    now = client.time()[0]
    ShardedIck(client, "lag", 2).add({f"doc:{i}": now - 60.0 for i in range(1000)})
    options = {"redis.url": redis_url, "ick": "lag", "shards": 2, "maxMembersPerTrigger": 100}
    query = stream(
        spark, "ick", options, lambda df, i: df.count(), str(tmp_path / "ckpt"), "0 seconds"
    )
    try:

        def reported() -> Any:
            progress = query.lastProgress
            latest = progress and progress["sources"][0].get("latestOffset")
            return latest and json.loads(latest)

        latest = wait_until(reported, timeout=90, what="a progress report")
    finally:
        query.stop()
    assert set(latest["reservations"]) == {"0", "1"}
    assert 0 < latest["backlog"] < 1000
    assert latest["oldestQueuedAgeMs"] >= 60_000
