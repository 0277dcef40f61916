"""The definitions of spark-pipeline.yml: an Ick drained into a streaming table, each
delivered member parked in a dehydrator for a re-check, and due members put back in the Ick.

    Ick ICK --readStream.format("ick")--> streaming table `deliveries`
    `deliveries` --flow park--> sink `recheck` (format "dehydrator": due after RECHECK_DELAY)
    dehydrator --flow rehydrate--> sink `requeue` (format "ick": back into ICK)

`spark-pipelines run` runs each streaming flow to the end of what is there (as
Trigger.AvailableNow): the Ick source delivers every member once and acknowledges it, so the
Ick is empty afterwards, and a member due for its re-check comes back on a later run.
pyspark_ick must be installed for the Python that Spark runs (PYSPARK_PYTHON): Spark finds
formats "ick" and "dehydrator" by themselves (the pyspark_ick and pyspark_dehydrator modules).

Environment: REDIS_URL (required), PIPELINE_ICK (default "docs"), PIPELINE_DEHYDRATOR
(default "docs_recheck"), RECHECK_DELAY (default "1h").
"""

from __future__ import annotations

import os

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, current_timestamp

spark: SparkSession = globals()["spark"]  # set by spark-pipelines before it runs this file

URL = os.environ.get("REDIS_URL")
if not URL:
    raise SystemExit("ick_pipeline.py: set REDIS_URL, e.g. redis://localhost:6379/0")
ICK = os.environ.get("PIPELINE_ICK", "docs")
DEHYDRATOR = os.environ.get("PIPELINE_DEHYDRATOR", "docs_recheck")
RECHECK_DELAY = os.environ.get("RECHECK_DELAY", "1h")


@dp.table(comment="every member the Ick delivered, once, with the time of delivery")
def deliveries() -> DataFrame:
    return (
        spark.readStream.format("ick")
        .option("redis.url", URL)
        .option("ick", ICK)
        .load()
        .withColumn("delivered_at", current_timestamp())
    )


dp.create_sink(
    "recheck",
    format="dehydrator",
    options={"redis.url": URL, "dehydrator": DEHYDRATOR, "delay": RECHECK_DELAY},
)


@dp.append_flow(target="recheck")
def park() -> DataFrame:
    return spark.readStream.table("deliveries").select(
        col("member").alias("id"), col("member").alias("element")
    )


dp.create_sink("requeue", format="ick", options={"redis.url": URL, "ick": ICK})


@dp.append_flow(target="requeue")
def rehydrate() -> DataFrame:
    return (
        spark.readStream.format("dehydrator")
        .option("redis.url", URL)
        .option("dehydrator", DEHYDRATOR)
        .load()
        .select(col("element").alias("member"))
    )  # scored with Redis server time
