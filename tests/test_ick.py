"""The redis-ick gem's edge cases, errors and script loading, on a real Redis."""

from __future__ import annotations

import inspect
import re
import time
from typing import Any

import pytest
import redis
from packing import pack_strings

import pyspark_ick
from pyspark_ick import (
    Ick,
    IckConfigError,
    IckConnectionError,
    IckError,
    IckScriptError,
    ShardedIck,
    connect,
    errors,
    scripts,
)
from pyspark_ick.ick import parse_stats
from pyspark_ick.packing import pack_pairs
from pyspark_ick.testing import free_port, start_binary
from pyspark_ick.values import pairs, text


def sizes(ick: Ick) -> tuple[int, int]:
    stats = ick.stats()
    assert stats is not None
    return stats["pset_size"], stats["cset_size"]


def test_add_folds_to_the_lower_score(any_client: Any) -> None:
    ick = Ick(any_client, "fold")
    assert ick.add({"a": 5, "b": 5}) == (2, 0)
    assert ick.add({"a": 3, "b": 7, "c": 1}) == (1, 1)  # c new, a lowered, b kept
    assert ick.add({}) == (0, 0)
    assert ick.reserve(3) == [("c", 1.0), ("a", 3.0), ("b", 5.0)]


def test_members_and_scores_round_trip_exactly(any_client: Any) -> None:
    ick = Ick(any_client, "exact")
    added = {
        "": 0.1,
        "é": -0.0,
        "a\x00b": 1e-300,
        "🙂" * 3: 2.0**53 + 1,
        "x" * 5000: 7,
        b"\xff raw": -1.7976931348623157e308,
        42: 5e-324,
        "max": 1.7976931348623157e308,
    }
    assert ick.add(added) == (len(added), 0)
    got = dict(ick.reserve(len(added)))
    assert got == {text(m): float(s) for m, s in added.items()}
    assert got["\udcff raw"] == -1.7976931348623157e308  # bytes come back surrogate-escaped


def test_infinite_scores_are_stored_as_the_gem_stores_them(any_client: Any) -> None:
    """The gem's ickadd passes -inf and +inf to ZADD (a Ruby app puts a member first with
    -inf): the client and ShardedIck store them too, and the lower score still wins."""
    ick = Ick(any_client, "infinite")
    inf = float("inf")
    assert ick.add({"last": inf, "mid": 1.0, "first": -inf, "moved": inf}) == (4, 0)
    assert ick.add({"moved": -inf, "mid": inf}) == (0, 1)  # -inf is lower, inf is not
    assert ick.reserve(4) == [("first", -inf), ("moved", -inf), ("mid", 1.0), ("last", inf)]
    sharded = ShardedIck(any_client, "infinite-sharded", 3)
    members = {f"m{i}": (-inf, inf, i)[i % 3] for i in range(30)}
    assert sharded.add(members, chunk=4) == (30, 0)
    got = {m: s for i in range(3) for m, s in sharded.shard(i).reserve(30)}
    assert got == {m: float(s) for m, s in members.items()}


@pytest.mark.parametrize("score", [float("nan"), None, "1.5", object()])
def test_a_bad_score_is_refused_before_redis(score: Any) -> None:
    nowhere = redis.Redis(host="127.0.0.1", port=free_port())  # any command would fail
    with pytest.raises(IckConfigError, match="the score of member 'b' must be a number"):
        Ick(nowhere, "scores").add({"a": 1.0, "b": score})
    with pytest.raises(IckConfigError, match="the score of member 'b' must be a number"):
        ShardedIck(nowhere, "scores", 4).add({"a": 1.0, "b": score})
    with pytest.raises(IckConfigError, match="2 members but 1 score"):
        ShardedIck(nowhere, "scores", 4).add_pairs(["a", "b"], [1.0])
    with pytest.raises(IckConfigError, match="chunk must be a positive integer, got 0"):
        Ick(nowhere, "scores").add({"a": 1.0}, chunk=0)


def test_script_errors_in_a_pipeline_do_not_echo_arguments(client: Any) -> None:
    ick = Ick(client, "echo")
    client.set(ick.keys.master, "ick.v1")
    client.set(ick.keys.pset, "x")
    with pytest.raises(IckScriptError) as caught:
        ick.add({"secret-member": 1.0})
    assert str(caught.value) == "echo/ick/{echo}/pset is a string, not a sorted set"


