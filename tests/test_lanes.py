"""The backfill lane (lanes.py): writers mark members as backfill, folding serves a member
in both lanes once as live, and the stream reader fills each batch live first while the
backfill keeps its share (option backfillShare). Driver-side reader tests, no Spark: the
reader's calls in Spark's order, as tests/test_reader_ahead.py makes them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_cli import cli

from pyspark_ick import Ick, ShardedIck, bounds, scripts
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.errors import IckConfigError
from pyspark_ick.keys import IckKeys
from pyspark_ick.lanes import BACKFILL_OFFSET, lane_of, time_of
from pyspark_ick.packing import pack_values
from pyspark_ick.reshard import reshard
from pyspark_ick.retries import RetryPolicy, release_due
from pyspark_ick.spark.ick_reader import STREAM_SCHEMA, stream_reader
from pyspark_ick.testing import wait_until


def queued(client: Any, name: str, shards: int = 1) -> dict[str, float]:
    """Every queued member of the logical Ick with its score."""
    sharded = ShardedIck(client, name, shards)
    out: dict[str, float] = {}
    for i in range(shards):
        pset = sharded.shard(i).keys.pset
        out.update({m.decode(): s for m, s in client.zrange(pset, 0, -1, withscores=True)})
    return out


def test_folding_across_lanes_serves_a_member_once_as_live(any_client: Any) -> None:
    """A backfill member changed live becomes live (its live time); a live member marked
    as backfill stays live; a backfill write of a backfill member keeps its first time.
    Without scores, ickadd_backfill scores with Redis time in the band."""
    ick = ShardedIck(any_client, "fold", 3)
    assert ick.add({"a": 100.0, "b": 100.0}, lane="backfill") == (2, 0)
    assert ick.add({"a": 200.0, "c": 50.0}) == (1, 1)  # a: live now, though 200 > 100
    assert ick.add({"c": 10.0, "b": 90.0}, lane="backfill") == (0, 1)  # c stays live
    assert queued(any_client, "fold", 3) == {
        "a": 200.0,
        "b": 90.0 + BACKFILL_OFFSET,
        "c": 50.0,
    }
    seconds, _ = any_client.time() if hasattr(any_client, "time") else (0, 0)
    ick.add_groups({ick.shard_of("d"): (["d"], None)}, lane="backfill")
    score = queued(any_client, "fold", 3)["d"]
    assert lane_of(score) == "backfill" and abs(time_of(score) - int(seconds)) < 60
    assert time_of(score) != int(time_of(score))  # the ms survive the band's offset


def test_scores_a_lane_cannot_take_are_refused_naming_the_option(client: Any) -> None:
    ick = ShardedIck(client, "band", 1)
    with pytest.raises(IckConfigError, match=r"'x'.*1e\+13.*read as the backfill.*lane"):
        ick.add({"ok": 1.0, "x": BACKFILL_OFFSET})
    with pytest.raises(IckConfigError, match=r"'y'.*lane backfill.*\[0, 1e\+13\)"):
        ick.add({"y": -1.0}, lane="backfill")
    with pytest.raises(IckConfigError, match=r"lane 'later' is not one of live \| backfill"):
        ick.add({"z": 1.0}, lane="later")  # type: ignore[arg-type]
    assert Ick(client, "band").stats() is None  # nothing written
    assert ick.add({"last": float("inf")}) == (1, 0)  # as the gem writes it


def test_the_cli_adds_to_the_backfill_lane(redis_url: str, client: Any) -> None:
    done = cli("add", "cli", "a", "b", "--lane", "backfill", url=redis_url)
    assert done.returncode == 0, done.stderr
    assert "2 new" in done.stdout and "backfill lane" in done.stdout
    assert cli("add", "cli", "b", url=redis_url).returncode == 0
    lanes = {m: lane_of(s) for m, s in queued(client, "cli").items()}
    assert lanes == {"a": "backfill", "b": "live"}
    shown = cli("stats", "cli", url=redis_url).stdout
    assert "lanes: live: 1 queued, oldest" in shown and "backfill: 1 queued" in shown
    assert all(len(line) <= 80 for line in shown.splitlines() if line.startswith("lanes:"))
    report = json.loads(cli("stats", "cli", "--json", url=redis_url).stdout)
    assert [report["totals"]["lanes"][lane]["queued"] for lane in ("live", "backfill")] == [1, 1]
    assert report["totals"]["lanes"]["backfill"]["age_s"] < 60  # its own time's age


def test_spark_writers_mark_the_backfill_lane(spark: Any, redis_url: str, client: Any) -> None:
    """format('ick') with option lane=backfill: a score column's scores move into the band
    (a live member stays live), no score column scores with Redis time in the band, and a
    live score in the band fails naming the column and the option."""
    ShardedIck(client, "spark", 2).add({"a": 5.0})

    def save(rows: list[Any], schema: str, **options: str) -> None:
        writer = spark.createDataFrame(rows, schema).write.format("ick").mode("append")
        writer.options(**{"redis.url": redis_url, "ick": "spark", **options}).save()

    save([("a", 1.0), ("b", 2.0)], "member string, score double", lane="backfill")
    save([("c",)], "member string", lane="backfill")
    scores = queued(client, "spark", 2)
    assert scores["a"] == 5.0 and scores["b"] == 2.0 + BACKFILL_OFFSET
    assert lane_of(scores["c"]) == "backfill"
    with pytest.raises(Exception, match=r"score column 'score'.*read as the backfill.*'lane'"):
        save([("d", 2e13)], "member string, score double")
    with pytest.raises(Exception, match=r"score column 'score'.*option 'lane' backfill"):
        save([("d", -1.0)], "member string, score double", lane="backfill")
    assert "d" not in queued(client, "spark", 2)


def batches(reader: Any, batches_wanted: int, add_live: Any) -> list[list[tuple[str, float]]]:
    """Run the reader in Spark's order (latestOffset of N+1, then commit of N) for up to
    ``batches_wanted`` batches; ``add_live(k)`` runs before batch k. The rows of each."""
    start, done, out = reader.initialOffset(), None, []
    for k in range(batches_wanted):
        add_live(k)
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if done is not None:
            reader.commit(done)
        if end == start:
            break
        rows = [
            (r["member"], r["score"])
            for p in reader.partitions(start, end)
            for b in reader.read(p)
            for r in b.to_pylist()
        ]
        out.append(rows)
        done, start = end, end
    reader.stop()
    return out


def test_the_backfill_keeps_its_share_while_live_work_waits(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """maxMembersPerTrigger 40, backfillShare 0.25, reservations of 7 (a batch is several
    calls, the next one reserved ahead): 200 backfill members and a live backlog that
    producers keep topped up for 12 batches. While live members wait after a batch, the
    batch holds exactly 10 backfill members (never starved, never more), live ones first;
    then the backfill takes whole batches, and everything is delivered once."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 7)
    ick = ShardedIck(client, "share", 1)
    ick.add({f"b{i:03d}": 1000.0 + i for i in range(200)}, lane="backfill")
    live: list[str] = []

    def add_live(k: int) -> None:
        if k < 12:
            fresh = [f"l{k:02d}-{i:02d}" for i in range(60 if k == 0 else 30)]
            ick.add({m: 2000.0 + k for m in fresh})
            live.extend(fresh)

    options = {"redis.url": redis_url, "ick": "share", "maxMembersPerTrigger": "40"}
    reader = stream_reader({**options, "backfillShare": "0.25"}, STREAM_SCHEMA)
    seen = batches(reader, 40, add_live)
    delivered_live = 0
    for rows in seen:
        lanes = [lane_of(s) for _, s in rows]
        assert lanes == sorted(lanes, key=("live", "backfill").index)  # live first
        delivered_live += lanes.count("live")
        backfill = lanes.count("backfill")
        if delivered_live < len(live):  # live members wait after this batch
            assert backfill == 10, (len(seen), lanes)
        else:
            assert len(rows) == 40 or rows == seen[-1]
    members = [m for rows in seen for m, _ in rows]
    assert sorted(members) == sorted(live + [f"b{i:03d}" for i in range(200)])
    assert ick.stats()["total_size"] == 0


