"""An upgrade under a running pipeline: what release 0.1.0 left in Redis (queued and
reserved members, a batch in flight with its checkpoint, members reserved ahead of it, a
dehydrator claim in flight, parked elements, a gem-style reservation, the dead query's
leases: tests/upgrade/release_0_1_0, written by tests/upgrade/make_state.py with that
release) keeps working with this one. The in-flight batches replay exactly, counted as
their first delivery here; everything queued is delivered; nothing is lost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import Sink

from pyspark_ick import Dehydrator, Ick, ShardedIck, layout
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import wait_until

pytestmark = pytest.mark.slow  # a pipeline upgraded under way from release 0.1.0's state

STATE = Path(__file__).resolve().parent / "upgrade" / "release_0_1_0"
OWNER = "indexer"  # the consumerId of the release's queries


def load(client: Any, dump: dict[str, Any]) -> None:
    """Write every key of ``dump`` (make_state.dump's form) into an empty database, as if
    now were when it was made: due times move with the clock (an element parked for an
    hour is still an hour away), read off the leases' last renewal."""

    def b(text: str) -> bytes:
        return text.encode("latin-1")

    made = max(int(e["value"]["renewed"]) for k, e in dump.items() if k.endswith("/lease"))
    seconds, micros = client.time()
    shift = int(seconds) * 1000 + int(micros) // 1000 - made

    for key, entry in dump.items():
        kind, value = entry["type"], entry["value"]
        if kind == "string":
            client.set(b(key), b(value))
        elif kind == "hash":
            client.hset(b(key), mapping={b(k): b(v) for k, v in value.items()})
        elif kind == "zset":
            moved = shift if key.endswith("/due") else 0
            client.zadd(b(key), {b(m): float(s) + moved for m, s in value})
        elif kind == "list":
            client.rpush(b(key), *map(b, value))
        elif kind == "set":
            client.sadd(b(key), *map(b, value))


def start(spark: Any, fmt: str, options: dict[str, str], sink: Sink, ckpt: Path) -> Any:
    return (
        spark.readStream.format(fmt)
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="100 milliseconds")
        .start()
    )


def test_what_release_0_1_0_left_keeps_working(spark, client, redis_url, tmp_path):
    dump = json.loads((STATE / "redis.json").read_text())
    assert not any(key.endswith("/layout") for key in dump)  # 0.1.0 records no layout
    load(client, dump)
    expected = json.loads((STATE / "expected.json").read_text())
    assert expected["release"] == "0.1.0"
    for name in ("ckpt_ick", "ckpt_dh"):
        shutil.copytree(STATE / name, tmp_path / name)
    common = {"redis.url": redis_url, "shards": "2", "consumerId": OWNER}

    # the Ick: the batch in flight replays exactly, then everything queued is delivered
    sink = Sink()
    ick_options = {**common, "ick": "docs", "maxMembersPerTrigger": "100"}
    query = start(spark, "ick", ick_options, sink, tmp_path / "ckpt_ick")
    docs = ShardedIck(client, "docs", 2)
    wanted = {  # what was queued or reserved (the release's batch 0 was committed)
        member
        for key, entry in dump.items()
        if key.startswith("docs:") and key.endswith(("/pset", "/cset"))
        for member, _ in entry["value"]
    }
    assert len(wanted) == 201
    try:
        wait_until(
            lambda: docs.stats()["total_size"] == 0 and sink.batches_since(0) > 1,
            timeout=120,
            what="the Ick drained",
        )
    finally:
        query.stop()
    first = sink.snapshot()[0]
    assert first.batch == 1  # the replay of the batch the release left in flight
    replayed = sorted(
        [r.member, str(r.score), str(r.shard), str(r.reservation)] for r in first.rows
    )
    assert replayed == expected["ick_in_flight"]
    assert first.deliveries == {1} and {r.attempt for r in first.rows} == {1}
    delivered = {r.member for d in sink.snapshot() for r in d.rows}
    assert delivered == wanted
    assert sum(DeadLetters(docs).count()) == 0
    for master in ("docs:0", "docs:1"):  # every reservation closed, nothing left behind
        log = ReservationLog(client, master)
        reserved, committed = log.counters()
        assert reserved == committed > 2
        left = {k.decode() for k in client.keys(f"{master}*")}
        # the freshness histogram stays: it counted the commits of this release
        assert left == {master, log.keys.rlog, log.keys.lease, log.keys.fresh}, left

    # the dehydrator: the claim in flight replays exactly, then the due elements come
    sink = Sink()
    dh_options = {**common, "dehydrator": "parked", "maxElementsPerTrigger": "30"}
    query = start(spark, "dehydrator", dh_options, sink, tmp_path / "ckpt_dh")
    parked = Dehydrator(client, "parked", 2)
    claimed = {  # in the open claims: the batch in flight and the one claimed ahead of it
        entry["value"][i]
        for key, entry in dump.items()
        if key.startswith("parked:") and "/claim:" in key
        for i in range(0, len(entry["value"]), 3)
    }
    assert len(claimed) == 50
    try:
        wait_until(
            lambda: {r.id for d in sink.snapshot() for r in d.rows} == claimed,
            timeout=120,
            what="every due element released",
        )
    finally:
        query.stop()
    first = sink.snapshot()[0]
    assert first.batch == 1 and first.deliveries == {1}
    replayed = sorted([r.id, r.element, str(r.shard)] for r in first.rows)
    assert replayed == sorted([row[0], row[1], row[3]] for row in expected["dehydrator_in_flight"])
    assert parked.size() == 40  # the ones due in an hour stay parked

    # the first reader of this release recorded its layout; nothing blocks a rollback
    for name, kind in (("docs", "ick"), ("parked", "dehydrator")):
        assert layout.recorded(client, name, kind, name) == layout.LAYOUT == 2
        assert layout.blockers(client, name, kind, 2, name) == []

    # the gem-style reservation: the plain client reserves and commits as before
    plain = Ick(client, "plain")
    batch = plain.reserve(10)
    assert [m for m, _ in batch] == [f"p{i}" for i in range(10)]
    assert plain.commit(*(m for m, _ in batch)) == 10
    assert plain.stats()["total_size"] == 0
