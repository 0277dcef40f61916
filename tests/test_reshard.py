"""Resharding an Ick (issue 35): every member, queued and reserved, ends in its shard under
the new count exactly once with its lowest score, also when the reshard is killed between
two of its bounded calls and run again; a consumer holding a lease is refused; readers and
writers refuse while it runs; a stream query's old checkpoint is refused afterwards."""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

import pytest
import redis

from pyspark_ick import IckError, LeaseError, ShardCountError, ShardedIck, bounds, shard_of
from pyspark_ick.keys import IckKeys, reshard_key, shard_count_key, shard_names
from pyspark_ick.reservations import ReservationLog, describe
from pyspark_ick.reshard import reshard
from pyspark_ick.values import text


class Killed(Exception):
    """Stands for the process dying between two bounded calls."""


def killer(after: int, call: str = "") -> Any:
    """A progress hook that dies after the ``after``-th call (of script or command
    ``call``, if given) and checks every call's bound."""
    seen = Counter[str]()

    def progress(what: str, items: int) -> None:
        assert items <= bounds.ITEMS_PER_CALL, (what, items)
        seen[what] += 1
        seen["any call"] += 1
        if what == (call or what) and seen[call or "any call"] == after:
            raise Killed(what)

    return progress


def everything(client: Any, name: str) -> dict[str, list[tuple[str, float, str]]]:
    """member -> [(key, score, "pset"|"cset")] over every shard key of ``name`` of any
    layout (read with SCAN: a test's view, not the connector's)."""
    found: dict[str, list[tuple[str, float, str]]] = {}
    nodes = client.get_primaries() if isinstance(client, redis.RedisCluster) else [None]
    pattern = re.compile(rf"^({re.escape(name)}(?::\d+)?)/ick/\{{.*\}}/(pset|cset)$")
    for node in nodes:
        scan = (
            client.scan_iter(match=f"{name}*", count=1000, target_nodes=node)
            if node is not None
            else client.scan_iter(match=f"{name}*", count=1000)
        )
        for raw in scan:
            match = pattern.match(text(raw))
            if not match:
                continue
            for member, score in client.zscan_iter(raw, count=1000):
                found.setdefault(text(member), []).append((match[1], score, match[2]))
    return found


def seed(client: Any, name: str, shards: int, n: int) -> dict[str, float]:
    """``n`` members in ``shards`` shards, some reserved (``reserve_some``); returns
    member -> the lowest score it has anywhere."""
    sharded = ShardedIck(client, name, shards)
    members = [f"doc:{i}" for i in range(n)]
    sharded.add_pairs(members, [float(i) for i in range(n)])
    lowest = {m: float(i) for i, m in enumerate(members)}
    reserve_some(client, name, shards, lowest)
    return lowest


def reserve_some(client: Any, name: str, shards: int, lowest: dict[str, float]) -> None:
    """Members of every shard reserved by a query that then stopped (its reservations
    open), some of them re-added in flight with a lower score, some with a higher one;
    ``lowest`` follows."""
    sharded = ShardedIck(client, name, shards)
    for key in shard_names(name, shards):
        log = ReservationLog(client, key)
        fence = log.lease.acquire("query-gone", 60_000)
        log.reserve(700, 0, fence)  # two reservations of 500 and 200
        held = [text(m) for m in client.zrange(IckKeys(key).cset, 0, -1)]
        lower, higher = held[::3], held[1::3]
        sharded.add({m: lowest[m] - 0.5 for m in lower})  # dirtied again in flight
        sharded.add({m: lowest[m] + 0.5 for m in higher})
        for m in lower:
            lowest[m] -= 0.5
        assert log.lease.release(fence)  # the query stopped: its reservations stay open


def check_layout(client: Any, name: str, shards: int, lowest: dict[str, float]) -> None:
    """Every member once, queued in its shard under ``shards``, with its lowest score;
    the count recorded, no marker, no reservation open, no key of another layout."""
    found = everything(client, name)
    assert set(found) == set(lowest)
    keys = shard_names(name, shards)
    wrong = {
        m: places
        for m, places in found.items()
        if places != [(keys[shard_of(m, shards)], lowest[m], "pset")]
    }
    assert not wrong, list(wrong.items())[:5]
    assert int(client.get(shard_count_key(name))) == shards
    assert client.get(reshard_key(name)) is None
    for key in keys:
        info = describe(client, key)
        assert info["open_reservations"] == 0 and info["lease_owner"] is None, (key, info)


FATES = {"retry": "attempts", "dead": "deadinfo"}  # the sorted set -> its records' hash


