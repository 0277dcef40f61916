"""Readers and writers without option ``shards`` use the count Redis recorded (as the CLI
does); a new Ick or dehydrator gets 1; a given count that disagrees fails at ``load()``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import drain, stream

from pyspark_ick import Dehydrator, ShardCountError, ShardedIck
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.keys import DehydratorKeys, shard_names
from pyspark_ick.registry import recorded
from pyspark_ick.spark.failures import retry_later

SHARDS = 8


def write_ick(spark: Any, url: str, members: list[str], **options: Any) -> None:
    df = spark.createDataFrame([(m, 1.0) for m in members], "member string, score double")
    writer = df.write.format("ick").option("redis.url", url).option("ick", "eight")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def queued(client: Any, name: str = "eight") -> dict[int, set[str]]:
    """shard -> members queued there, of the 8-shard Ick ``name``."""
    sharded = ShardedIck(client, name, SHARDS)
    return {
        i: {m.decode() for m in client.zrange(sharded.shard(i).keys.pset, 0, -1)}
        for i in range(SHARDS)
    }


@pytest.mark.slow  # 7 s at rest: 8-shard writes and a stream drain
def test_readers_and_writers_without_shards_use_all_8_recorded_shards(
    spark, redis_url, client, tmp_path
):
    first = [f"doc:{i}" for i in range(200)]
    write_ick(spark, redis_url, first, shards=SHARDS)  # records 8
    later = [f"doc:{i}" for i in range(200, 400)]
    write_ick(spark, redis_url, later)  # a batch writer without shards
    assert client.exists("eight") == 0  # nothing written to a one-shard Ick's key
    stored = queued(client)
    assert all(stored.values()), stored  # every shard has members
    sharded = ShardedIck(client, "eight", SHARDS)
    assert all(sharded.shard_of(m) == i for i, ms in stored.items() for m in ms)
    assert set().union(*stored.values()) == set(first + later)

    # a stream writer without shards (the file source into format("ick"))
    source = tmp_path / "in"
    source.mkdir()
    streamed = [f"doc:{i}" for i in range(400, 500)]
    (source / "1.json").write_text("".join(json.dumps({"member": m}) + "\n" for m in streamed))
    query = (
        spark.readStream.schema("member string")
        .json(str(source))
        .writeStream.format("ick")
        .option("redis.url", redis_url)
        .option("ick", "eight")
        .option("checkpointLocation", str(tmp_path / "w"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    everything = set(first + later + streamed)
    assert set().union(*queued(client).values()) == everything

    # the snapshot (batch) read without shards
    options = {"redis.url": redis_url, "ick": "eight"}
    snapshot = spark.read.format("ick").options(**options).load().collect()
    assert {r.member for r in snapshot} == everything
    assert {r.shard for r in snapshot} == set(range(SHARDS))

    # the stream read without shards, restarted on its checkpoint (still without shards)
    checkpoint = str(tmp_path / "r")
    query, sink = drain(spark, "ick", {**options, "maxAttempts": 1}, checkpoint)
    assert query.awaitTermination(120) and query.exception() is None
    assert {r.member for r in sink.rows()} == everything
    assert {r.shard for r in sink.rows()} == set(range(SHARDS))
    assert sharded.stats()["total_size"] == 0  # all 8 shards committed

    # restarted: the same 8 shards; a member handed back (retry_later without shards,
    # maxAttempts 1) is a dead letter of its shard, which the dead-letter read finds
    loser = next(m for m in everything if sharded.shard_of(m) != 0)
    write_ick(spark, redis_url, [loser, "doc:new"])

    def sink_failing(df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        retry_later(df.where(F.col("member") == loser).withColumn("error", F.lit("nope")), options)

    query = stream(spark, "ick", {**options, "maxAttempts": 1}, sink_failing, checkpoint, None)
    assert query.awaitTermination(120) and query.exception() is None
    assert [d.member for d in DeadLetters(sharded).read()] == [loser]
    dead = spark.read.format("ick").options(**options).option("deadLetters", "true").load()
    assert [(r.member, r.shard) for r in dead.collect()] == [(loser, sharded.shard_of(loser))]
    assert sharded.stats()["total_size"] == 0


def test_a_new_ick_or_dehydrator_without_shards_gets_1(spark, redis_url, client):
    df = spark.createDataFrame([("a", 1.0)], "member string, score double")
    df.write.format("ick").option("redis.url", redis_url).option("ick", "new").mode("append").save()
    assert recorded(client, "new", "ick", "Ick 'new'") == 1
    parked = spark.createDataFrame([("e",)], "element string")
    parked.write.format("dehydrator").option("redis.url", redis_url).option(
        "dehydrator", "new"
    ).option("delay", "1h").mode("append").save()
    assert recorded(client, "new", "dehydrator", "dehydrator 'new'") == 1


def test_a_dehydrator_without_shards_uses_its_recorded_count(spark, redis_url, client, tmp_path):
    def park(elements: list[str], **options: Any) -> None:
        df = spark.createDataFrame([(e, 0) for e in elements], "element string, delayMs long")
        writer = df.write.format("dehydrator").option("redis.url", redis_url)
        for key, value in {"dehydrator": "eight", **options}.items():
            writer = writer.option(key, value)
        writer.mode("append").save()

    park([f"e{i}" for i in range(100)], shards=SHARDS)
    park([f"e{i}" for i in range(100, 200)])  # without shards: the recorded 8
    sizes = [client.zcard(DehydratorKeys(m).due) for m in shard_names("eight", SHARDS)]
    assert all(sizes) and sum(sizes) == 200, sizes
    assert Dehydrator(client, "eight", SHARDS).size() == 200

    options = {"redis.url": redis_url, "dehydrator": "eight"}
    snapshot = spark.read.format("dehydrator").options(**options).load().collect()
    assert len(snapshot) == 200 and {r.shard for r in snapshot} == set(range(SHARDS))

    query, sink = drain(spark, "dehydrator", options, str(tmp_path / "d"))
    assert query.awaitTermination(120) and query.exception() is None
    assert {r.element for r in sink.rows()} == {f"e{i}" for i in range(200)}
    assert {r.shard for r in sink.rows()} == set(range(SHARDS))


@pytest.mark.parametrize("fmt", ["ick", "dehydrator"])
def test_a_count_that_disagrees_fails_at_load_naming_both(spark, redis_url, client, fmt):
    target = ShardedIck(client, "eight", SHARDS) if fmt == "ick" else Dehydrator(client, "eight", 8)
    target.check_shards()  # records 8
    for read in (spark.read, spark.readStream):
        source = read.format(fmt).option("redis.url", redis_url).option(fmt, "eight")
        with pytest.raises(Exception, match="8 shards recorded in Redis, but 4 were given") as e:
            source.option("shards", 4).load()
        assert "ShardCountError" in str(e.value) or isinstance(e.value, ShardCountError)
