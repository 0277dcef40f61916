"""The Spark Connect client of tests/test_connect.py, run in a process of its own (a
Connect session in the pytest process would flip pyspark into Connect mode for the
classic session of the other tests):

    python connect_job.py sc://127.0.0.1:PORT REDIS_URL WORKDIR

With ``SparkSession.builder.remote(...)`` and no register() call: a batch write into an Ick,
a writeStream into an Ick, readStream(ick) -> foreachBatch (each delivery counted in Redis,
since the batch function runs in the server's Python, not here), the dehydrator sink (batch
and stream) and the dehydrator readStream into an Ick. Prints one ``RESULT {json}`` line;
tests/test_connect.py checks Redis.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession

BATCH, STREAMED, PARKED = 5000, 1000, 300


def main() -> None:
    remote, url, workdir = sys.argv[1:4]
    spark = SparkSession.builder.remote(remote).getOrCreate()
    kind = type(spark).__module__

    def ick(writer: Any, name: str, shards: int) -> Any:
        return (
            writer.format("ick")
            .option("redis.url", url)
            .option("ick", name)
            .option("shards", shards)
        )

    def available_now(writer: Any, checkpoint: str) -> None:
        query = (
            writer.trigger(availableNow=True)
            .option("checkpointLocation", f"{workdir}/{checkpoint}")
            .start()
        )
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{checkpoint}: {query.exception()}")

    # 1. a batch write: BATCH members into 4 shards
    ick(
        spark.range(BATCH, numPartitions=4)
        .selectExpr("concat('doc:', id) AS member", "CAST(id AS DOUBLE) AS score")
        .write,
        "c_batch",
        4,
    ).mode("append").save()

    # 2. a writeStream into an Ick (a JSON file source, drained with AvailableNow)
    spark.range(STREAMED, numPartitions=2).selectExpr("concat('s:', id) AS member").write.json(
        f"{workdir}/in"
    )
    files = spark.readStream.schema("member string").json(f"{workdir}/in")
    available_now(ick(files.writeStream, "c_stream", 2), "ckpt-stream")

    # 3. readStream(ick) -> foreachBatch: every delivery counted in Redis
    def count(df: Any, batch_id: int) -> None:
        import redis

        members = [r.member for r in df.select("member").collect()]
        with redis.Redis.from_url(url) as r, r.pipeline(transaction=False) as p:
            for member in members:
                p.hincrby("c_delivered", member, 1)
            p.rpush("c_batches", f"{batch_id}:{len(members)}")
            p.execute()

    reader = ick(spark.readStream, "c_batch", 4).option("maxMembersPerTrigger", 2000).load()
    available_now(reader.writeStream.foreachBatch(count), "ckpt-read")

    # 4. the dehydrator: the batch sink (due now), the stream sink (due in an hour), and
    # the dehydrator readStream into an Ick (the rehydrate loop of examples/rehydrate.py)
    def dehydrator(writer: Any, name: str) -> Any:
        return (
            writer.format("dehydrator")
            .option("redis.url", url)
            .option("dehydrator", name)
            .option("shards", 2)
        )

    dehydrator(
        spark.range(PARKED)
        .selectExpr("concat('p:', id) AS element", "CAST(0 AS BIGINT) AS delayMs")
        .write,
        "c_parked",
    ).mode("append").save()
    later = files.selectExpr("member AS element")
    available_now(dehydrator(later.writeStream, "c_later").option("delay", "1h"), "ckpt-dh")
    released = dehydrator(spark.readStream, "c_parked").load().selectExpr("element AS member")
    available_now(ick(released.writeStream, "c_back", 2), "ckpt-back")

    print("RESULT " + json.dumps({"session": kind}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
