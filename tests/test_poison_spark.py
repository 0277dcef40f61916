"""Poison work through Spark: the deliveries column, the sink's hand-back that keeps a
stream going, dead letters read by a batch query, a member that kills the Python worker
isolated by ``in_pieces``, and examples/poison.py's 10,000-member pipeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import load_module

from pyspark_ick import Dehydrator, IckConfigError, ShardedIck, connect
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.spark import retry_later
from pyspark_ick.testing import redis_sentinels, wait_until

pytestmark = pytest.mark.slow  # poison members through Spark, many batches

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "poison.py"


def start(spark: Any, fmt: str, options: dict[str, str], sink: Any, ckpt: Path) -> Any:
    return (
        spark.readStream.format(fmt)
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="100 milliseconds")
        .start()
    )


@pytest.mark.parametrize("fmt", ["ick", "dehydrator"])
def test_deliveries_count_restarts_not_reads(spark, redis_url, client, tmp_path, fmt):
    if fmt == "ick":
        ShardedIck(client, "q", 2).add({f"m{i}": float(i) for i in range(40)})
        options = {"redis.url": redis_url, "ick": "q", "shards": "2"}
        options["maxMembersPerTrigger"] = "10"
    else:
        ids = [f"e{i}" for i in range(40)]
        Dehydrator(client, "d", 2).park(ids, ids, [0] * 40)
        options = {"redis.url": redis_url, "dehydrator": "d", "shards": "2"}
        options["maxElementsPerTrigger"] = "10"
    seen: list[tuple[int, list[int], list[int]]] = []

    def sink(batch: Any, batch_id: int) -> None:
        first = sorted(r["deliveries"] for r in batch.collect())
        again = sorted(r["deliveries"] for r in batch.collect())  # read twice: one delivery
        seen.append((batch_id, first, again))
        if batch_id == 1 and len([s for s in seen if s[0] == 1]) == 1:
            raise RuntimeError("the sink dies in batch 1")

    query = start(spark, fmt, options, sink, tmp_path / "ckpt")
    with pytest.raises(Exception, match="the sink dies in batch 1"):
        query.awaitTermination(120)
    query = start(spark, fmt, options, sink, tmp_path / "ckpt")  # the restart replays 1
    wait_until(lambda: any(s[0] == 2 for s in seen), timeout=120, what="batch 2")
    query.stop()
    by_batch: dict[int, list[list[int]]] = {}
    for batch_id, first, again in seen:
        assert first == again
        by_batch.setdefault(batch_id, []).append(first)
    assert by_batch[0] == [[1] * 10]
    assert by_batch[1] == [[1] * 10, [2] * 10]  # the replay is delivery 2
    assert by_batch[2] == [[1] * 10]


@pytest.fixture(scope="module")
def sentinel_url() -> Iterator[str]:
    """The URL of a Sentinel set's service (a primary, a replica, one sentinel)."""
    with redis_sentinels(1, 1, service="poison") as found:
        yield found.url


@pytest.fixture(params=["standalone", "cluster", "sentinel"])
def any_url(request: pytest.FixtureRequest) -> str:
    """Each test that takes it runs on a standalone Redis, a cluster and through Sentinel
    (each flushed)."""
    if request.param == "sentinel":
        url = request.getfixturevalue("sentinel_url")
        with connect(url) as c:
            c.flushall()
        return url
    return request.getfixturevalue("redis_url" if request.param == "standalone" else "cluster_url")


