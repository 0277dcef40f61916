"""No call of the connector holds Redis long: each one touches a bounded number of members.

Redis runs one command at a time, so one long script stalls every other client of a shared
Redis. SLOWLOG, set to log every command, records each call with its arguments; the bound
of each script is in its arguments (``ITEMS_PER_CALL``; ``MOVES_PER_CALL`` for reserve and
claim; the manifests named), so the test checks the arguments of every call made by a
200,000-member drain at default options, a snapshot read and a dehydrator release.
Durations depend on the machine; the count of members a call may touch does not, so this
cannot flake (bench/bench_neighbour.py measures the milliseconds).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from console_support import Session, bury, console
from pyspark.sql.functions import col
from support import stream

from pyspark_ick import Dehydrator, ShardedIck, bounds, lua
from pyspark_ick.bounds import KEYS_PER_CALL
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.numbered_log import COMMIT_ARGV, RESERVE_ARGV
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.retries import RetryPolicy, release_due
from pyspark_ick.spark.ick_reader import SNAPSHOT_SCHEMA

PER_CALL = bounds.ITEMS_PER_CALL
LIMIT, MOVES = RESERVE_ARGV.index("limit") + 1, RESERVE_ARGV.index("per_call") + 1
COMMIT = COMMIT_ARGV.index("per_call") + 1
MOVERS = {
    "rlog_reserve": bounds.MOVES_PER_CALL,
    "dh_claim": bounds.MOVES_PER_CALL,
    "ick_requeue": bounds.MOVES_PER_CALL,
}
LUA = Path(lua.lua_dir())
NAMES = {lua.sha(p.stem): p.stem for p in LUA.glob("*.lua") if not p.stem.startswith("_")}


def bound(script: str, keys: list[str], args: list[str]) -> int:
    """How many members (elements) one call of ``script`` may touch, from its arguments."""

    def arg(i: int) -> int:  # ARGV[i], 1-based as in the Lua; absent: no bound
        return int(args[i - 1]) if i <= len(args) else 10**9

    def moves() -> int:
        return arg(MOVES) if arg(LIMIT) < 0 else min(arg(LIMIT), arg(MOVES))

    limits: dict[str, Callable[[], int]] = {
        "rlog_reserve": moves,
        "dh_claim": moves,
        "rlog_commit": lambda: arg(COMMIT),  # manifests while their sizes fit, at least one
        "log_read": lambda: arg(3),
        "ick_range": lambda: arg(3),
        "ick_holders": lambda: max(arg(2), len(args) - 2),  # manifests read, members sought
        "dh_commit": lambda: 0 if len(keys) <= 2 + KEYS_PER_CALL else PER_CALL * len(keys),
        "dh_take": lambda: arg(2),
        "due_count": lambda: 0,
        "lease": lambda: 0,
        "lease_info": lambda: 0,
        "dh_info": lambda: 0,
        "dh_peek": lambda: arg(1),
        "ick_requeue": lambda: arg(5),  # cset members folded back; manifests: UNLINK
        "rlog_info": lambda: 0,
        "shardcount": lambda: 0,
        "layout": lambda: 0,
        "ickstats": lambda: 0,
        "ickpeek": lambda: arg(1),
        "dead_letters": lambda: max(arg(2), len(args) - 2),  # the oldest, or those named
        "retry_due": lambda: 2 * arg(1),  # due retries moved, then pending ones looked at
    }
    if script not in limits:
        raise AssertionError(f"script {script} is not known to do bounded work")
    return limits[script]()


def calls(client: redis.Redis) -> Iterator[tuple[str, int, float]]:
    """(command or script, members it may touch, ms) of every logged call."""
    for _, _, micros, command, *_ in client.execute_command("SLOWLOG", "GET", -1):
        words = [w.decode() for w in command]
        more = re.fullmatch(r"\.\.\. \((\d+) more arguments\)", words[-1])
        if more:  # SLOWLOG keeps 31 arguments and counts the rest
            words = words[:-1] + [""] * int(more[1])
        name = words[0].upper()
        if name == "EVALSHA":
            script = NAMES.get(words[1], words[1])
            numkeys = int(words[2])
            keys, args = words[3 : 3 + numkeys], words[3 + numkeys :]
            yield script, bound(script, keys, args), micros / 1000
        elif name == "ZSCAN":
            yield name, int(words[words.index("COUNT") + 1]), micros / 1000
        elif name in ("ZMSCORE", "HMGET"):
            yield name, len(words) - 2, micros / 1000
        else:
            yield name, 0, micros / 1000


@pytest.fixture
def logged(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the test server, which logs every command with its arguments."""
    raw = redis.Redis.from_url(redis_url)
    old = raw.config_get("slowlog-*")
    raw.config_set("slowlog-log-slower-than", 0)
    raw.config_set("slowlog-max-len", 1_000_000)
    yield raw
    raw.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
    raw.config_set("slowlog-max-len", old["slowlog-max-len"])
    raw.slowlog_reset()
    raw.close()


