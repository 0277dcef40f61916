"""How the stream reader groups shards into partitions (stream.py ``group``/``partitions``)."""

from __future__ import annotations

from typing import Any

from pyspark_ick import Dehydrator, ShardedIck, bounds
from pyspark_ick.spark.dehydrator_reader import source_schema
from pyspark_ick.spark.dehydrator_reader import stream_reader as dehydrator_reader
from pyspark_ick.spark.ick_reader import STREAM_SCHEMA, stream_reader
from pyspark_ick.spark.source import ShardRange, ShardRanges, group


def test_group_balances_and_never_splits_a_shard() -> None:
    assert group({0: 10, 1: 10, 2: 10, 3: 10}, 100) == [[0, 1, 2, 3]]
    assert group({0: 60, 1: 60, 2: 60, 3: 60}, 100) == [[0, 2], [1, 3]]
    assert group({0: 500, 1: 10, 2: 10}, 100) == [[0], [1], [2]]
    assert group({0: 90, 1: 5, 2: 5, 3: 100}, 100) == [[3], [0, 1, 2]]
    assert group({2: 7}, 100) == [[2]]


def rows(reader: Any, parts: list[Any]) -> list[tuple[str, int]]:
    return sorted(
        (r["member"], r["shard"]) for p in parts for b in reader.read(p) for r in b.to_pylist()
    )


def test_small_batch_is_one_partition_and_replay_one_per_shard(client: Any, redis_url: str) -> None:
    ShardedIck(client, "g", 4).add_pairs([f"m{i}" for i in range(40)], [1.0] * 40)
    options = {"redis.url": redis_url, "ick": "g", "shards": "4", "minMembersPerPartition": "15"}
    reader = stream_reader(options, STREAM_SCHEMA)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    parts = reader.partitions(start, end)
    assert len(parts) == 2
    assert sorted(r.shard for p in parts for r in getattr(p, "ranges", (p,))) == [0, 1, 2, 3]
    assert any(isinstance(p, ShardRanges) for p in parts)
    expected = sorted((f"m{i}", ShardedIck(client, "g", 4).shard_of(f"m{i}")) for i in range(40))
    assert rows(reader, parts) == expected
    reader.stop()
    replay = stream_reader(options, STREAM_SCHEMA)  # a restart: sizes unknown
    assert replay.initialOffset() == start
    parts = replay.partitions(start, end)
    assert [type(p) for p in parts] == [ShardRange] * 4
    assert rows(replay, parts) == expected
    replay.stop()


def one_shard_batch(
    client: Any, redis_url: str, name: str, monkeypatch: Any, dirty_again: bool
) -> tuple[Any, Any, Any, list[Any]]:
    """100 members of one shard reserved by one latestOffset into 10 reservations of 10
    (MOVES_PER_CALL 10); with ``dirty_again``, m00 is reserved first, re-added, and
    reserved again by that latestOffset."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 10)
    ick = ShardedIck(client, name, 1)
    ick.add_pairs([f"m{i:02d}" for i in range(100)], [float(i) for i in range(100)])
    reader = stream_reader(
        {"redis.url": redis_url, "ick": name, "minMembersPerPartition": "30"}, STREAM_SCHEMA
    )
    start = reader.initialOffset()
    if dirty_again:
        log, fence = reader._driver()[0], reader._state.leases.fences[0]
        assert log.reserve(1, start["0"], fence) == (start["0"] + 1, 1, 1)
        ick.add({"m00": 50.5})
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    return reader, start, end, reader.partitions(start, end)


def test_a_big_batch_of_one_shard_is_read_by_several_tasks(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    reader, start, end, parts = one_shard_batch(
        client, redis_url, "split", monkeypatch, dirty_again=False
    )
    assert end["0"] == start["0"] + 10
    assert sorted(parts, key=lambda p: p.start) == [
        ShardRange(0, start["0"] + a, start["0"] + b) for a, b in ((0, 3), (3, 6), (6, 10))
    ]
    rows = [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
    assert sorted(r["member"] for r in rows) == [f"m{i:02d}" for i in range(100)]
    for part in parts:
        assert all(
            part.start < r["reservation"] <= part.end
            for b in reader.read(part)
            for r in b.to_pylist()
        )
    reader.commit(end)
    reader.stop()


def test_a_batch_with_a_member_reserved_twice_is_read_by_one_task(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    reader, start, end, parts = one_shard_batch(
        client, redis_url, "folds", monkeypatch, dirty_again=True
    )
    assert parts == [ShardRange(0, start["0"], end["0"])]
    rows = [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
    assert sorted(r["member"] for r in rows) == [f"m{i:02d}" for i in range(100)]
    m00 = [r for r in rows if r["member"] == "m00"]
    assert [(r["score"], r["reservation"] > start["0"] + 1) for r in m00] == [(0.0, True)]
    reader.commit(end)
    reader.stop()


def test_a_big_claim_batch_of_one_shard_is_read_by_several_tasks(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """Claims never fold (an id claimed twice was pushed twice): they always split."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 10)
    Dehydrator(client, "dsplit").park([f"d{i:02d}" for i in range(100)], ["x"] * 100, [0] * 100)
    reader = dehydrator_reader(
        {"redis.url": redis_url, "dehydrator": "dsplit", "minElementsPerPartition": "30"},
        source_schema(),
    )
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    parts = reader.partitions(start, end)
    assert sorted((p.start, p.end) for p in parts) == [
        (start["0"] + a, start["0"] + b) for a, b in ((0, 3), (3, 6), (6, 10))
    ]
    ids = sorted(r["id"] for p in parts for b in reader.read(p) for r in b.to_pylist())
    assert ids == [f"d{i:02d}" for i in range(100)]
    reader.commit(end)
    reader.stop()
