"""A real Spark standalone cluster: a master and one worker started with pyspark's own
bin/spark-class on 127.0.0.1, and a job spark-submitted to it in client mode (as
examples/spark-submit.sh does) that writes 20,000 members into 4 shards with format("ick")
and drains them with a Trigger.AvailableNow readStream. Every member is delivered exactly
once, the Ick is empty afterwards, and the tasks ran in the worker's executor, not in the
driver. About a minute; every process is ended in the end, whatever happens."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from spark_cluster import StandaloneCluster, submit

from pyspark_ick import ShardedIck, connect

pytestmark = pytest.mark.slow  # a standalone Spark cluster

JOB = Path(__file__).resolve().parent / "deploy_job.py"
COUNT, SHARDS = 20_000, 4


def test_spark_submit_to_a_standalone_cluster(redis_url: str, tmp_path: Path) -> None:
    started = time.monotonic()
    cluster = StandaloneCluster(tmp_path / "cluster", workers=1, cores=2, memory="1g")
    try:
        cluster.start(timeout=60)
        done = submit(
            JOB,
            redis_url,
            "deployed",
            str(COUNT),
            str(SHARDS),
            str(tmp_path / "ckpt"),
            master=cluster.url,
            conf_dir=cluster.directory / "conf",
            # the Python of every node: this interpreter (pyspark-ick installed in it)
            env={"PYSPARK_PYTHON": sys.executable},
            conf={"spark.executor.memory": "1g", "spark.sql.shuffle.partitions": "4"},
            timeout=150,
            log=tmp_path / "submit.log",
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        assert done.returncode == 0 and lines, done.stdout[-4000:] + cluster.logs()[-3000:]
        result = json.loads(lines[-1][len("RESULT ") :])
        executor_logs = cluster.executor_logs()
    finally:
        cluster.stop()
    took = time.monotonic() - started
    print(f"standalone cluster: {result} in {took:.0f} s")

    assert result["master"] == cluster.url
    assert result["written"] == COUNT
    # every member exactly once, in several AvailableNow batches, and nothing left behind
    assert result["delivered"] == result["distinct"] == COUNT, result
    assert result["repeated"] == 0 and len(result["batches"]) >= COUNT // 5000
    assert result["left"] == 0
    assert ShardedIck(connect(redis_url), "deployed", SHARDS).stats()["total_size"] == 0
    # the tasks ran on the worker: one executor besides the driver, running in the
    # worker's work dir (app-*/0), and its log shows the finished tasks
    worker_dir = str(cluster.worker_dir(0))
    assert result["executors"] == 2, result
    assert result["task_cwds"] and all(c.startswith(worker_dir) for c in result["task_cwds"])
    assert not result["driver_cwd"].startswith(worker_dir)
    assert executor_logs.count("Finished task") >= 4 + 8, executor_logs[-3000:]
