"""The stream reader's job ahead (source.py): while a backlog drains, the batch after the
one Spark runs is reserved in the background, and the one before it committed."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

from pyspark_ick import ShardedIck, bounds
from pyspark_ick.reservations import describe
from pyspark_ick.spark.ick_reader import STREAM_SCHEMA, stream_reader
from pyspark_ick.spark.source import Ahead
from pyspark_ick.testing import wait_until


def members(reader: Any, start: dict[str, int], end: dict[str, int]) -> list[str]:
    return [
        r["member"]
        for p in reader.partitions(start, end)
        for b in reader.read(p)
        for r in b.to_pylist()
    ]


def test_a_draining_backlog_is_reserved_one_batch_ahead(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """100 members, maxMembersPerTrigger 30, reservations of 10, Spark's order of calls
    (latestOffset of N+1, then commit of N): after each full batch the next one is
    reserved before Spark asks for it; each batch still holds exactly its limit, every
    member is delivered once, and the Ick ends empty."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 10)
    ick = ShardedIck(client, "ahead", 1)
    ick.add_pairs([f"m{i:02d}" for i in range(100)], [float(i) for i in range(100)])
    reader = stream_reader(
        {"redis.url": redis_url, "ick": "ahead", "maxMembersPerTrigger": "30"}, STREAM_SCHEMA
    )
    start, done = reader.initialOffset(), None
    delivered: list[str] = []
    while True:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if done is not None:
            reader.commit(done)
        if end == start:
            break
        waiting = 100 - len(delivered) - 30
        if waiting > 0:  # a full batch with more waiting: the next one is reserved ahead
            ahead = math.ceil(min(waiting, 30) / 10)  # reservations of 10
            wait_until(
                lambda e=end["0"], r=ahead: describe(client, "ahead")["last_reserved"] == e + r,
                what="the batch ahead",
            )
        batch = members(reader, start, end)
        assert len(batch) == min(30, 100 - len(delivered))
        delivered += batch
        done, start = end, end
    assert delivered == [f"m{i:02d}" for i in range(100)]
    assert ick.stats()["total_size"] == 0
    assert describe(client, "ahead")["open_reservations"] == 0
    reader.stop()


def test_the_batch_after_a_backlog_commits_the_one_before_in_the_background(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """50 members, maxMembersPerTrigger 30: batch 1 (30) is cut by the limit, batch 2 (20)
    is the last. Batch 2's latestOffset leaves the commit of batch 1 to a background job
    (it runs while the executors read batch 2, off Spark's critical path); the next
    trigger commits batch 2 and the Ick ends empty."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 10)
    ick = ShardedIck(client, "after", 1)
    ick.add_pairs([f"m{i:02d}" for i in range(50)], [float(i) for i in range(50)])
    reader = stream_reader(
        {"redis.url": redis_url, "ick": "after", "maxMembersPerTrigger": "30"}, STREAM_SCHEMA
    )
    log = reader._driver()[0]
    committed_by: dict[int, str] = {}
    commit = log.commit

    def commit_where(through: int, fence: Any) -> int:
        committed_by[through] = threading.current_thread().name
        return commit(through, fence)

    monkeypatch.setattr(log, "commit", commit_where)
    limit = reader.getDefaultReadLimit()
    start = reader.initialOffset()
    first = reader.latestOffset(start, limit)
    last = reader.latestOffset(first, limit)
    reader.commit(first)
    assert len(members(reader, first, last)) == 20
    assert committed_by[first["0"]] == "pyspark-ick-ahead"
    assert reader.latestOffset(last, limit) == last
    assert committed_by[last["0"]] == threading.current_thread().name
    assert ick.stats()["total_size"] == 0
    reader.stop()


def test_a_failure_ahead_fails_the_next_trigger(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """What the job ahead raises (a lost lease, Redis away past retryTimeout) is raised by
    the next latestOffset: the query fails there, as it would have without the job."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 10)
    ShardedIck(client, "fails", 1).add_pairs([f"m{i}" for i in range(50)], [1.0] * 50)
    reader = stream_reader(
        {"redis.url": redis_url, "ick": "fails", "maxMembersPerTrigger": "20"}, STREAM_SCHEMA
    )
    start = reader.initialOffset()
    log = reader._driver()[0]
    calls = 0
    reserve = log.reserve

    def flaky(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # the job ahead's call
            raise ConnectionError("Redis went away")
        return reserve(*args)

    monkeypatch.setattr(log, "reserve", flaky)
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    with pytest.raises(ConnectionError, match="Redis went away"):
        reader.latestOffset(end, reader.getDefaultReadLimit())
    reader.stop()


def test_ahead_returns_what_its_job_returned_or_raises_its_error() -> None:
    assert Ahead(lambda: [3, 4], [0, 0], [1, 1]).result() == [3, 4]

    def fails() -> list[int]:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        Ahead(fails, [0], [1]).result()
