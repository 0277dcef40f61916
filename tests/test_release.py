"""``pyspark-ick release`` (issue 35): after a killed driver, the dead query's reservations
go back to the queue and its leases go, fenced, so the next query starts at once and
delivers them; a live query is refused; a dehydrator's claims stay open for the next
query. The driver side of a query is the stream reader's own API (as tests/test_reader.py
does); the next query is a real Spark query."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pyspark_ick import Dehydrator, LeaseError, LeaseLost, ShardedIck
from pyspark_ick.option_table import OPTIONS
from pyspark_ick.release import release
from pyspark_ick.reservations import describe
from pyspark_ick.spark.dehydrator_reader import source_schema
from pyspark_ick.spark.dehydrator_reader import stream_reader as dehydrator_reader
from pyspark_ick.spark.ick_reader import STREAM_SCHEMA, stream_reader

LEASE_TIMEOUT_S = next(o.default for o in OPTIONS if o.name == "leaseTimeout") / 1000
"""What a takeover of another owner's lease waits for (default leaseTimeout)."""


def killed_query(url: str, name: str, shards: int, consumer: str) -> tuple[Any, dict[str, int]]:
    """A query that reserved a batch and whose driver then died (no heartbeat, no
    release): the reader and the end offset of its batch in flight."""
    reader = stream_reader(
        {"redis.url": url, "ick": name, "shards": str(shards), "consumerId": consumer},
        STREAM_SCHEMA,
    )
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    reader._state.leases.halt()
    return reader, end