def test_a_sink_that_hands_back_its_poison_never_stops(spark, any_url, tmp_path):
    """The issue's run: 100 members in 2 shards, 30 a batch, a sink failing on m42 (on a
    standalone Redis, a cluster and through Sentinel)."""
    client = connect(any_url)
    ShardedIck(client, "q", 2).add({f"m{i}": float(i) for i in range(100)})
    options = {
        "redis.url": any_url,
        "ick": "q",
        "shards": "2",
        "maxMembersPerTrigger": "30",
        "maxAttempts": "3",
        "retryBackoff": "100ms",
        "retryBackoffMax": "200ms",
    }
    processed: dict[str, list[int]] = {}

    def sink(batch: Any, batch_id: int) -> None:
        failed = []
        for row in batch.collect():
            if row["member"] == "m42":
                failed.append((row, f"cannot index {row['member']}"))
            else:
                processed.setdefault(row["member"], []).append(row["attempt"])
        retry_later(failed, options)

    query = start(spark, "ick", options, sink, tmp_path / "ckpt")
    letters = DeadLetters(ShardedIck(client, "q", 2))
    wait_until(
        lambda: (sum(letters.count()) == 1 and len(processed) == 99) or not query.isActive,
        timeout=120,
        what="m42 buried, the rest processed",
    )
    assert query.isActive, query.exception()
    query.stop()
    assert all(attempts == [1] for attempts in processed.values())
    [letter] = letters.read()
    assert (letter.member, letter.attempts, letter.error) == ("m42", 3, "cannot index m42")
    assert ShardedIck(client, "q", 2).stats()["total_size"] == 0


def test_dead_letters_read_as_a_batch(spark, redis_url, client):
    ick = ShardedIck(client, "q", 2)
    ick.add({"a": 1.5, "b": 2.5, "c": 3.5})
    for i in range(2):
        reserved = [m for m, _ in ick.shard(i).reserve(10) if m != "c"]
        ick.fail({m: f"no {m}" for m in reserved}, policy=_once())
    df = (
        spark.read.format("ick")
        .option("redis.url", redis_url)
        .option("ick", "q")
        .option("shards", "2")
        .option("deadLetters", "true")
        .load()
    )
    assert df.columns == ["member", "shard", "attempts", "score", "error", "failedAt", "deadAt"]
    rows = sorted((r.member, r.attempts, r.score, r.error) for r in df.collect())
    assert rows == [("a", 1, 1.5, "no a"), ("b", 1, 2.5, "no b")]
    assert df.where("member = 'b'").first().failedAt is not None


def _once() -> Any:
    from pyspark_ick.retries import RetryPolicy

    return RetryPolicy(max_attempts=1)


def test_retry_later_says_what_a_failed_row_lacks(spark, redis_url):
    options = {"redis.url": redis_url, "ick": "q"}
    df = spark.createDataFrame([("m", 0)], "member string, shard int")
    with pytest.raises(IckConfigError, match=r"lack column\(s\) reservation, deliveries, error"):
        retry_later(df, options)
    with pytest.raises(IckConfigError, match="lacks reservation, deliveries"):
        retry_later([({"member": "m", "shard": 0}, "boom")], options)
    with pytest.raises(IckConfigError, match="unknown option 'ik'"):
        retry_later([], {"redis.url": redis_url, "ik": "q"})


def test_a_member_that_kills_the_worker_is_buried_and_its_batch_processed(redis_url, tmp_path):
    done = subprocess.run(
        [sys.executable, str(HERE / "killer_job.py"), redis_url, str(tmp_path / "ckpt")],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["active"], seen["error"]
    assert seen["processed"] == sorted(f"m{i}" for i in range(100) if i != 42)
    [(member, attempts, error)] = seen["dead"]
    assert (member, attempts) == ("m42", 2) and "Python worker exited unexpectedly" in error
    first = seen["batches"][0]
    assert first[1] == 100 and first[2] == 1  # one batch: only the killer handed back
    assert seen["left"] == 0 and seen["retrying"] == 0


def example() -> ModuleType:
    """examples/poison.py, loaded as a module (its ``main`` is not run)."""
    return load_module(EXAMPLE, "poison_example")


def test_the_poison_example_runs_to_its_self_check(spark, redis_url, capsys):
    """The example's pipeline (10,000 members) on the shared session, the one its
    ``main`` makes (``spark_session()``, a name aside): a Spark of its own would add only
    its start. As a process of its own the script is run only to parse its options."""
    assert example().pipeline(spark, redis_url) is True
    lines = capsys.readouterr().out.splitlines()
    assert "self-check: OK" in lines
    checks = [line for line in lines if line.endswith((" ok", "WRONG"))]
    assert len(checks) == 5 and all(line.endswith(" ok") for line in checks), checks
    assert any("9400 of 9400" in line for line in checks)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "--members" in done.stdout, done.stderr[-3000:]
