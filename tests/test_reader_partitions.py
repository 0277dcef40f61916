"""How the stream reader groups shards into partitions (stream.py ``group``/``partitions``)."""

from __future__ import annotations

from typing import Any

from pyspark_ick import ShardedIck
from pyspark_ick.spark.ick_reader import STREAM_SCHEMA, stream_reader
from pyspark_ick.spark.source import ShardRange, ShardRanges, group


def test_group_balances_and_never_splits_a_shard() -> None:
    assert group({0: 10, 1: 10, 2: 10, 3: 10}, 100) == [[0, 1, 2, 3]]
    assert group({0: 60, 1: 60, 2: 60, 3: 60}, 100) == [[0, 2], [1, 3]]
    assert group({0: 500, 1: 10, 2: 10}, 100) == [[0], [1], [2]]
    assert group({0: 90, 1: 5, 2: 5, 3: 100}, 100) == [[3], [0, 1, 2]]
    assert group({2: 7}, 100) == [[2]]


def rows(reader: Any, parts: list[Any]) -> list[tuple[str, int]]:
    return sorted((r["member"], r["shard"]) for p in parts for b in reader.read(p)
                  for r in b.to_pylist())


def test_small_batch_is_one_partition_and_replay_one_per_shard(client: Any,
                                                               redis_url: str) -> None:
    ShardedIck(client, "g", 4).add_pairs([f"m{i}" for i in range(40)], [1.0] * 40)
    options = {"redis.url": redis_url, "ick": "g", "shards": "4",
               "minMembersPerPartition": "15"}
    reader = stream_reader(options, STREAM_SCHEMA)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    parts = reader.partitions(start, end)
    assert len(parts) == 2
    assert sorted(r.shard for p in parts for r in getattr(p, "ranges", (p,))) == [0, 1, 2, 3]
    assert any(isinstance(p, ShardRanges) for p in parts)
    expected = sorted((f"m{i}", ShardedIck(client, "g", 4).shard_of(f"m{i}"))
                      for i in range(40))
    assert rows(reader, parts) == expected
    reader.stop()
    replay = stream_reader(options, STREAM_SCHEMA)  # a restart: sizes unknown
    assert replay.initialOffset() == start
    parts = replay.partitions(start, end)
    assert [type(p) for p in parts] == [ShardRange] * 4
    assert rows(replay, parts) == expected
    replay.stop()
