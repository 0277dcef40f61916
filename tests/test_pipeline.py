"""examples/pipeline runs under `spark-pipelines run` (Spark Declarative Pipelines, issue 26
part 3): a small Ick drained into the streaming table `deliveries`, every member once, the Ick
empty afterwards, each member parked in the re-check dehydrator, and the rehydrate flow (a
dehydrator source into an ick sink) started and finished with nothing due.

spark-pipelines starts its own local Spark Connect server; SPARK_TESTING=1 makes it bind an
ephemeral port (and its client find it) instead of the fixed 15002, on loopback only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyspark_ick import Dehydrator, Ick

pytestmark = pytest.mark.slow  # spark-pipelines in a process of its own

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pipeline"
MEMBERS = {f"doc-{i:03d}": float(i) for i in range(60)}


def spark_pipelines() -> Path:
    pyspark = pytest.importorskip("pyspark")
    pytest.importorskip("pyspark.pipelines", reason="Declarative Pipelines need pyspark 4.1+")
    pytest.importorskip("yaml", reason="spark-pipelines needs PyYAML (pyspark[pipelines])")
    return Path(pyspark.__file__).parent / "bin" / "spark-pipelines"


def test_the_pipeline_drains_the_ick_into_a_streaming_table(
    tmp_path: Path, redis_url: str, client: object
) -> None:
    cli = spark_pipelines()
    Ick(client, "docs").add(MEMBERS)  # type: ignore[arg-type]
    here = tmp_path / "pipeline"
    shutil.copytree(EXAMPLE, here)  # its tables and checkpoints stay in tmp_path
    spec = here / "spark-pipeline.yml"
    lines = spec.read_text().splitlines()
    assert "storage: file:///tmp/ick_pipeline/storage" in lines
    spec.write_text(
        "\n".join(
            f"storage: {(here / 'storage').as_uri()}" if line.startswith("storage:") else line
            for line in lines
        )
    )
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_TESTING": "1",
    }
    started = time.monotonic()
    done = subprocess.run(
        [
            "bash",
            str(cli),
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "run",
        ],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    took = time.monotonic() - started
    (tmp_path / "spark-pipelines.log").write_text(done.stdout + done.stderr)
    log = "\n".join(
        line
        for line in (done.stdout + done.stderr).splitlines()
        if "Flow" in line or "Run is" in line or "Error" in line
    )[-6000:]
    assert done.returncode == 0, log
    assert "Run is COMPLETED" in done.stdout, log
    print(f"spark-pipelines run took {took:.0f} s")

    import pyarrow.parquet as pq

    table = pq.read_table(here / "spark-warehouse" / "deliveries")
    delivered = table.column("member").to_pylist()
    assert sorted(delivered) == sorted(MEMBERS), "every member exactly once"
    assert dict(zip(delivered, table.column("score").to_pylist(), strict=True)) == MEMBERS
    stats = Ick(client, "docs").stats()  # type: ignore[arg-type]
    assert stats is None or stats["total_size"] == 0, stats  # delivered and acknowledged
    parked = Dehydrator(client, "docs_recheck")  # type: ignore[arg-type]
    assert all(parked.look(member) == member for member in MEMBERS)
