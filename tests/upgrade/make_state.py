"""Writes what a release leaves in Redis under a running pipeline, for the upgrade test.

Run with the package of the release to capture on the PYTHONPATH (a checkout of it), e.g.
for release 0.1.0 (commit 8bb1fbe)::

    git worktree add --detach /tmp/rel-0.1.0 8bb1fbe
    PYTHONPATH=/tmp/rel-0.1.0/connector python tests/upgrade/make_state.py \
        tests/upgrade/release_0_1_0

It uses only what that release has (``ShardedIck``, ``Ick``, ``Dehydrator``, the two
stream sources, ``Lease``) and writes into DIR: ``redis.json`` (every key: type and value,
bytes as latin-1 text), the checkpoints of two stream queries that died with a batch in
flight (``ckpt_ick``, ``ckpt_dh``: the batch's offsets logged, no commit), and
``expected.json`` (what each in-flight batch delivered, which a replay must deliver
again). The state: Ick ``docs`` (2 shards) with members queued, reserved by the in-flight
batch and re-added while in flight, and the dead query's leases still held; Ick ``plain``
with members reserved by a gem-style consumer (``Ick.reserve``); dehydrator ``parked``
(2 shards) with elements due, not due and claimed by the in-flight batch.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyspark_ick
from pyspark_ick import Dehydrator, Ick, ShardedIck, connect
from pyspark_ick.keys import DehydratorKeys, IckKeys, shard_names
from pyspark_ick.lease import Lease
from pyspark_ick.testing import spark_session, start_binary

OWNER = "indexer"


class Stop(RuntimeError):
    """Raised by the sink in the batch that is left in flight."""


def run_until_in_flight(spark: Any, fmt: str, options: dict[str, str], ckpt: Path) -> list:
    """Run a query whose sink fails on its second batch (after recording it): that batch's
    offsets are logged and not committed. Returns the rows of that batch, sorted."""
    seen: list[list] = []

    def sink(batch: Any, batch_id: int) -> None:
        rows = sorted([list(map(str, r)) for r in batch.collect()])
        if batch_id == 1:
            seen.append(rows)
            raise Stop("the batch left in flight")

    reader = spark.readStream.format(fmt)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.awaitTermination(120)
    except Exception:  # noqa: BLE001 - the sink's Stop ends the query
        pass
    finally:
        query.stop()
    assert seen, f"{fmt}: no batch was left in flight"
    return seen[0]


def dump(client: Any) -> dict[str, Any]:
    """Every key of the database: its type and value (bytes as latin-1 text)."""

    def s(value: bytes) -> str:
        return value.decode("latin-1")

    out: dict[str, Any] = {}
    for raw in sorted(client.keys("*")):
        kind = client.type(raw).decode()
        if kind == "string":
            value: Any = s(client.get(raw))
        elif kind == "hash":
            value = {s(k): s(v) for k, v in client.hgetall(raw).items()}
        elif kind == "zset":
            value = [[s(m), repr(score)] for m, score in client.zrange(raw, 0, -1, withscores=True)]
        elif kind == "list":
            value = [s(v) for v in client.lrange(raw, 0, -1)]
        elif kind == "set":
            value = sorted(s(v) for v in client.smembers(raw))
        else:
            raise ValueError(f"{raw!r}: type {kind}")
        out[s(raw)] = {"type": kind, "value": value}
    return out


def main(out: Path) -> None:
    server = start_binary()
    work = Path(tempfile.mkdtemp())
    try:
        url = server.url
        client = connect(url)
        docs = ShardedIck(client, "docs", 2)
        docs.add({f"doc:{i:03}": float(1000 + i) for i in range(300)})
        spark = spark_session("make-upgrade-state")
        common = {"redis.url": url, "shards": "2", "consumerId": OWNER}
        ick_rows = run_until_in_flight(
            spark,
            "ick",
            {**common, "ick": "docs", "maxMembersPerTrigger": "100"},
            work / "ckpt_ick",
        )
        docs.add({"doc:150": 5.0, "doc:299": 2000.0, "doc:new": 3000.0})  # while in flight

        parked = Dehydrator(client, "parked", 2)
        ids = [f"job:{i:03}" for i in range(120)]
        parked.park(ids, [f"payload {i}" for i in ids], [0] * 80 + [3_600_000] * 40)
        dh_rows = run_until_in_flight(
            spark,
            "dehydrator",
            {**common, "dehydrator": "parked", "maxElementsPerTrigger": "30"},
            work / "ckpt_dh",
        )
        spark.stop()

        # the dead query's leases, as a kill -9 leaves them (a clean stop releases them)
        for master in shard_names("docs", 2):
            Lease(client, IckKeys(master).lease, master).acquire(OWNER, 60_000)
        for master in shard_names("parked", 2):
            Lease(client, DehydratorKeys(master).lease, master).acquire(OWNER, 60_000)

        plain = Ick(client, "plain")
        plain.add({f"p{i}": float(i) for i in range(10)})
        plain.reserve(4)  # a gem-style consumer's reservation (the cset, no log)

        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        (out / "redis.json").write_text(json.dumps(dump(client), indent=1, sort_keys=True))
        for name in ("ckpt_ick", "ckpt_dh"):
            shutil.copytree(work / name, out / name, ignore=shutil.ignore_patterns(".*.crc"))
        expected = {
            "release": pyspark_ick.__version__,
            "ick_in_flight": ick_rows,
            "dehydrator_in_flight": dh_rows,
        }
        (out / "expected.json").write_text(json.dumps(expected, indent=1))
        client.close()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