def check(client: redis.Redis) -> Counter[str]:
    """Every script call and ZSCAN since the last SLOWLOG RESET touched at most PER_CALL
    members (a manifest holds at most that many), a reserve or claim at most what MOVERS
    says; the count of calls per name.
    (Redis 7 logs the commands that scripts call, too: they are not checked one by one.)"""
    seen: Counter[str] = Counter()
    for name, members, _ in calls(client):
        assert members <= MOVERS.get(name, PER_CALL), (name, members)
        seen[name] += 1
    return seen


def drain_counting(spark: Any, url: str, fmt: str, name: str, tmp: Path) -> int:
    """Drain Ick or dehydrator ``name`` with Trigger.AvailableNow; how many rows came (counted
    by Spark: the rows are not collected)."""
    counted: list[int] = []
    query = stream(
        spark,
        fmt,
        {"redis.url": url, fmt: name},  # the option that names it is the format's name
        lambda df, _: counted.append(df.count()),
        str(tmp),
        trigger=None,
    )
    query.awaitTermination(300)
    assert query.exception() is None
    return sum(counted)


@pytest.mark.slow
def test_a_drain_at_default_options_is_many_bounded_calls(
    spark, redis_url, client, logged, tmp_path
):
    n = 200_000
    members = [f"doc:{i}" for i in range(n)]
    ShardedIck(client, "big").add_pairs(members, [float(i) for i in range(n)])
    logged.slowlog_reset()
    assert drain_counting(spark, redis_url, "ick", "big", tmp_path / "ckpt") == n
    seen = check(logged)
    assert seen["rlog_reserve"] >= n // MOVERS["rlog_reserve"]  # 100,000 a batch, in bounded calls
    assert seen["log_read"] and seen["rlog_commit"]


def test_a_snapshot_read_pages(spark, redis_url, client, logged):
    n = 30_000
    ShardedIck(client, "snap").add_pairs([f"doc:{i}" for i in range(n)], [1.0] * n)
    logged.slowlog_reset()
    rows = spark.read.format("ick").option("redis.url", redis_url).option("ick", "snap").load()
    assert rows.count() == n
    assert check(logged)["ZSCAN"] >= 2


@pytest.mark.slow
def test_filtered_snapshot_reads_are_bounded_calls(spark, redis_url, client, logged):
    """Reads filtered by a list of twice PER_CALL names (half of them in the Ick), by a
    score range of five times PER_CALL members, by one member, and by the reserved state:
    every call bounded, the list and the range read in several."""
    n = 12_000
    ShardedIck(client, "picked").add_pairs(
        [f"doc:{i}" for i in range(n)], [float(i) for i in range(n)]
    )
    log = ReservationLog(client, "picked")
    log.reserve(1500, 0, log.lease.acquire("t", 60_000))
    reader = spark.read.format("ick").option("redis.url", redis_url).option("ick", "picked")
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        logged.slowlog_reset()
        wanted = [f"doc:{i}" for i in range(0, 2 * n, 12)]  # half of them in the Ick
        assert reader.load().where(col("member").isin(wanted)).count() == n // 12
        assert reader.load().where("score >= 1000 AND score < 6000").count() == 5000
        assert reader.load().where("member = 'doc:7'").collect()[0].reservation == 1
        assert reader.schema(SNAPSHOT_SCHEMA).load().where("state = 'reserved'").count() == 1500
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    seen = check(logged)
    assert seen["ZMSCORE"] >= 2 * 2 and seen["ick_range"] >= 5 and seen["ick_holders"] >= 1
    assert seen["ZSCAN"] >= 2  # the reserved ones: the cset only