def test_reserve_zero_returns_nothing_and_moves_nothing(any_client: Any) -> None:
    ick = Ick(any_client, "zero")
    ick.add({"a": 1, "b": 2})
    assert ick.reserve(0) == []
    assert ick.exchange(0) == []
    assert sizes(ick) == (2, 0)


def test_reserve_repeats_the_batch_until_it_is_committed(any_client: Any) -> None:
    ick = Ick(any_client, "repeat")
    ick.add({"a": 1, "b": 2, "c": 3})
    assert ick.reserve(2) == [("a", 1.0), ("b", 2.0)]
    ick.add({"z": 0})  # lower than the batch, but the cset is full
    assert ick.reserve(2) == [("a", 1.0), ("b", 2.0)]
    assert ick.commit("a", "b") == 2
    assert ick.reserve(2) == [("z", 0.0), ("c", 3.0)]


def test_a_missing_ick_reserves_nothing_and_writes_nothing(client: Any) -> None:
    ick = Ick(client, "missing")
    assert ick.reserve(5) == []
    assert ick.commit("a") == 0
    assert ick.exchange(3, ["a"], backwash=True) == []
    assert ick.stats() is None
    assert client.dbsize() == 0


def test_exchange_commits_before_it_reserves(any_client: Any) -> None:
    ick = Ick(any_client, "exchange")
    ick.add({"a": 1, "b": 2, "c": 3})
    assert ick.reserve(2) == [("a", 1.0), ("b", 2.0)]
    # reserving first would find the cset full and hand back a again
    assert ick.exchange(2, commit=["a"]) == [("b", 2.0), ("c", 3.0)]
    assert sizes(ick) == (0, 2)


def test_commit_never_touches_the_pset(any_client: Any) -> None:
    ick = Ick(any_client, "commit")
    ick.add({"a": 1, "b": 2})
    assert ick.commit("a", "b") == 0
    assert sizes(ick) == (2, 0)


def test_a_member_in_both_sets_is_delivered_again(any_client: Any) -> None:
    ick = Ick(any_client, "both")
    ick.add({"a": 5})
    assert ick.reserve(1) == [("a", 5.0)]
    assert ick.add({"a": 9}) == (1, 0)  # re-dirtied while reserved: new to the pset
    stats = ick.stats()
    assert stats is not None
    assert (stats["pset_size"], stats["cset_size"], stats["total_size"]) == (1, 1, 2)
    assert ick.reserve(1) == [("a", 5.0)]  # the batch in flight is unchanged
    assert ick.commit("a") == 1
    assert sizes(ick) == (1, 0)  # not forgotten
    assert ick.reserve(1) == [("a", 9.0)]


def test_reserve_folds_into_the_cset_keeping_the_lower_score(any_client: Any) -> None:
    ick = Ick(any_client, "foldc")
    ick.add({"a": 5})
    ick.reserve(1)
    ick.add({"a": 2})
    assert ick.reserve(2) == [("a", 2.0)]
    assert sizes(ick) == (0, 1)


def test_backwash_folds_the_cset_back_first(any_client: Any) -> None:
    ick = Ick(any_client, "backwash")
    ick.add({"a": 4, "b": 5})
    ick.reserve(2)
    ick.add({"a": 9, "c": 1})
    assert ick.exchange(1, backwash=True) == [("c", 1.0)]
    stats = ick.stats()
    assert stats is not None
    assert (stats["pset_size"], stats["pset_min"], stats["pset_max"]) == (2, 4.0, 5.0)


def test_fractional_scores_in_stats(any_client: Any) -> None:
    ick = Ick(any_client, "fractions")
    ick.add({"a": 1.25, "b": -7.125, "c": 2.5e-3, "d": 1700000000.123456})
    ick.reserve(1)
    stats = ick.stats()
    assert stats == {
        "ver": "ick.v1",
        "key": "fractions",
        "pset_key": "fractions/ick/{fractions}/pset",
        "cset_key": "fractions/ick/{fractions}/cset",
        "pset_size": 3,
        "cset_size": 1,
        "total_size": 4,
        "pset_min": 2.5e-3,
        "pset_max": 1700000000.123456,
        "cset_min": -7.125,
        "cset_max": -7.125,
        "total_min": -7.125,
        "total_max": 1700000000.123456,  # the gem's, over both sets
        "backfill_size": 0,  # the backfill lane's (lanes.py): none queued here
        "backfill_min": None,
    }
    assert all(type(stats[k]) is float for k in ("pset_min", "pset_max", "cset_min"))
    ick.commit("b")
    assert ick.stats()["cset_min"] is None  # type: ignore[index]


