"""A crash-test child: runs readStream.format("ick") -> foreachBatch against a checkpoint,
once per fault of a schedule, then drains.

Usage: python child.py CONFIG_JSON, with keys url, ick, shards, checkpoint, deliveries
(a Redis list: one JSON entry {batch, rows, t} per foreachBatch call, rows sorted),
fault_file, counter, drain_file (drain once it exists), schedule ([point, after, kill]:
kill "exit"/"raise" fail one query, which the child restarts from the checkpoint in the
same JVM; "group" kill -9s this whole process group, JVM included). Prints one line per
finished cycle ("CYCLE point") and "DRAINED" at the end; exit code 0 when drained.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from faults import (  # tests/crash/faults.py, next to this file
    arm,
    drain_then_stop,
    fault,
    run_cycles,
)

from pyspark_ick import ShardedIck, connect
from pyspark_ick.keys import shard_names
from pyspark_ick.reservations import describe
from pyspark_ick.testing import spark_session


def main() -> int:
    cfg = json.loads(sys.argv[1])
    arm(os.environ)  # before Spark starts: its processes inherit the environment
    os.environ["PYSPARK_ICK_FAULT_FILE"] = cfg["fault_file"]
    os.environ["PYSPARK_ICK_FAULT_COUNTER"] = cfg["counter"]
    fault_file, counter = Path(cfg["fault_file"]), Path(cfg["counter"])
    fault_file.write_text("")
    spark = spark_session("crash-child", **{"spark.sql.shuffle.partitions": "1"})
    spark.sparkContext.setLogLevel("ERROR")
    client = connect(cfg["url"])

    def sink(df, batch_id):
        rows = sorted([r.member, r.score, r.shard, r.reservation] for r in df.collect())
        client.rpush(
            cfg["deliveries"], json.dumps({"batch": batch_id, "rows": rows, "t": time.time()})
        )
        fault("after_sink")

    def start():
        return (
            spark.readStream.format("ick")
            .option("redis.url", cfg["url"])
            .option("ick", cfg["ick"])
            .option("shards", cfg["shards"])
            .option("maxMembersPerTrigger", cfg.get("max", 10))
            .option("consumerId", "crash-child")
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", cfg["checkpoint"])
            .start()
        )

    group = str(os.getpgrp())
    specs = [
        f"{p} {after} {group if kill == 'group' else kill}" for p, after, kill in cfg["schedule"]
    ]
    if not run_cycles(start, fault_file, counter, specs, cfg.get("cycle_timeout", 120)):
        return 3
    query = start()
    sharded = ShardedIck(client, cfg["ick"], cfg["shards"])
    keys = shard_names(cfg["ick"], cfg["shards"])

    def empty() -> bool:
        return sharded.stats()["total_size"] == 0 and all(
            describe(client, k)["open_reservations"] == 0 for k in keys
        )

    return drain_then_stop(query, cfg["drain_file"], empty, cfg.get("drain_timeout", 180))


if __name__ == "__main__":
    sys.exit(main())
