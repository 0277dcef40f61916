"""The job tests/test_deploy_standalone.py spark-submits to a standalone cluster: write
COUNT members into an Ick of SHARDS shards with format("ick"), then drain it with a
Trigger.AvailableNow readStream into foreachBatch; prints one ``RESULT {json}`` line.

    spark-submit --master spark://... deploy_job.py URL ICK COUNT SHARDS CHECKPOINT

No register() call: format("ick") is found by Spark's discovery of pyspark_* modules, and
the session is ``SparkSession.builder.getOrCreate()``, so spark-submit's --master applies.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from typing import Any

from pyspark.sql import SparkSession

from pyspark_ick import ShardedIck, connect


def main() -> None:
    url, ick, count, shards, checkpoint = sys.argv[1:6]
    spark = SparkSession.builder.appName("pyspark-ick-deploy-test").getOrCreate()
    sc = spark.sparkContext

    (
        spark.range(int(count), numPartitions=4)
        .selectExpr("concat('doc:', id) AS member", "CAST(id % 1000 AS DOUBLE) AS score")
        .write.format("ick")
        .option("redis.url", url)
        .option("ick", ick)
        .option("shards", int(shards))
        .mode("append")
        .save()
    )
    written = ShardedIck(connect(url), ick, int(shards)).stats()["pset_size"]

    delivered: Counter[str] = Counter()
    batches: list[int] = []

    def sink(df: Any, batch_id: int) -> None:
        rows = df.select("member").collect()
        batches.append(len(rows))
        delivered.update(r.member for r in rows)

    query = (
        spark.readStream.format("ick")
        .option("redis.url", url)
        .option("ick", ick)
        .option("shards", int(shards))
        .option("maxMembersPerTrigger", 5000)
        .load()
        .writeStream.foreachBatch(sink)
        .trigger(availableNow=True)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    query.awaitTermination()
    left = ShardedIck(connect(url), ick, int(shards)).stats()["total_size"]

    # where tasks run: an executor of a standalone worker runs in the worker's work dir
    cwds = sorted(set(sc.parallelize(range(8), 8).map(lambda _: os.getcwd()).collect()))
    print(
        "RESULT "
        + json.dumps(
            {
                "master": sc.master,
                "written": written,
                "delivered": sum(delivered.values()),
                "distinct": len(delivered),
                "repeated": sum(1 for n in delivered.values() if n > 1),
                "batches": batches,
                "left": left,
                "executors": sc._jsc.sc().getExecutorMemoryStatus().size(),  # the driver's too
                "task_cwds": cwds,
                "driver_cwd": os.getcwd(),
            }
        ),
        flush=True,
    )
    spark.stop()


if __name__ == "__main__":
    main()