def test_twenty_thousand_members_in_one_call(any_client: Any) -> None:
    n = 20_000  # 40,000 arguments: far past Lua's unpack limit, chunked inside the scripts
    ick = Ick(any_client, "big")
    members = [f"doc:{i:05d}" for i in range(n)]
    packed = pack_pairs(members, [float(i) for i in range(n)])
    assert scripts.run(any_client, "ickadd", ick.keys.base, [packed]) == [n, 0]
    assert ick.add(dict.fromkeys(members, -1.0), chunk=n) == (0, n)  # one call again
    batch = ick.reserve(n)
    assert batch == [(m, -1.0) for m in members]
    assert ick.exchange(0, backwash=True) == []  # 20,000 members folded back
    assert sizes(ick) == (n, 0)
    assert len(ick.reserve(n)) == n
    assert ick.commit(*members) == n
    assert sizes(ick) == (0, 0)


def test_operations_inside_one_pipeline(any_client: Any) -> None:
    ick = Ick(any_client, "piped")

    def build(pipe: Any) -> None:
        scripts.queue(pipe, "ickadd", ick.keys.base, [pack_pairs("bac", [2, 1, 3])])
        scripts.queue(pipe, "ickexchange", ick.keys.base, [2, "0"])
        scripts.queue(pipe, "ickexchange", ick.keys.base, [2, "0", "a"])
        scripts.queue(pipe, "ickstats", ick.keys.base)

    scripts.ensure_loaded(any_client, "ickadd", "ickexchange", "ickstats")
    pipe = any_client.pipeline(transaction=False)
    build(pipe)
    added, reserved, exchanged, stats = pipe.execute()
    assert added == [3, 0]
    assert pairs(reserved[1]) == [("a", 1.0), ("b", 2.0)]
    assert exchanged[0] == 1
    assert pairs(exchanged[1]) == [("b", 2.0), ("c", 3.0)]
    parsed = parse_stats(stats)
    assert parsed is not None
    assert (parsed["pset_size"], parsed["cset_size"]) == (0, 2)


def test_scripts_are_reloaded_after_script_flush(any_client: Any) -> None:
    ick = Ick(any_client, "noscript")
    ick.add({"a": 1})
    any_client.script_flush()
    assert ick.add({"b": 2}) == (1, 0)  # pipelined path
    any_client.script_flush()
    assert ick.reserve(2) == [("a", 1.0), ("b", 2.0)]  # single-call path


@pytest.mark.parametrize("op", ["add", "reserve", "commit", "stats"])
def test_wrong_key_types_and_a_missing_flag_are_errors(client: Any, op: str) -> None:
    ick = Ick(client, "broken")
    call = {
        "add": lambda: ick.add({"a": 1}),
        "reserve": lambda: ick.reserve(1),
        "commit": lambda: ick.commit("a"),
        "stats": ick.stats,
    }[op]

    client.set(ick.keys.master, "ick.v1")
    client.set(ick.keys.pset, "not a sorted set")
    with pytest.raises(
        IckScriptError,
        match=r"broken/ick/\{broken\}/pset is a string, not a "
        r"sorted set",
    ):
        call()

    client.flushall()
    client.rpush(ick.keys.master, "x")
    with pytest.raises(IckScriptError, match="broken is a list, not an Ick version flag"):
        call()
    assert client.type(ick.keys.master) == b"list"  # not repaired

    client.flushall()
    client.zadd(ick.keys.pset, {"a": 1})
    with pytest.raises(IckScriptError, match="broken has a pset or cset but no version flag"):
        call()
    assert client.exists(ick.keys.master) == 0  # not repaired

    client.flushall()
    client.set(ick.keys.master, "ick.v0")
    with pytest.raises(IckScriptError, match=r"broken holds ick\.v0, expected ick\.v1"):
        call()


