"""Reshard, re-drive and retry-due compose (issue 50): a reshard carries every retry,
attempt record and dead letter to its member's shard under the new count (a shrink loses
none), and re-drive and retry-due put a member back in its own shard only, also when a
reshard of an earlier build left its retry or dead letter in another shard (a stray)."""

from __future__ import annotations

from typing import Any

import pytest
from test_reshard import Killed, killer

from pyspark_ick import RetryPolicy, ShardedIck, shard_of
from pyspark_ick.cli import main
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.ick import Ick
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.reshard import reshard
from pyspark_ick.values import text

DEAD = RetryPolicy(max_attempts=1)
LATER = RetryPolicy(max_attempts=5, backoff_ms=3_600_000)  # a retry that stays pending
SOON = RetryPolicy(max_attempts=5, backoff_ms=1, backoff_max_ms=1)  # a retry due at once
PARTS = ("pset", "cset", "retry", "attempts", "dead", "deadinfo")


def where(client: Any, name: str, shards: int) -> dict[str, dict[tuple[str, int], Any]]:
    """member -> {(key part, shard): score or record} over every shard of ``name`` (whole
    reads: a test's view)."""
    found: dict[str, dict[tuple[str, int], Any]] = {}
    for i, master in enumerate(shard_names(name, shards)):
        keys = IckKeys(master)
        for part in PARTS:
            key = getattr(keys, part)
            if part in ("attempts", "deadinfo"):
                held = client.hgetall(key).items()
            else:
                held = client.zrange(key, 0, -1, withscores=True)
            for member, value in held:
                found.setdefault(text(member), {})[(part, i)] = (
                    value if isinstance(value, float) else text(value)
                )
    return found


def members_of(shard: int, shards: int, n: int, prefix: str = "doc") -> list[str]:
    """``n`` members whose shard of ``shards`` is ``shard``."""
    out, k = [], 0
    while len(out) < n:
        if shard_of(f"{prefix}:{k}", shards) == shard:
            out.append(f"{prefix}:{k}")
        k += 1
    return out


def fail_in(client: Any, master: str, failures: dict[str, str], policy: RetryPolicy) -> None:
    """Members added to shard ``master`` (whatever their shard), reserved and failed once."""
    ick = Ick(client, master)
    ick.add({m: 5.0 for m in failures})
    reserved = [m for m, _ in ick.reserve(1000) if m in failures]
    assert sorted(reserved) == sorted(failures)
    ick.fail({m: failures[m] for m in reserved}, policy)


def fates(found: dict[str, dict[tuple[str, int], Any]]) -> dict[str, dict[str, Any]]:
    """member -> {part: value} of its retries, attempt records and dead letters, the shard
    left out (what a reshard must keep)."""
    return {
        m: {part: v for (part, _), v in held.items() if part not in ("pset", "cset")}
        for m, held in found.items()
    }


def cli(url: str, *args: str) -> int:
    return main(["--url", url, *args])


def test_shrinking_keeps_every_dead_letter_and_retry_with_its_record(any_client):
    client = any_client
    sharded = ShardedIck(client, "s", 4)
    sharded.add({f"q:{k}": float(k) for k in range(40)})
    for i in range(4):
        dead, later = members_of(i, 4, 3)[:2], members_of(i, 4, 3)[2]
        fail_in(client, f"s:{i}", {m: f"boom {m}" for m in dead}, DEAD)
        fail_in(client, f"s:{i}", {later: "again later"}, LATER)
    before = where(client, "s", 4)
    letters = DeadLetters(ShardedIck(client, "s", 4))
    assert sum(letters.count()) == 8 and sum(letters.retrying()) == 4

    done = reshard(client, "s", 2)

    after = where(client, "s", 2)
    letters = DeadLetters(ShardedIck(client, "s", 2))
    assert sum(letters.count()) == 8 and sum(letters.retrying()) == 4
    assert fates(after) == fates(before)  # each with its record: error, attempts, times
    for member, held in after.items():  # in its shard under 2, once
        assert {i for _, i in held} == {shard_of(member, 2)}, (member, held)
    assert done.dropped == ["s:2", "s:3"]
    assert not any(client.exists(getattr(IckKeys(m), p)) for m in ("s:2", "s:3") for p in PARTS)


@pytest.mark.parametrize("steps", [(2, 8, 16)])
def test_growing_leaves_no_dead_letter_behind_and_redrive_finds_each(client, redis_url, steps):
    first, *grown = steps
    for i in range(first):
        fail_in(client, f"g:{i}", {m: "bad" for m in members_of(i, first, 6)}, DEAD)
    ShardedIck(client, "g", first).check_shards()
    before = fates(where(client, "g", first))
    for shards in grown:
        reshard(client, "g", shards)
        after = where(client, "g", shards)
        assert fates(after) == before
        for member, held in after.items():
            assert {i for _, i in held} == {shard_of(member, shards)}, (member, shards, held)
    member = next(m for m in before if shard_of(m, grown[-1]) != shard_of(m, first))
    assert cli(redis_url, "dead", "redrive", "g", member) == 0
    assert where(client, "g", grown[-1])[member] == {("pset", shard_of(member, grown[-1])): 5.0}


