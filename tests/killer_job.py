"""A sink whose processing kills the Python worker on one member, run by
tests/test_poison_spark.py in a Spark of its own (``local[2,2]``: a task is tried twice,
as a cluster retries it, so a killer fails its job on the retry, not the first task
attempt): ``python killer_job.py REDIS_URL CHECKPOINT``.

100 members in 2 shards; ``foreachBatch`` hands each batch to ``in_pieces``, whose
``process`` indexes the rows on the executors (HSET into ``killer:processed``) and calls
``os._exit`` on ``m42`` (the worker dies). ``maxAttempts`` 2: the first batch isolates
``m42`` and hands it back, the second (its retry, which starts split) buries it. The
query runs until ``m42`` is a dead letter and every other member is processed; it prints
one JSON line of what it saw.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

from pyspark.sql import SparkSession

from pyspark_ick import ShardedIck, connect
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.spark import in_pieces

URL, CHECKPOINT = sys.argv[1], sys.argv[2]
KILLER, MEMBERS = "m42", [f"m{i}" for i in range(100)]
OPTIONS = {
    "redis.url": URL,
    "ick": "killer",
    "shards": "2",
    "maxAttempts": "2",
    "retryBackoff": "200ms",
    "retryBackoffMax": "400ms",
}


def index(url: str, rows: Any) -> None:
    client = connect(url)
    for row in rows:
        if row["member"] == KILLER:
            os._exit(1)  # a segfault, an OOM kill: nothing the sink can catch
        client.hset("killer:processed", row["member"], f"{row['attempt']} {row['deliveries']}")
    client.close()


def process(piece: Any) -> None:
    piece.foreachPartition(lambda rows: index(URL, rows))


def sink(batch: Any, batch_id: int) -> None:
    handed = in_pieces(batch, process, OPTIONS, pieces=4)
    client = connect(URL)
    client.rpush("killer:batches", json.dumps([batch_id, batch.count(), handed]))
    client.close()


def main() -> None:
    client = connect(URL)
    ShardedIck(client, "killer", 2).add({m: float(i) for i, m in enumerate(MEMBERS)})
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2,2]")
        .appName("killer")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    query = (
        spark.readStream.format("ick")
        .options(**OPTIONS)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", CHECKPOINT or tempfile.mkdtemp())
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    letters = DeadLetters(ShardedIck(client, "killer", 2))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and query.isActive:
        if sum(letters.count()) == 1 and client.hlen("killer:processed") == len(MEMBERS) - 1:
            break
        time.sleep(0.2)
    seen = {
        "active": query.isActive,
        "error": str(query.exception()) if not query.isActive else None,
        "processed": sorted(k.decode() for k in client.hkeys("killer:processed")),
        "dead": [(d.member, d.attempts, d.error[:200]) for d in letters.read()],
        "batches": [json.loads(b) for b in client.lrange("killer:batches", 0, -1)],
        "left": ShardedIck(client, "killer", 2).stats()["total_size"],
        "retrying": sum(letters.retrying()),
    }
    query.stop()
    spark.stop()
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main()