@pytest.mark.parametrize("name", ["a{b}", "{x", "y}", "{}"])
def test_braces_are_rejected_before_touching_redis(client: Any, name: str) -> None:
    nowhere = redis.Redis(host="127.0.0.1", port=free_port())  # any command would fail
    braces = re.escape("contains '{' or '}'")
    for target in (nowhere, client):
        with pytest.raises(IckConfigError, match=braces):
            Ick(target, name)
        with pytest.raises(IckConfigError, match=braces):
            ShardedIck(target, name, 4)
    assert client.dbsize() == 0


def test_every_error_derives_from_ick_error() -> None:
    raised = [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, Exception) and obj.__module__ == errors.__name__
    ]
    assert len(raised) >= 6
    assert all(issubclass(cls, IckError) for cls in raised)
    assert all(getattr(pyspark_ick, cls.__name__) is cls for cls in raised)


def test_a_closed_port_is_a_connection_error_quickly() -> None:
    url = f"redis://user:s3cret@127.0.0.1:{free_port()}/0"
    start = time.monotonic()
    with pytest.raises(IckConnectionError) as caught:
        connect(url, retry_timeout=1, timeout=1)
    assert time.monotonic() - start < 5
    assert "s3cret" not in str(caught.value)
    assert "127.0.0.1" in str(caught.value)


def test_a_server_gone_mid_way_is_a_connection_error() -> None:
    server = start_binary()
    try:
        client = connect(server.url, retry_timeout=0, timeout=1)
        ick = Ick(client, "gone")
        ick.add({"a": 1})
    finally:
        server.stop()
    for call in (lambda: ick.add({"b": 1}), lambda: ick.reserve(1)):
        with pytest.raises(IckConnectionError):
            call()


@pytest.mark.parametrize("how", ["delete", "unlink"])
def test_delete_and_unlink_remove_every_key(any_client: Any, how: str) -> None:
    ick = Ick(any_client, "gone")
    other = Ick(any_client, "kept")
    other.add({"x": 1})
    ick.add({"a": 1, "b": 2})
    ick.reserve(1)
    assert getattr(ick, how)() == 3  # master, pset, cset
    assert ick.stats() is None
    assert ick.reserve(1) == []
    assert getattr(ick, how)() == 0
    assert sizes(other) == (1, 0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ick: ick.add({"a": float("nan")}), r"must be a number \(not NaN\), got nan"),
        (
            lambda ick: ick.add({"a": 1.0, "b": float("nan")}, chunk=1),
            "member 'b' must be a number",
        ),
        (lambda ick: ick.add({None: 1.0}), "must not be None"),
        (lambda ick: ick.add({"a": "soon"}), "must be a number .*, got 'soon'"),
        (lambda ick: ick.add({"a": True}), r"member 'a' must be a number .*, got True \(a bool"),
        (
            lambda ick: ick.add({"a": 1.0, "b": False}),
            r"member 'b' must be a number .*, got False \(a bool",
        ),
        (lambda ick: ick.reserve(-1), "n must be an integer >= 0"),
        (lambda ick: ick.exchange(1.5), "n must be an integer >= 0"),
    ],
)
def test_the_client_refuses_what_it_cannot_store(client: Any, call: Any, message: str) -> None:
    ick = Ick(client, "strict")
    with pytest.raises(IckConfigError, match=message):
        call(ick)
    assert ick.stats() is None  # nothing was written


def test_a_pipeline_is_refused_with_a_clear_error(client: Any) -> None:
    pipe = client.pipeline()
    for make in (
        lambda: Ick(pipe, "q"),
        lambda: ShardedIck(pipe, "q", 2),
        lambda: pyspark_ick.Dehydrator(pipe, "d"),
    ):
        with pytest.raises(IckConfigError, match="need a client, not a pipeline"):
            make()
    assert pipe.command_stack == []  # nothing was queued (or run)


@pytest.mark.parametrize(
    "arg",
    [b"garbage", pack_strings([b"1.5"]), pack_strings([b"1.5", b"a", b"2.5"])],
)
def test_ickadd_refuses_an_argument_that_is_not_whole_pairs(any_client: Any, arg: bytes) -> None:
    ick = Ick(any_client, "malformed")
    with pytest.raises(
        IckScriptError,
        match=r"malformed/ick/\{malformed\}/pset: ARGV\[1\] "
        "is not a msgpack array of score, member",
    ):
        scripts.run(any_client, "ickadd", ick.keys.base, [arg])
    assert any_client.exists(*ick.keys.base) == 0  # not even the version flag
