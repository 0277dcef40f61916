"""df.writeStream.format("ick"): restarts from a checkpoint and replays change nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from pyspark_ick import IckConfigError, ShardedIck, connect
from pyspark_ick.spark.ick_writer import IckCommitMessage, stream_writer

SCHEMA = StructType([StructField("member", StringType()), StructField("score", DoubleType())])


def pset(client: Any, name: str, shards: int) -> dict[str, float]:
    sharded = ShardedIck(client, name, shards)
    out: dict[str, float] = {}
    for i in range(shards):
        pairs = client.zrange(sharded.shard(i).keys.pset, 0, -1, withscores=True)
        out.update({m.decode(): s for m, s in pairs})
    return out


@pytest.mark.parametrize("where", ["redis_url", "cluster_url"])
@pytest.mark.parametrize("scored", [True, False])
def test_a_replayed_batch_changes_nothing(request, where, scored):
    url = request.getfixturevalue(where)
    client = connect(url)
    options = {"redis.url": url, "ick": "replay", "shards": "3"}
    columns = {"member": pa.array([f"m{i}" for i in range(2500)] + ["m1"])}
    if scored:
        columns["score"] = pa.array([float(i % 7) for i in range(2500)] + [0.5])
    batch = pa.record_batch(columns)
    schema = SCHEMA if scored else StructType(SCHEMA.fields[:1])

    first = stream_writer(options, schema, False).write(iter([batch]))
    queued = pset(client, "replay", 3)
    again = stream_writer(options, schema, False).write(iter([batch]))  # the replay

    assert first == IckCommitMessage(rows=2501, new=2500, changed=int(scored), skipped=0)
    assert again == IckCommitMessage(rows=2501, new=0, changed=0, skipped=0)
    assert pset(client, "replay", 3) == queued
    assert len(queued) == 2500
    client.close()


def test_complete_output_mode_is_refused(redis_url):
    with pytest.raises(IckConfigError, match=r"outputMode\('complete'\) is not supported"):
        stream_writer({"redis.url": redis_url, "ick": "x"}, SCHEMA, True)


def run_available(spark: Any, source: Path, checkpoint: Path, url: str) -> None:
    """One query over the files in ``source`` until all of it is written, then stop."""
    query = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.format("ick")
        .option("redis.url", url)
        .option("ick", "stream")
        .option("shards", 4)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert query.exception() is None


def add_file(folder: Path, name: str, rows: dict[str, float]) -> None:
    lines = "".join(json.dumps({"member": m, "score": s}) + "\n" for m, s in rows.items())
    (folder / f".{name}").write_text(lines)
    (folder / f".{name}").rename(folder / name)  # appears whole to the file source


@pytest.mark.slow
def test_restart_from_checkpoint_loses_nothing_and_adds_nothing_twice(
    spark, cluster_url, cluster_client, tmp_path
):
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    first = {f"doc:{i}": float(i) for i in range(300)}
    second = {f"doc:{i}": float(i) - 1000 for i in range(250, 400)}  # 50 fold lower

    add_file(source, "1.json", first)
    run_available(spark, source, checkpoint, cluster_url)
    assert pset(cluster_client, "stream", 4) == first

    add_file(source, "2.json", second)
    run_available(spark, source, checkpoint, cluster_url)  # restarted: only the new file
    expected = {**first, **second}
    assert pset(cluster_client, "stream", 4) == expected
    assert sorted(
        p.name for p in (checkpoint / "commits").iterdir() if not p.name.startswith(".")
    ) == ["0", "1"]

    # Crash after the write, before the commit log: batch 1 is replayed on restart.
    (checkpoint / "commits" / "1").unlink()
    for crc in (checkpoint / "commits").glob(".1.crc"):
        crc.unlink()
    before = ShardedIck(cluster_client, "stream", 4).stats()
    run_available(spark, source, checkpoint, cluster_url)
    assert (checkpoint / "commits" / "1").exists()  # the batch ran again
    assert pset(cluster_client, "stream", 4) == expected
    assert ShardedIck(cluster_client, "stream", 4).stats() == before
