"""The freshness histogram: each commit counts its members' waits in the commit's own
script, per lane, once; scores that are no Unix time are counted apart (no Spark)."""

from __future__ import annotations

import json
import math
import re

import pytest

from pyspark_ick import Ick, lua
from pyspark_ick.freshness import BUCKETS, LE, SLOTS, Histogram, read
from pyspark_ick.lanes import backfill_score
from pyspark_ick.observe import server_time
from pyspark_ick.reservations import ReservationLog

# waits (s) far from every bucket bound, so the test's own run time cannot move them
LIVE_WAITS = (1.5, 7.0, 45.0, 200.0, 7200.0)
LIVE_BUCKETS = {"2.5": 1, "10": 1, "60": 1, "300": 1, "+Inf": 1}
TIGHT = 5.0  # the most seconds a test takes between reading Redis's clock and committing


def counts(hist: Histogram) -> dict[str, int]:
    return {le: n for le, n in zip(LE, hist.counts, strict=True) if n}


def queue_known(ick: Ick, now: float) -> dict[str, float]:
    """Members whose waits at ``now`` are known: live ones, one backfill, two untimed."""
    scores = {f"live:{w}": now - w for w in LIVE_WAITS}
    scores["back:45"] = backfill_score(now - 45.0)
    scores["priority"] = 5.0  # a user's own priority: no time
    scores["millis"] = now * 1000  # a time in milliseconds: no time in seconds
    ick.add(scores)
    return scores


def assert_known(client, master: str, now: float) -> None:
    fresh = read(client, master, server_time(client))
    live, back = fresh.total["live"], fresh.total["backfill"]
    assert counts(live) == LIVE_BUCKETS
    assert counts(back) == {"60": 1}
    assert live.untimed == 2 and back.untimed == 0
    assert sum(LIVE_WAITS) <= live.sum < sum(LIVE_WAITS) + len(LIVE_WAITS) * TIGHT
    assert 45.0 <= back.sum < 45.0 + TIGHT
    assert counts(fresh.window["live"]) == LIVE_BUCKETS  # committed this minute


def test_stream_commit_counts_each_wait_once(client):
    log = ReservationLog(client, "f")
    token = log.lease.acquire("me", 30_000)
    now = server_time(client)
    queue_known(Ick(client, "f"), now)
    last, moved, _ = log.reserve(None, 0, token)
    assert moved == 8
    assert read(client, "f", now).total["live"].count == 0  # counted at commit, not before
    assert log.commit(last, token) == last
    assert_known(client, "f", now)
    assert log.commit(last, token) == last  # a replayed commit closes nothing...
    ReservationLog(client, "f").commit(last, token)  # ...nor does a fresh one's
    assert_known(client, "f", now)  # ...and counts nothing


def test_stream_commit_leaves_out_members_handed_back(client):
    log = ReservationLog(client, "h")
    token = log.lease.acquire("me", 30_000)
    now = server_time(client)
    Ick(client, "h").add({"ok": now - 7.0, "bad": now - 7.0})
    last, _, _ = log.reserve(None, 0, token)
    log.fail(last, 0, {"bad": "boom"})
    log.commit(last, token)
    assert read(client, "h", now).total["live"].count == 1  # "bad" waits for its retry


def test_client_commit_counts_each_wait_once(client):
    ick = Ick(client, "c")
    now = server_time(client)
    scores = queue_known(ick, now)
    assert len(ick.reserve(20)) == 8
    assert ick.commit(*scores) == 8
    assert_known(client, "c", now)
    assert ick.commit(*scores) == 0  # committed before: not in the cset, not counted
    ick.exchange(0, commit=list(scores))
    assert_known(client, "c", now)


def test_window_is_the_last_minutes(client):
    ick = Ick(client, "w")
    now = server_time(client)
    ick.add({"a": now - 1.5})
    ick.reserve(1)
    ick.commit("a")
    later = read(client, "w", now + SLOTS * 60 + 1)
    assert later.total["live"].count == 1 and later.window["live"].count == 0
    assert read(client, "w", now).summary()["fresh_count"] == 1


def test_an_ick_that_never_committed_reads_zeros(client):
    fresh = read(client, "never", server_time(client))
    assert fresh.total["live"].count == 0 and fresh.summary()["fresh_p99_s"] is None


def test_lua_buckets_are_the_pythons():
    prelude = (lua.lua_dir() / "_prelude.lua").read_text()
    table = re.search(r"local ICK_FRESH = \{(.*?)\}", prelude, re.S)
    numbers = re.search(r"local ICK_FRESH_S = \{(.*?)\}", prelude, re.S)
    slots = re.search(r"local FRESH_SLOTS = (\d+)", prelude)
    assert table and numbers and slots
    assert tuple(re.findall(r"'([^']+)'", table.group(1))) == LE
    assert tuple(float(x) for x in numbers.group(1).split(",")) == BUCKETS[:-1]
    assert int(slots.group(1)) == SLOTS


@pytest.mark.parametrize(
    ("counts_", "q", "expected"),
    [
        ({"1": 10}, 0.5, 0.75),  # halfway through the (0.5, 1] bucket
        ({"0.1": 1, "10": 99}, 0.99, 10 - 5 * 1 / 99),
        ({"+Inf": 4}, 0.99, 3600.0),  # the +Inf bucket answers its lower bound
    ],
)
def test_quantile_interpolates_as_prometheus(counts_, q, expected):
    hist = Histogram([counts_.get(le, 0) for le in LE])
    assert math.isclose(hist.quantile(q) or 0, expected)
    assert len(BUCKETS) == len(LE)


def test_an_ick_release_0_1_left_reads_as_zeros(client):
    from test_upgrade import STATE, load

    from pyspark_ick.observe import summary

    load(client, json.loads((STATE / "redis.json").read_text()))
    report = summary(client, "docs", 2)  # two shards, queued and reserved, no fresh hash
    assert report["totals"]["queued"] + report["totals"]["reserved"] > 0
    for row in [*report["rows"], report["totals"]]:
        assert (row["fresh_count"], row["fresh_p50_s"], row["fresh_p99_s"]) == (0, None, None)
    assert all(
        h["counts"] == [0] * len(LE) for r in report["rows"] for h in r["freshness"].values()
    )


def test_stats_shows_the_window_in_80_columns_and_del_removes_the_histogram(client):
    import io

    from rich.console import Console

    from pyspark_ick import ShardedIck
    from pyspark_ick.cli.output import stats_table
    from pyspark_ick.keys import IckKeys
    from pyspark_ick.observe import summary

    docs = ShardedIck(client, "docs80", 2)
    now = server_time(client)
    docs.add({f"doc:{i}": now - 45.0 for i in range(10)})
    for i in range(2):
        shard = docs.shard(i)
        shard.commit(*[m for m, _ in shard.reserve(10)])
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(stats_table(summary(client, "docs80", 2)))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    total = [line for line in lines if "total" in line][-1]  # the freshness table's totals
    # ten waits of 45 s, the (30, 60] s bucket: p50 and p99 interpolated in it
    assert "10" in total and "45.0s" in total and total.count("59.7s") == 2
    assert all(client.exists(IckKeys(k).fresh) for k in ("docs80:0", "docs80:1"))
    docs.delete()
    assert not any(client.exists(IckKeys(k).fresh) for k in ("docs80:0", "docs80:1"))