def seed_fates(client: Any, name: str, shards: int, n: int) -> dict[tuple[str, str], Any]:
    """``n`` dead letters and ``n`` members waiting for a retry, each with its record, in
    their shards (written as the commit's fail_member writes them); returns (part,
    member) -> score or record."""
    now = int(time.time() * 1000)
    want: dict[tuple[str, str], Any] = {}
    for k in range(n):
        for part, attempts, at in (("dead", 25, now - k), ("retry", 3, now + 3_600_000 + k)):
            member = f"{part}:{k}"
            want[(part, member)] = float(at)
            want[(FATES[part], member)] = f"{attempts} {now - k} {k} TimeoutError: sink {k}"
    pipe = client.pipeline(transaction=False)  # the test's fixture, not the connector's
    for (part, member), value in want.items():
        keys = IckKeys(shard_names(name, shards)[shard_of(member, shards)])
        if isinstance(value, float):
            pipe.zadd(getattr(keys, part), {member: value})
        else:
            pipe.hset(getattr(keys, part), member, value)
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()
    return want


def fated(client: Any, name: str) -> dict[tuple[str, str], list[tuple[str, Any]]]:
    """(part, member) -> [(shard key, score or record)] of the retries, attempt records and
    dead letters in every shard key of ``name`` of any layout (SCAN: a test's view)."""
    found: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    pattern = re.compile(
        rf"^({re.escape(name)}(?::\d+)?)/ick/\{{.*\}}/(retry|attempts|dead|deadinfo)$"
    )
    for raw in client.scan_iter(match=f"{name}*", count=1000):
        match = pattern.match(text(raw))
        if not match:
            continue
        if match[2] in FATES:
            held: Any = client.zscan_iter(raw, count=1000)
        else:
            held = ((m, text(v)) for m, v in client.hscan_iter(raw, count=1000))
        for member, value in held:
            found.setdefault((match[2], text(member)), []).append((match[1], value))
    return found


def check_fates(client: Any, name: str, shards: int, want: dict[tuple[str, str], Any]) -> None:
    """Every retry, attempt record and dead letter of ``want`` once, in its member's shard
    under ``shards``, as it was."""
    found, keys = fated(client, name), shard_names(name, shards)
    assert set(found) == set(want)
    wrong = {
        k: places
        for k, places in found.items()
        if places != [(keys[shard_of(k[1], shards)], want[k])]
    }
    assert not wrong, list(wrong.items())[:5]


@pytest.mark.slow
def test_reshard_4_16_3_of_100000_members_killed_midway_and_run_again(client, redis_url):
    n = 100_000
    lowest = seed(client, "big", 4, n)
    fates = seed_fates(client, "big", 4, n // 10)  # 10% dead letters, 10% retrying
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 100_000)
    try:
        figures = []
        # each reshard killed twice: between a copy and its removal (a member in two
        # shards), right after a removal, or while reservations go back; then run again
        steps = (
            (4, 16, [killer(30, "ickadd"), killer(10, "ick_moved"), killer(7, "ick_carry")]),
            (16, 3, [killer(5, "ick_requeue"), killer(20, "ickadd"), killer(9, "ick_carried")]),
        )
        for before, after, kills in steps:
            reserve_some(client, "big", before, lowest)
            client.slowlog_reset()
            for kill in kills:
                with pytest.raises(Killed):
                    reshard(client, "big", after, progress=kill)
                # nothing lost (a member may have a copy); readers and writers refuse
                assert set(everything(client, "big")) == set(lowest)
                assert set(fated(client, "big")) == set(fates)
                assert int(client.get(reshard_key("big"))) == after
                with pytest.raises(ShardCountError, match=f"being resharded to {after}"):
                    ShardedIck(client, "big", before).add({"late": 1.0})
            started = time.monotonic()
            done = reshard(client, "big", after)
            seconds = time.monotonic() - started
            check_layout(client, "big", after, lowest)
            check_fates(client, "big", after, fates)
            assert (done.before, done.after) == (before, after)
            slowest = max(e["duration"] for e in client.slowlog_get(100_000)) / 1000
            figures.append(
                f"{before}->{after}: {seconds:.2f} s, {done.calls} calls ({done.carried} "
                f"members' retries or dead letters carried), longest round trip "
                f"{done.longest_ms:.1f} ms, slowest command {slowest:.2f} ms"
            )
            assert slowest < 250  # bounded calls: a few ms each (generous for a busy CI)
        print(
            "reshard of 100,000 members, 10,000 dead letters, 10,000 retrying:",
            "; ".join(figures),
        )
    finally:
        client.config_set("slowlog-log-slower-than", 10_000)


def test_reshard_on_a_cluster_killed_and_run_again(cluster_client):
    lowest = seed(cluster_client, "cl", 2, 5_000)
    with pytest.raises(Killed):
        reshard(cluster_client, "cl", 5, progress=killer(3, "ick_moved"))
    reshard(cluster_client, "cl", 5)
    check_layout(cluster_client, "cl", 5, lowest)
    reshard(cluster_client, "cl", 1)
    check_layout(cluster_client, "cl", 1, lowest)


def test_one_shard_to_many_and_back_with_a_binary_member(client):
    sharded = ShardedIck(client, "one", 1)
    sharded.add({"a": 3.0, "b": 1.0, b"x\xffy": 2.0})
    reshard(client, "one", 4)
    assert client.exists("one") == 0  # the single shard's keys went
    lowest = {"a": 3.0, "b": 1.0, text(b"x\xffy"): 2.0}
    check_layout(client, "one", 4, lowest)
    assert reshard(client, "one", 4).moved == 0  # nothing to do
    reshard(client, "one", 1)
    check_layout(client, "one", 1, lowest)


