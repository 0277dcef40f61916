"""The delayed re-release loop (docs/design.md §1): elements parked in a dehydrator come back into
an Ick as dirty members once they are due.

    python examples/rehydrate.py --dehydrator parked_docs --ick dirty_docs --shards 8

Redis is ``--url`` (default: the REDIS_URL environment variable, else a throwaway server
from pyspark_ick.testing, on this machine only). On a cluster, run it with spark-submit
(examples/spark-submit.sh) and a Redis every node reaches: the session is
``SparkSession.builder.getOrCreate()``, so spark-submit's ``--master`` applies; run with
plain ``python``, Spark's default master (``local[*]``) does. Park something to see it come
back:

    df.write.format("dehydrator").option("dehydrator", "parked_docs") \\
        .option("shards", 8).option("delay", "30s").mode("append").save()

Each micro-batch claims the due elements of every dehydrator shard, adds them to the Ick
(scored with Redis server time) and then commits the claims, so a crash in between
re-delivers the same elements: the Ick folds the repeats (at-least-once, idempotent sink).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from typing import Any


def rehydrate(
    spark: Any,
    url: str,
    dehydrator: str,
    ick: str,
    shards: int,
    checkpoint: str,
    trigger: str = "0 seconds",
) -> Any:
    """Start the streaming query dehydrator -> Ick; returns it (a StreamingQuery)."""
    return (
        spark.readStream.format("dehydrator")
        .option("redis.url", url)
        .option("dehydrator", dehydrator)
        .option("shards", shards)
        .load()
        .selectExpr("element AS member")
        .writeStream.format("ick")
        .option("redis.url", url)
        .option("ick", ick)
        .option("shards", shards)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=trigger)
        .start()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("REDIS_URL"),
        help="Redis URL (default: $REDIS_URL, else a throwaway server)",
    )
    parser.add_argument("--dehydrator", default="parked_docs")
    parser.add_argument("--ick", default="dirty_docs")
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument(
        "--checkpoint", default=None, help="checkpoint folder (default: a new temporary one)"
    )
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        # plain `python rehydrate.py`: Spark starts here and its Python workers (and the
        # lookup of format("ick")) run this interpreter, venv activated or not. Under
        # spark-submit the launcher's PYSPARK_PYTHON applies (README "Deploying").
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    with contextlib.ExitStack() as stack:
        if args.url:
            url = args.url
        else:
            from pyspark_ick.testing import redis_server

            url = stack.enter_context(redis_server()).url
        checkpoint = args.checkpoint or stack.enter_context(tempfile.TemporaryDirectory())
        spark = SparkSession.builder.appName("rehydrate").getOrCreate()
        query = rehydrate(spark, url, args.dehydrator, args.ick, args.shards, checkpoint)
        print(
            f"rehydrating {args.dehydrator!r} into {args.ick!r} "
            f"({args.shards} shards); Ctrl-C stops"
        )
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()


if __name__ == "__main__":
    main()
