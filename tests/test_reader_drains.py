"""Both stream sources drained on the driver, in Spark's order of calls, without Spark:
what the AvailableNow drains of tests/test_reader.py and tests/test_dehydrator_spark.py
prove of Redis (the sink's adds, limited reserves over several shards, the AvailableNow
budget, reads, commits, a member added again delivered again, a second consumer refused)
at a fraction of their cost. The version matrix (tests/test_versions.py) runs them on
every Redis and Valkey server in place of those Spark tests."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from pyspark_ick import Dehydrator, LeaseError, ShardedIck
from pyspark_ick.reservations import describe
from pyspark_ick.spark.dehydrator_reader import source_schema
from pyspark_ick.spark.dehydrator_reader import stream_reader as dehydrator_reader
from pyspark_ick.spark.ick_reader import STREAM_SCHEMA, stream_reader
from pyspark_ick.spark.ick_writer import batch_writer

MS = StructType([StructField("member", StringType()), StructField("score", DoubleType())])


def rows(reader: Any, start: dict[str, int], end: dict[str, int]) -> list[dict[str, Any]]:
    """The rows of the batch ``start``-``end``, read partition by partition (the tasks)."""
    return [r for p in reader.partitions(start, end) for b in reader.read(p) for r in b.to_pylist()]


def available_now(reader: Any, meanwhile: Callable[[], Any] = lambda: None) -> list[list[Any]]:
    """The batches of a Trigger.AvailableNow run, the reader called as Spark 4.2+ calls it:
    the budget taken first (then ``meanwhile`` runs), then latestOffset of batch N+1 before
    commit of batch N, until the offset stops moving (the last batch committed then, as the
    query ends)."""
    reader.prepareForTriggerAvailableNow()
    meanwhile()
    start, done, out = reader.initialOffset(), None, []
    while True:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if done is not None:
            reader.commit(done)
        if end == start:
            break
        out.append(rows(reader, start, end))
        done, start = end, end
    reader.stop()
    return out


def test_an_ick_the_sink_wrote_drains_in_capped_batches_once_each(client, redis_url):
    """3000 members over 3 shards, written by the sink's tasks (two, as two partitions),
    drained with maxMembersPerTrigger 1000: three batches, each member once with its
    score, a shard's rows in score order, every reservation committed."""
    members = [(f"doc:{i}", float(i % 97)) for i in range(3000)]
    writer = batch_writer({"redis.url": redis_url, "ick": "docs", "shards": "3"}, MS, False)
    tasks = [
        [
            pa.record_batch(
                {
                    "member": pa.array([m for m, _ in members[i : i + 500]]),
                    "score": pa.array([s for _, s in members[i : i + 500]], pa.float64()),
                }
            )
            for i in range(first, first + 1500, 500)
        ]
        for first in (0, 1500)
    ]
    messages = [writer.write(iter(batches)) for batches in tasks]
    writer.commit(messages)
    assert sum(m.new for m in messages) == 3000
    options = {"redis.url": redis_url, "ick": "docs", "shards": "3", "maxMembersPerTrigger": "1000"}
    batches = available_now(stream_reader(options, STREAM_SCHEMA))
    delivered = [r for batch in batches for r in batch]
    assert sorted(r["member"] for r in delivered) == sorted(m for m, _ in members)  # once each
    assert {r["member"]: r["score"] for r in delivered} == dict(members)
    assert len(batches) == 3 and all(len(b) <= 1000 for b in batches)
    ick = ShardedIck(client, "docs", 3)
    for batch in batches:
        by_shard: dict[int, list[float]] = defaultdict(list)
        for r in batch:
            assert r["shard"] == ick.shard_of(r["member"])
            by_shard[r["shard"]].append(r["score"])
        assert all(scores == sorted(scores) for scores in by_shard.values())
    assert ick.stats()["total_size"] == 0
    assert {describe(client, f"docs:{i}")["open_reservations"] for i in range(3)} == {0}


def test_a_member_added_again_is_delivered_again_and_a_second_consumer_is_refused(
    client, redis_url
):
    ick = ShardedIck(client, "live", 2)
    options = {"redis.url": redis_url, "ick": "live", "shards": "2", "leaseTimeout": "2s"}
    reader = stream_reader({**options, "consumerId": "indexer"}, STREAM_SCHEMA)
    limit = reader.getDefaultReadLimit()
    ick.add({"x": 1.0, "y": 2.0})
    start = reader.initialOffset()
    first = reader.latestOffset(start, limit)
    assert sorted((r["member"], r["score"]) for r in rows(reader, start, first)) == [
        ("x", 1.0),
        ("y", 2.0),
    ]
    ick.add({"x": 5.0})  # dirty again after its delivery: delivered again
    second = reader.latestOffset(first, limit)
    reader.commit(first)
    assert [(r["member"], r["score"]) for r in rows(reader, first, second)] == [("x", 5.0)]
    with pytest.raises(LeaseError, match=r"Ick 'live' shard \d .*'indexer' holds its lease"):
        stream_reader(options, STREAM_SCHEMA).initialOffset()
    assert reader.latestOffset(second, limit) == second  # the first one goes on: commits
    reader.stop()
    assert ick.stats()["total_size"] == 0


def test_the_dehydrator_source_drains_binary_elements_within_its_budget(client, redis_url):
    """250 binary elements due over 2 shards, maxElementsPerTrigger 100: batches of 100,
    100 and 50, every claim committed and gone. An element due after the run took its
    budget (the due elements counted by Redis) waits for the next run."""
    d = Dehydrator(client, "bin", 2, decode=False)
    elements = [bytes([n % 256, 0]) for n in range(250)]
    d.park([str(n) for n in range(250)], elements, [0] * 250)
    options = {
        "redis.url": redis_url,
        "dehydrator": "bin",
        "shards": "2",
        "elementType": "binary",
        "maxElementsPerTrigger": "100",
    }
    reader = dehydrator_reader(options, source_schema(binary=True))
    batches = available_now(reader, lambda: d.park(["late"], [b"late"], [0]))
    assert [len(b) for b in batches] == [100, 100, 50]
    assert sorted(bytes(r["element"]) for b in batches for r in b) == sorted(elements)
    for i in range(2):
        log = d.claim_log(i)
        assert log.last_committed() == log.last_claimed() > 0
    assert client.keys("bin:*/dh/*claim:*") == []
    assert d.look("late") == b"late" and d.size() == 1
