"""readStream.format("dehydrator") fails at every point of the claim protocol, while a
producer keeps parking elements, and restarts from its checkpoint: nothing is lost, and a
replayed batch has exactly the rows of the claim it replays.

One child process (this file run as a script: a SparkSession costs ~10 s, so one for the
whole schedule) fails its query at each point in turn, restarting it in the same JVM
(tests/crash/faults.py armed through PYSPARK_ICK_FAULT_FILE: "exit" kills the Python process at the
point, "raise" fails the foreachBatch), then drains the dehydrator. Points: after_reserve
(claimed, no offset log yet), before_read (offset log written), during_read, after_sink
(foreachBatch ran, no commit log yet), before_commit (commit log written, claims not
deleted yet).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from support import redis_ms

pytestmark = pytest.mark.slow  # Spark drivers killed and restarted

POINTS = ["after_reserve", "before_read", "during_read", "after_sink", "before_commit"]
NAME, SHARDS = "crashy", 2


def test_source_crash_at_each_point_loses_nothing_and_replays_the_same_claim(
    client, redis_url, tmp_path
):
    from pyspark_ick import Dehydrator

    d = Dehydrator(client, NAME, SHARDS)
    pushed: dict[str, int] = {}  # id -> earliest possible due (Redis ms before the push)
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.wait(0.2):
            before = redis_ms(client)
            ids = [f"p{n + k}" for k in range(5)]
            d.park(ids, [f"element of {i}" for i in ids], [0, 50, 100, 200, 400])
            pushed.update({i: before + t for i, t in zip(ids, [0, 50, 100, 200, 400], strict=True)})
            n += 5

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    config = {
        "url": redis_url,
        "checkpoint": str(tmp_path / "ckpt"),
        "fault_file": str(tmp_path / "fault"),
        "counter": str(tmp_path / "count"),
        "deliveries": "deliveries",
        "faults_done": str(tmp_path / "faults_done"),
        "drain": str(tmp_path / "drain"),
    }
    child = subprocess.Popen(
        [sys.executable, __file__, json.dumps(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={
            **os.environ,
            "PYSPARK_ICK_FAULT_FILE": config["fault_file"],
            "PYSPARK_ICK_FAULT_COUNTER": config["counter"],
        },
    )
    assert child.stdout is not None
    lines = []
    try:
        for line in child.stdout:
            lines.append(line.strip())
            if line.startswith("FAULTS DONE"):
                stop.set()
                producer.join()
                Path(config["drain"]).touch()
        child.wait(60)
    finally:
        stop.set()
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, lines
    assert [line for line in lines if line.startswith("CYCLE")] == [f"CYCLE {p}" for p in POINTS]

    deliveries = [json.loads(x) for x in client.lrange("deliveries", 0, -1)]
    by_batch: dict[int, list[Any]] = defaultdict(list)
    seen: set[str] = set()
    for entry in deliveries:
        by_batch[entry["batch"]].append(entry["rows"])
        for id, due, _element, _shard in entry["rows"]:
            assert due >= pushed[id] and due <= entry["at"], f"{id} released before due"
            seen.add(id)
    replays = {b: v for b, v in by_batch.items() if len(v) > 1}
    for batch, versions in replays.items():
        assert all(v == versions[0] for v in versions), f"batch {batch} replayed differently"
    assert replays, "no batch was replayed: the faults did not hit a claimed batch"
    assert seen == set(pushed), f"lost: {sorted(set(pushed) - seen)[:10]}"
    assert d.size() == 0
    for i in range(SHARDS):
        log = d.claim_log(i)
        assert log.last_committed() == log.last_claimed()


# --- the child ----------------------------------------------------------------------


def child(cfg: dict[str, Any]) -> int:
    sys.path.insert(0, str(Path(__file__).parent / "crash"))
    from faults import arm, drain_then_stop, fault, run_cycles

    from pyspark_ick import Dehydrator, connect
    from pyspark_ick.testing import spark_session

    arm(os.environ)  # before Spark starts: its processes inherit the environment

    fault_file, counter = Path(cfg["fault_file"]), Path(cfg["counter"])
    fault_file.write_text("")
    spark = spark_session("dehydrator-crash", **{"spark.sql.shuffle.partitions": "1"})
    spark.sparkContext.setLogLevel("ERROR")
    client = connect(cfg["url"])

    def sink(df: Any, batch_id: int) -> None:
        rows = sorted(
            [r.id, int(r.due.timestamp() * 1000), r.element, r.shard] for r in df.collect()
        )
        client.rpush(
            cfg["deliveries"], json.dumps({"batch": batch_id, "rows": rows, "at": redis_ms(client)})
        )
        fault("after_sink")

    def start(limit: int = 30) -> Any:
        return (
            spark.readStream.format("dehydrator")
            .option("redis.url", cfg["url"])
            .option("dehydrator", NAME)
            .option("shards", SHARDS)
            .option("maxElementsPerTrigger", limit)
            .option("consumerId", "crash-child")
            .load()
            .writeStream.foreachBatch(sink)
            .trigger(processingTime="0 seconds")
            .option("checkpointLocation", cfg["checkpoint"])
            .start()
        )

    specs = [f"{p} 1 {'raise' if p == 'after_sink' else 'exit'}" for p in POINTS]
    if not run_cycles(start, fault_file, counter, specs, 120):
        return 3
    query = start(limit=100_000)
    d = Dehydrator(client, NAME, SHARDS)
    logs = [d.claim_log(i) for i in range(SHARDS)]

    def empty() -> bool:
        return d.size() == 0 and all(log.last_committed() == log.last_claimed() for log in logs)

    return drain_then_stop(query, cfg["drain"], empty, 180)


if __name__ == "__main__":
    sys.exit(child(json.loads(sys.argv[1])))