def test_a_score_lowered_between_the_copy_and_the_removal_is_copied_again(client):
    ShardedIck(client, "low", 1).add({f"m{i}": 10.0 for i in range(20)})

    copies = Counter[str]()

    def producer(what: str, items: int) -> None:  # a gem producer, between two calls
        copies[what] += 1
        if what == "ickadd" and copies[what] == 1:
            client.zadd("low/ick/{low}/pset", {"m3": 1.0, "m4": 2.0}, lt=True)

    reshard(client, "low", 3, progress=producer)
    check_layout(client, "low", 3, {f"m{i}": {3: 1.0, 4: 2.0}.get(i, 10.0) for i in range(20)})


def test_a_consumer_holding_a_lease_is_refused_and_nothing_moves(client):
    ShardedIck(client, "busy", 2).add({f"m{i}": float(i) for i in range(50)})
    log = ReservationLog(client, "busy:1")
    fence = log.lease.acquire("query-7f3a", 60_000)
    before = everything(client, "busy")
    with pytest.raises(LeaseError, match=r"shard key 'busy:1'.*'query-7f3a'.*Stop that query"):
        reshard(client, "busy", 3)
    assert everything(client, "busy") == before
    assert client.get(reshard_key("busy")) is None  # no marker left behind
    log.lease.release(fence)
    reshard(client, "busy", 3)
    assert int(client.get(shard_count_key("busy"))) == 3


def test_an_unfinished_reshard_must_be_finished_first(client):
    ShardedIck(client, "half", 2).add({"a": 1.0})
    with pytest.raises(Killed):
        reshard(client, "half", 4, progress=killer(3))
    with pytest.raises(ShardCountError, match=r"reshard to 4 shards did not finish.*--to 4"):
        reshard(client, "half", 8)
    reshard(client, "half", 4)
    reshard(client, "half", 8)
    assert int(client.get(shard_count_key("half"))) == 8


def test_a_gem_ick_needs_its_count_and_is_checked(client):
    client.set("gem:0", "ick.v1")
    client.zadd("gem:0/ick/{gem:0}/pset", {m: 1.0 for m in ("a", "b", "c", "d")})
    with pytest.raises(IckError, match="no shard count is recorded"):
        reshard(client, "gem", 2)
    with pytest.raises(ShardCountError, match="another shard count"):
        reshard(client, "gem", 2, shards=3)  # gem:0 holds members of other shards of 3
    client.delete("gem:0", "gem:0/ick/{gem:0}/pset")
    for member in ("a", "b", "c", "d"):  # a gem producer of 2 shards
        key = f"gem:{shard_of(member, 2)}"
        client.set(key, "ick.v1")
        client.zadd(f"{key}/ick/{{{key}}}/pset", {member: 1.0})
    with pytest.raises(Killed):
        reshard(client, "gem", 3, shards=2, progress=killer(2))
    assert int(client.get(shard_count_key("gem"))) == 2  # recorded first: a rerun knows it
    reshard(client, "gem", 3)
    check_layout(client, "gem", 3, dict.fromkeys("abcd", 1.0))


def stream_reader_for(url: str, shards: int) -> Any:
    from pyspark_ick.spark.ick_reader import STREAM_SCHEMA, stream_reader

    return stream_reader({"redis.url": url, "ick": "q", "shards": str(shards)}, STREAM_SCHEMA)


def test_a_stream_query_refuses_during_a_reshard_and_an_old_checkpoint_after(client, redis_url):
    ShardedIck(client, "q", 2).add({f"m{i}": float(i) for i in range(20)})
    old = stream_reader_for(redis_url, 2)
    start = old.initialOffset()
    end = old.latestOffset(start, old.getDefaultReadLimit())
    old.stop()  # the query stopped with a batch in flight (in its checkpoint)
    with pytest.raises(Killed):
        reshard(client, "q", 4, progress=killer(2))
    with pytest.raises(ShardCountError, match="being resharded to 4 shards"):
        stream_reader_for(redis_url, 2).initialOffset()
    reshard(client, "q", 4)
    new = stream_reader_for(redis_url, 4)
    with pytest.raises(ShardCountError, match=r"names 2 shards.*new checkpointLocation"):
        new.partitions(start, end)  # a restart from the old checkpoint replays its batch
    with pytest.raises(ShardCountError, match=r"names 2 shards.*new checkpointLocation"):
        new.latestOffset(end, new.getDefaultReadLimit())
    # a new checkpoint delivers every member: the batch in flight was queued again
    first = new.initialOffset()
    last = new.latestOffset(first, new.getDefaultReadLimit())
    rows = [
        row
        for part in new.partitions(first, last)
        for batch in new.read(part)
        for row in batch.to_pylist()
    ]
    assert sorted(r["member"] for r in rows) == sorted(f"m{i}" for i in range(20))
    new.stop()
