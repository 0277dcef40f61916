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

from faults import arm, fault, run_until_fault  # tests/crash/faults.py, next to this file

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

    for point, after, kill in cfg["schedule"]:
        if kill == "group":
            kill = str(os.getpgrp())
        if not run_until_fault(
            start, fault_file, counter, f"{point} {after} {kill}", cfg.get("cycle_timeout", 120)
        ):
            print(f"NOFAULT {point}", flush=True)
            return 3
        print(f"CYCLE {point}", flush=True)

    print("FAULTS DONE", flush=True)
    query = start()
    sharded = ShardedIck(client, cfg["ick"], cfg["shards"])
    keys = shard_names(cfg["ick"], cfg["shards"])
    deadline = time.monotonic() + cfg.get("drain_timeout", 180)
    while time.monotonic() < deadline:
        if not query.isActive:
            print(f"FAILED {query.exception()}", flush=True)
            return 4
        if (
            Path(cfg["drain_file"]).exists()
            and sharded.stats()["total_size"] == 0
            and all(describe(client, k)["open_reservations"] == 0 for k in keys)
        ):
            query.stop()
            print("DRAINED", flush=True)
            return 0
        time.sleep(0.1)
    print("NOT DRAINED", flush=True)
    return 5


if __name__ == "__main__":
    sys.exit(main())
