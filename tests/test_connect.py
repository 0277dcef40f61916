"""Spark Connect: a local Connect server (pyspark's sbin/start-connect-server.sh) and a
client in a process of its own (tests/connect_job.py) using format("ick") and
format("dehydrator") without register(): a batch write, a writeStream, readStream ->
foreachBatch (every member delivered exactly once), the dehydrator sink and the dehydrator
readStream. The server's Python is this interpreter, with the `connect` extra's packages
(foreachBatch runs there and talks back to the server over gRPC). About a minute; the
server's process group is ended in the end, whatever happens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_cluster import ConnectServer

from pyspark_ick import Dehydrator, ShardedIck, connect
from pyspark_ick.keys import IckKeys, shard_names

pytestmark = pytest.mark.slow  # a Spark Connect server

JOB = Path(__file__).resolve().parent / "connect_job.py"
BATCH, STREAMED, PARKED = 5000, 1000, 300


def members(client, name: str, shards: int) -> set[str]:
    """The queued members of every shard of Ick ``name``."""
    return {
        m.decode()
        for master in shard_names(name, shards)
        for m in client.zrange(IckKeys(master).pset, 0, -1)
    }


def test_connect_client_writes_streams_and_drains(redis_url: str, tmp_path: Path) -> None:
    started = time.monotonic()
    server = ConnectServer(tmp_path / "server", python=sys.executable)
    try:
        server.start(timeout=90)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS")
        }
        done = subprocess.run(
            [sys.executable, str(JOB), server.url, redis_url, str(tmp_path / "work")],
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
        )
        server_log = server.log.read_text(errors="replace")
    finally:
        server.stop()
    took = time.monotonic() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (
        done.stdout[-2000:] + done.stderr[-4000:] + server_log[-3000:]
    )
    assert "connect" in json.loads(lines[-1][len("RESULT ") :])["session"]

    client = connect(redis_url)
    # readStream -> foreachBatch drained the batch-written Ick: each member exactly once
    delivered = {k.decode(): int(v) for k, v in client.hgetall("c_delivered").items()}
    assert len(delivered) == BATCH and set(delivered.values()) == {1}
    assert set(delivered) == {f"doc:{i}" for i in range(BATCH)}
    batches = [b.decode().split(":") for b in client.lrange("c_batches", 0, -1)]
    assert sum(int(n) for _, n in batches) == BATCH and all(int(n) <= 2000 for _, n in batches)
    assert ShardedIck(client, "c_batch", 4).stats()["total_size"] == 0
    # the writeStream into an Ick
    assert members(client, "c_stream", 2) == {f"s:{i}" for i in range(STREAMED)}
    # the dehydrator: the stream sink parked every file row for an hour, the batch sink's
    # due elements went through the dehydrator readStream into an Ick, once each
    assert Dehydrator(client, "c_later", 2).size() == STREAMED
    assert members(client, "c_back", 2) == {f"p:{i}" for i in range(PARKED)}
    assert Dehydrator(client, "c_parked", 2).size() == 0
    print(f"Spark Connect: {len(batches)} foreachBatch batches, took {took:.0f} s")