def test_without_a_share_the_backfill_waits_for_live_work(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """backfillShare 0: a batch takes live members only while they last (score order)."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 7)
    ick = ShardedIck(client, "none", 1)
    ick.add({f"b{i}": 1.0 for i in range(30)}, lane="backfill")
    ick.add({f"l{i:02d}": 5.0 for i in range(50)})
    options = {"redis.url": redis_url, "ick": "none", "maxMembersPerTrigger": "20"}
    seen = batches(stream_reader({**options, "backfillShare": "0"}, STREAM_SCHEMA), 9, lambda k: 0)
    assert [sum(lane_of(s) == "backfill" for _, s in rows) for rows in seen] == [0, 0, 10, 20]


def test_a_mixed_batch_replays_exactly_after_its_driver_dies(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """A batch of live and backfill members reserved and read, then the driver dies (no
    commit, no stop): the restarted query (same consumerId) replays the logged offsets and
    reads exactly the same rows; the next batch goes on from there."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 7)
    ick = ShardedIck(client, "replay", 2)
    ick.add({f"b{i:02d}": 10.0 + i for i in range(40)}, lane="backfill")
    ick.add({f"l{i:02d}": 20.0 + i for i in range(40)})
    options = {
        "redis.url": redis_url,
        "ick": "replay",
        "shards": "2",
        "maxMembersPerTrigger": "30",
        "backfillShare": "0.3",
        "consumerId": "indexer",
    }

    def read(reader: Any, start: Any, end: Any) -> list[tuple[str, float, int]]:
        return sorted(
            (r["member"], r["score"], r["reservation"])
            for p in reader.partitions(start, end)
            for b in reader.read(p)
            for r in b.to_pylist()
        )

    first = stream_reader(options, STREAM_SCHEMA)
    start = first.initialOffset()
    end = first.latestOffset(start, first.getDefaultReadLimit())
    rows = read(first, start, end)
    assert len(rows) == 30 and sum(lane_of(s) == "backfill" for _, s, _ in rows) == 10
    first._state.leases.halt()  # killed: no heartbeat, no commit, no release

    again = stream_reader(options, STREAM_SCHEMA)
    assert again.initialOffset() == start  # nothing was committed
    assert read(again, start, end) == rows  # Spark replays the logged batch: the same rows
    after = again.latestOffset(end, again.getDefaultReadLimit())
    more = read(again, end, after)
    assert not {m for m, _, _ in more} & {m for m, _, _ in rows}
    again.stop()


def test_the_share_holds_when_a_shard_is_topped_up(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """Two shards, every member in shard 0: its share (20 of 40) is reserved, then topped
    up with what shard 1 left (to 40). The backfill members it reserved first count against
    the topped-up share: 10 of 40, not 5 + 10."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 7)
    ick = ShardedIck(client, "topped", 2)
    names = (f"m{i}" for i in range(10_000))
    zero = [m for m in names if ick.shard_of(m) == 0][:200]
    ick.add({m: 1.0 for m in zero[:100]}, lane="backfill")
    ick.add({m: 5.0 for m in zero[100:]})
    options = {"redis.url": redis_url, "ick": "topped", "shards": "2"}
    limits = {"maxMembersPerTrigger": "40", "backfillShare": "0.25"}
    seen = batches(stream_reader({**options, **limits}, STREAM_SCHEMA), 1, lambda k: 0)
    assert [len(seen[0]), sum(lane_of(s) == "backfill" for _, s in seen[0])] == [40, 10]


def test_reshard_moves_both_lanes_as_they_are(client: Any) -> None:
    """A reshard copies scores: backfill members stay in the band, live ones live, and a
    member in both lanes stays served once, as live; reserved members come back queued."""
    ick = ShardedIck(client, "moved", 2)
    ick.add({f"b{i}": 100.0 + i for i in range(30)}, lane="backfill")
    ick.add({f"l{i}": 200.0 + i for i in range(30)})
    ick.add({"b0": 300.0})  # changed live meanwhile
    held = ick.shard(0).reserve(5)  # a gem-style consumer holds some: put back by reshard
    before = queued(client, "moved", 2) | {m: s for m, s in held}
    reshard(client, "moved", 3)
    after = queued(client, "moved", 3)
    assert after == before
    assert lane_of(after["b0"]) == "live" and lane_of(after["b1"]) == "backfill"
    assert sum(lane_of(s) == "backfill" for s in after.values()) == 29


def test_a_gem_producer_and_consumer_beside_a_backfill(client: Any) -> None:
    """The gem's ickadd (a live time) and ickreserve (ickexchange with its three keys) on an
    Ick with a backfill: the gem's adds are live, a backfill member it re-adds becomes
    live, and its consumer gets every live member first, then the backfill's, with their
    banded scores (docs/ruby.md)."""
    ick = ShardedIck(client, "gem", 1)
    ick.add({f"b{i}": 1000.0 + i for i in range(4)}, lane="backfill")
    keys = list(IckKeys("gem").base)
    scripts.run(client, "ickadd", keys, [pack_values(["2000", "g1", "1500", "b2"])])
    reply = scripts.run(client, "ickexchange", keys, [4, "0"])
    got = [(m.decode(), float(s)) for m, s in zip(reply[1][::2], reply[1][1::2], strict=True)]
    assert got == [
        ("b2", 1500.0),
        ("g1", 2000.0),
        ("b0", 1000.0 + BACKFILL_OFFSET),
        ("b1", 1001.0 + BACKFILL_OFFSET),
    ]


def test_a_retried_and_a_redriven_member_keep_their_lane(client: Any) -> None:
    """A member the sink fails on comes back with the score of its failed delivery: a
    backfill member's retry and its re-driven dead letter stay in the backfill lane."""
    ick = ShardedIck(client, "again", 1)
    ick.add({"b": 5.0}, lane="backfill")
    ick.add({"l": 6.0})
    assert ick.shard(0).reserve(2) == [("l", 6.0), ("b", 5.0 + BACKFILL_OFFSET)]
    ick.fail({"b": "boom", "l": "boom"}, RetryPolicy(backoff_ms=1, backoff_max_ms=1))
    wait_until(lambda: release_due(client, [IckKeys("again")], "Ick 'again'").released == 2)
    assert queued(client, "again") == {"l": 6.0, "b": 5.0 + BACKFILL_OFFSET}
    assert ick.shard(0).reserve(2) == [("l", 6.0), ("b", 5.0 + BACKFILL_OFFSET)]
    ick.fail({"b": "dead"}, RetryPolicy(max_attempts=1))
    letters = DeadLetters(ick)
    assert letters.redrive(["b"]) == 1
    assert lane_of(queued(client, "again")["b"]) == "backfill"


def test_available_now_delivers_both_lanes_within_its_budget(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """Trigger.AvailableNow's budget counts both lanes: 20 live and 30 backfill members,
    batches of 20 with a share of 0.25, live first, 50 in all. A live member added after
    the budget was taken goes first too (the lower score): one backfill member is left for
    the next run."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 7)
    ick = ShardedIck(client, "now", 1)
    ick.add({f"b{i:02d}": 1.0 for i in range(30)}, lane="backfill")
    ick.add({f"l{i:02d}": 5.0 for i in range(20)})
    options = {"redis.url": redis_url, "ick": "now", "maxMembersPerTrigger": "20"}
    reader = stream_reader({**options, "backfillShare": "0.25"}, STREAM_SCHEMA)
    reader.prepareForTriggerAvailableNow()
    ick.add({"late": 9.0})  # after the budget was taken
    seen = batches(reader, 9, lambda k: 0)
    lanes = [[lane_of(s) for _, s in rows] for rows in seen]
    assert [(b.count("live"), b.count("backfill")) for b in lanes] == [(15, 5), (6, 14), (0, 10)]
    assert [lane_of(s) for s in queued(client, "now").values()] == ["backfill"]


def test_live_members_added_while_a_batch_is_read_go_into_the_next_one(
    client: Any, redis_url: str, monkeypatch: Any
) -> None:
    """While a backfill drains, the job ahead reserves the next batch as the executors read
    this one. It takes no more backfill than the share: live members added meanwhile go
    into the next batch (its top-up), not the one after, and the backfill fills the rest."""
    monkeypatch.setattr(bounds, "MOVES_PER_CALL", 7)
    ick = ShardedIck(client, "meanwhile", 1)
    ick.add({f"b{i:03d}": 1.0 + i for i in range(200)}, lane="backfill")
    options = {"redis.url": redis_url, "ick": "meanwhile", "maxMembersPerTrigger": "20"}
    reader = stream_reader({**options, "backfillShare": "0.25"}, STREAM_SCHEMA)
    start = reader.initialOffset()
    first = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert reader._ahead is not None
    reader._ahead.result()  # the job ahead is done: the next batch is reserved
    ick.add({f"l{i}": 5.0 for i in range(10)})  # while batch 1 is read
    second = reader.latestOffset(first, reader.getDefaultReadLimit())
    rows = [
        r for p in reader.partitions(first, second) for b in reader.read(p) for r in b.to_pylist()
    ]
    assert [lane_of(r["score"]) for r in rows] == ["live"] * 10 + ["backfill"] * 10
    reader.stop()
