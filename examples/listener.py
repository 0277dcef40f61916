"""A StreamingQueryListener that prints each Ick source's progress after every micro-batch
(docs/monitoring.md).

    python examples/listener.py --url redis://localhost:6379/0 --ick dirty_docs --shards 8

It marks three documents dirty, drains the Ick with one query (Trigger.AvailableNow) and
prints a line per micro-batch, such as:

    query indexer: 0 queued, oldest - ms, 0 dead letters

Spark calls a listener on its own thread after the batch, so the script waits for that
call before it stops Spark: a script that ends at ``awaitTermination()`` may print nothing.
"""

from __future__ import annotations

# --8<-- [start:listener]
import json
import threading
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener


def describe(name: str, progress: dict[str, Any]) -> str:
    """The line for one Ick source's progress (the JSON of its ``latestOffset``)."""
    return (
        f"query {name}: {progress['backlog']} queued, "
        f"oldest {progress.get('oldestQueuedAgeMs', '-')} ms, "
        f"{progress.get('deadLetters', 0)} dead letters"
    )


class IckProgress(StreamingQueryListener):
    """Prints each Ick source's backlog after every micro-batch."""

    def __init__(self) -> None:
        self.reported = threading.Event()  # set once a line was printed

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        for source in event.progress.sources:
            progress = json.loads(source.latestOffset or "{}")
            if "backlog" in progress:
                print(describe(event.progress.name, progress), flush=True)
                self.reported.set()

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


# --8<-- [end:listener]


def reindex(batch: Any, batch_id: int) -> None:
    """The indexer's sink: here it only counts what it would upsert."""
    print(f"batch {batch_id}: {batch.count()} documents reindexed", flush=True)


def drain(spark: Any, url: str, ick: str, checkpoint: str, wait: float = 60.0) -> IckProgress:
    """Drain ``ick`` once with the listener registered; returns once it has printed."""
    listener = IckProgress()
    spark.streams.addListener(listener)
    try:
        query = (
            spark.readStream.format("ick")
            .option("redis.url", url)
            .option("ick", ick)
            .load()
            .writeStream.queryName("indexer")
            .foreachBatch(reindex)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        if not listener.reported.wait(wait):  # the listener runs after the batch
            raise RuntimeError(f"the listener printed nothing within {wait:g} s")
    finally:
        spark.streams.removeListener(listener)
    return listener


def main(argv: list[str]) -> int:
    """Mark three documents dirty, drain them once, print the listener's lines."""
    import argparse
    import os
    import tempfile
    import time

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://localhost:6379/0"))
    parser.add_argument("--ick", default="dirty_docs")
    parser.add_argument("--shards", type=int, default=8)
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    from pyspark_ick import ShardedIck, connect

    now = time.time()
    ShardedIck(connect(args.url), args.ick, args.shards).add(
        {"doc:1": now, "doc:2": now, "doc:3": now}
    )
    spark = SparkSession.builder.getOrCreate()
    try:
        with tempfile.TemporaryDirectory() as checkpoint:
            drain(spark, args.url, args.ick, checkpoint)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