def test_after_growing_add_then_redrive_all_queues_a_dead_member_once(client, redis_url):
    members = members_of(0, 8, 4)
    fail_in(client, "d:0", {m: "bad" for m in members}, DEAD)
    ShardedIck(client, "d", 8).check_shards()
    reshard(client, "d", 16)
    moved = [m for m in members if shard_of(m, 16) != 0]
    assert moved, "a member whose shard changes"
    ShardedIck(client, "d", 16).add({m: 1.0 for m in moved})  # the producer dirties it again
    assert cli(redis_url, "dead", "redrive", "d") == 0
    found = where(client, "d", 16)
    for member in members:
        assert found[member] == {("pset", shard_of(member, 16)): 1.0 if member in moved else 5.0}


def strays(
    client: Any, name: str, shards: int, n: int, policy: RetryPolicy, prefix: str = "doc"
) -> list[str]:
    """``n`` members failed into shard 0 of ``name`` though their shard is another: what
    a reshard of an earlier build left behind."""
    ShardedIck(client, name, shards).check_shards()
    away = [m for k in range(1, shards) for m in members_of(k, shards, 1, prefix)][:n]
    fail_in(client, f"{name}:0", {m: "stray" for m in away}, policy)
    return away


def test_a_stray_dead_letter_is_listed_and_redriven_into_its_own_shard_only(
    client, redis_url, capsys
):
    one, two, three, four = strays(client, "st", 8, 4, DEAD)
    assert cli(redis_url, "dead", "list", "st", "--json") == 0
    listed = capsys.readouterr().out
    assert all(f'"member": "{m}", "shard": 0' in listed for m in (one, two, three, four))

    assert cli(redis_url, "dead", "redrive", "st", one) == 0  # found where it is
    assert where(client, "st", 8)[one] == {("pset", shard_of(one, 8)): 5.0}

    ShardedIck(client, "st", 8).add({two: 1.0})  # dirtied again: in its own shard
    letters = DeadLetters(ShardedIck(client, "st", 8))
    assert letters.apply_matching("redrive", member=four).done == 1  # the console's button
    assert cli(redis_url, "dead", "redrive", "st") == 0
    found = where(client, "st", 8)
    for member, score in ((two, 1.0), (three, 5.0), (four, 5.0)):
        assert found[member] == {("pset", shard_of(member, 8)): score}, member
    assert sum(letters.count()) == 0


def test_a_stray_retry_is_released_into_its_own_shard_only(client, redis_url):
    later = strays(client, "rt", 4, 1, LATER, "x")[0]
    due = strays(client, "rt", 4, 1, SOON)[0]  # last: a reserve would take it back
    ShardedIck(client, "rt", 4).add({due: 1.0})  # dirtied again: in its own shard
    assert cli(redis_url, "retry-due", "rt") == 0
    found = where(client, "rt", 4)
    home = shard_of(due, 4)
    assert found[due] == {("pset", home): 1.0, ("attempts", home): found[due][("attempts", home)]}
    assert {i for _, i in found[later]} == {shard_of(later, 4)}  # pending, carried home


@pytest.mark.parametrize("call", ["ick_carry", "ick_carried"])
def test_a_reshard_killed_while_carrying_is_finished_by_running_it_again(any_client, call):
    client = any_client
    for i in range(2):
        fail_in(client, f"k:{i}", {m: "dead" for m in members_of(i, 2, 300)}, DEAD)
        fail_in(client, f"k:{i}", {m: "later" for m in members_of(i, 2, 310)[300:]}, LATER)
    ShardedIck(client, "k", 2).check_shards()
    before = fates(where(client, "k", 2))
    with pytest.raises(Killed):
        reshard(client, "k", 3, progress=killer(2, call))
    done = reshard(client, "k", 3, progress=killer(10**6))
    after = where(client, "k", 3)
    assert fates(after) == before and done.after == 3
    for member, held in after.items():
        assert {i for _, i in held} == {shard_of(member, 3)}, (member, held)


def test_a_reshard_to_the_same_count_carries_strays_home(client):
    away = strays(client, "same", 4, 3, LATER)
    done = reshard(client, "same", 4)
    assert done.carried == 3 and not done.moved
    found = where(client, "same", 4)
    for member in away:
        assert {i for _, i in found[member]} == {shard_of(member, 4)}, found[member]