def drain(spark: Any, url: str, name: str, shards: int, ckpt: str) -> list[str]:
    """The members a new Spark query (a new checkpoint) delivers, Trigger.AvailableNow."""
    got: list[str] = []
    query = (
        spark.readStream.format("ick")
        .option("redis.url", url)
        .option("ick", name)
        .option("shards", shards)
        .load()
        .writeStream.foreachBatch(lambda df, _: got.extend(r.member for r in df.collect()))
        .trigger(availableNow=True)
        .option("checkpointLocation", ckpt)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return got


@pytest.mark.slow
def test_release_after_a_killed_driver_and_the_next_query_delivers_at_once(
    spark, client, redis_url, tmp_path
):
    members = {f"doc:{i}": float(i) for i in range(40)}
    ShardedIck(client, "r", 2).add(members)
    zombie, end = killed_query(redis_url, "r", 2, "indexer")
    assert sum(describe(client, f"r:{i}")["open_members"] for i in range(2)) == 40
    ShardedIck(client, "r", 2).add({"doc:3": 0.5})  # dirtied again while in flight

    started = time.monotonic()
    done = release(client, "r")  # waits until the dead holder counts as gone (about 4 s)
    assert time.monotonic() - started < 10
    assert done.owners == ["indexer", "indexer"] and sum(done.requeued) == 40
    stats = ShardedIck(client, "r", 2).stats()
    assert (stats["pset_size"], stats["cset_size"]) == (40, 0)
    sharded = ShardedIck(client, "r", 2)
    pset = sharded.shard(sharded.shard_of("doc:3")).keys.pset
    assert client.zscore(pset, "doc:3") == 0.5  # the lower score won
    for i in range(2):
        info = describe(client, f"r:{i}")
        assert info["open_reservations"] == 0 and info["lease_owner"] is None

    # the dead query's zombie is fenced, even under the same consumerId as the next query
    with pytest.raises(LeaseLost):
        zombie.commit(end)
    successor = stream_reader(
        {"redis.url": redis_url, "ick": "r", "shards": "2", "consumerId": "indexer"},
        STREAM_SCHEMA,
    )
    started = time.monotonic()
    successor.initialOffset()  # takes the leases at once, with new tokens (else LeaseBusy)
    assert time.monotonic() - started < LEASE_TIMEOUT_S / 4  # not the takeover's wait
    with pytest.raises(LeaseLost):
        zombie.commit(end)
    successor.stop()

    started = time.monotonic()
    assert sorted(drain(spark, redis_url, "r", 2, str(tmp_path / "new"))) == sorted(members)
    print(f"next query after release: {time.monotonic() - started:.1f} s")


def test_release_refuses_a_live_query_and_changes_nothing(client, redis_url):
    ShardedIck(client, "live", 1).add({"a": 1.0, "b": 2.0})
    reader = stream_reader({"redis.url": redis_url, "ick": "live"}, STREAM_SCHEMA)
    reader.latestOffset(reader.initialOffset(), reader.getDefaultReadLimit())
    before = describe(client, "live")
    with pytest.raises(LeaseError, match=r"'query-\w+' holds the lease and renewed it while"):
        release(client, "live")
    with pytest.raises(LeaseError, match=r"renewed it \d+ ms ago.*Stop that query first"):
        release(client, "live", wait=False)
    after = describe(client, "live")
    assert (after["open_members"], after["lease_owner"]) == (2, before["lease_owner"])
    reader.commit({"0": 1})  # the live query goes on: its lease is intact
    reader.stop()


@pytest.mark.slow
def test_dehydrator_release_drops_the_lease_and_the_claims_are_delivered_first(client, redis_url):
    Dehydrator(client, "parked", 2).park([f"id{i}" for i in range(10)], ["x"] * 10, [0] * 10)
    options = {"redis.url": redis_url, "dehydrator": "parked", "shards": "2"}
    dead = dehydrator_reader(options, source_schema())
    end = dead.latestOffset(dead.initialOffset(), dead.getDefaultReadLimit())
    dead._state.leases.halt()

    done = release(client, "parked", kind="dehydrator")
    assert sum(done.open_claims) == sum(end.values()) == 2  # one claim per shard
    with pytest.raises(LeaseLost):
        dead.commit(end)
    started = time.monotonic()
    new = dehydrator_reader(options, source_schema())
    start = new.initialOffset()  # the lease is free: no takeover wait (else LeaseBusy)
    assert time.monotonic() - started < LEASE_TIMEOUT_S / 4
    rows = [
        row
        for part in new.partitions(start, new.latestOffset(start, new.getDefaultReadLimit()))
        for batch in new.read(part)
        for row in batch.to_pylist()
    ]
    assert sorted(r["id"] for r in rows) == sorted(f"id{i}" for i in range(10))
    new.stop()


def test_the_old_checkpoint_of_a_released_query_fails_at_its_first_batch(
    spark, client, redis_url, tmp_path
):
    """The runbook (docs/operations.md): after `release`, a checkpoint whose last batch was
    in flight fails with `number N was committed already`, at its first batch, without
    delivering anything (before: batch 0 replayed as an empty batch, then batch 1 failed)."""
    ShardedIck(client, "rc", 2).add({f"doc:{i}": float(i) for i in range(20)})
    ckpt, seen = str(tmp_path / "ckpt"), []

    def start(sink: Any) -> Any:
        return (
            spark.readStream.format("ick")
            .option("redis.url", redis_url)
            .option("ick", "rc")
            .load()
            .writeStream.foreachBatch(sink)
            .trigger(processingTime="100 milliseconds")
            .option("checkpointLocation", ckpt)
            .start()
        )

    def dies(df: Any, batch_id: int) -> None:
        raise RuntimeError("the sink dies with batch 0 in flight")

    query = start(dies)
    with pytest.raises(Exception, match="the sink dies"):
        query.awaitTermination(120)
    assert sum(describe(client, f"rc:{i}")["open_members"] for i in range(2)) == 20
    assert sum(release(client, "rc").requeued) == 20

    def records(df: Any, batch_id: int) -> None:
        seen.append((batch_id, df.count()))

    query = start(records)
    with pytest.raises(Exception, match=r"number \d+ was committed already") as failed:
        query.awaitTermination(120)
    assert "checkpointLocation" in str(failed.value)
    assert seen == []  # no batch ran, not even an empty one
    assert ShardedIck(client, "rc", 2).stats()["pset_size"] == 20  # all still queued