def test_a_dehydrator_release_is_many_bounded_calls(spark, redis_url, client, logged, tmp_path):
    n = 30_000
    Dehydrator(client, "parked").park([f"id{i}" for i in range(n)], ["x"] * n, [0] * n)
    logged.slowlog_reset()
    assert drain_counting(spark, redis_url, "dehydrator", "parked", tmp_path / "ckpt") == n
    assert check(logged)["dh_claim"] >= n // MOVERS["dh_claim"]


def test_every_console_page_and_action_is_bounded_calls(redis_url, client, logged, tmp_path):
    """pyspark-ick web on an Ick of 30,000 members and 6,000 dead letters: every page,
    a filter that looks further, and re-drive of all that match."""
    ick = ShardedIck(client, "big", 2)
    bury(ick, {f"d{i:05}": "boom" if i % 3 else "timeout" for i in range(6000)})
    ick.add_pairs([f"m{i}" for i in range(30_000)], [float(i) for i in range(30_000)])
    Dehydrator(client, "parked", 2).park([f"e{i}" for i in range(5000)], ["x"] * 5000, [0] * 5000)
    token = "bounded-calls-token-0123"
    with console(redis_url, tmp_path, "--allow-actions", token=token) as web:
        session = Session(web.base)
        logged.slowlog_reset()
        for path in (
            "/",
            "/ick?name=big",
            "/dead?ick=big",
            "/dead?ick=big&error=nothing+like+it",
            "/dead?ick=big&error=nothing+like+it&at=1:0",
            "/dehydrator?name=parked",
        ):
            assert session.get(path)[0] == 200, path
        assert session.sign_in(token) == 303
        fields = [("ick", "big"), ("action", "redrive"), ("scope", "matching"), ("error", "time")]
        code, _ = session.post("/dead/action", [*fields, ("csrf", session.csrf("/"))])
        assert code == 303 and sum(DeadLetters(ick).count()) == 4000
    seen = check(logged)
    assert seen["dead_letters"] >= 2000 // 250 and seen["HMGET"] >= 6
    assert "KEYS" not in seen and "SCAN" not in seen


def test_retry_due_is_bounded_calls(redis_url, client, logged):
    """`pyspark-ick retry-due` on 6,000 due retries and 6,000 pending ones, 2,000 of them
    re-added: every retry is moved or looked at, in bounded calls."""
    ick = ShardedIck(client, "retrying", 2)
    LATER = RetryPolicy(backoff_ms=600_000, backoff_max_ms=600_000)
    for i, policy in ((1, LATER), (0, RetryPolicy(backoff_ms=1, backoff_max_ms=1))):
        members = {f"m{i}-{k:05}": float(k) for k in range(6000)}
        for shard in range(2):
            mine = {m: s for m, s in members.items() if ick.shard_of(m) == shard}
            ick.shard(shard).add(mine)
            ick.shard(shard).reserve(len(mine))
            ick.shard(shard).fail(dict.fromkeys(mine, "boom"), policy)
    ick.add({f"m1-{k:05}": 1.0 for k in range(2000)})  # re-added while they wait
    keys = [ick.shard(i).keys for i in range(2)]
    logged.slowlog_reset()
    done = release_due(client, keys, "Ick 'retrying'")
    assert (done.released, done.dropped) == (6000, 2000)
    assert check(logged)["retry_due"] == done.calls >= 12000 // PER_CALL
