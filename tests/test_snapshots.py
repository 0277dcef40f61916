"""The snapshot reads of one Ick shard (snapshots.py, no Spark): a query reads exactly what
the whole snapshot filtered in Python has; range pages skip nothing while members leave;
holders name the highest open reservation.
"""

from __future__ import annotations

from itertools import count
from math import inf
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_ick import Ick, bounds, scripts
from pyspark_ick.keys import IckKeys
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.snapshots import Query, holders, score_range, snapshot
from pyspark_ick.values import text

MEMBERS = st.sampled_from([b"a", b"b", b"doc:1", b"", "é".encode()]) | st.binary(max_size=3)
SCORES = st.one_of(st.integers(-2, 2).map(float), st.sampled_from([0.5, -inf, inf, 1e300]))
BOUNDS = st.one_of(SCORES, st.floats(-3, 3))
names = count()


def build(client: Any, data: st.DataObject) -> str:
    """A shard with queued members, open reservations, members re-added in flight (queued
    and reserved) and members held by two reservations."""
    key = f"snap{next(names)}"
    ick = Ick(client, key)
    log = ReservationLog(client, key)
    token = log.lease.acquire("t", 60_000)
    head = 0
    for _ in range(data.draw(st.integers(1, 4))):
        adds = data.draw(st.dictionaries(MEMBERS, SCORES, max_size=12))
        reserved = client.zrange(IckKeys(key).cset, 0, -1)
        if reserved:  # re-added in flight
            adds |= data.draw(st.dictionaries(st.sampled_from(reserved), SCORES, max_size=3))
        ick.add(adds)
        head = log.reserve(data.draw(st.integers(0, 6)), head, token).head
    return key


def manifests_holders(client: Any, key: str) -> dict[str, int]:
    """member -> the highest open reservation holding it, from the manifests themselves."""
    reserved, committed = ReservationLog(client, key).counters()
    out: dict[str, int] = {}
    for r in range(committed + 1, reserved + 1):
        out |= {text(m): r for m in client.lrange(IckKeys(key).reservation(r), 0, -1)[0::2]}
    return out


def expected(client: Any, key: str, query: Query) -> tuple[list[Any], list[Any]]:
    """The whole snapshot, filtered by ``query`` in Python."""
    pset, cset, _ = snapshot(client, key)

    def kept(flat: list[Any]) -> list[Any]:
        out: list[Any] = []
        for member, score in zip(flat[0::2], flat[1::2], strict=True):
            if (query.members is None or member in query.members) and query.keeps(score):
                out += (member, score)
        return out

    return (kept(pset) if query.queued else [], kept(cset) if query.reserved else [])


def test_a_query_reads_what_the_whole_snapshot_has_filtered(any_client, monkeypatch):
    @settings(max_examples=60, deadline=None)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        # small pages: many calls, and holders found both ways (by script, by manifests)
        small = data.draw(st.booleans())
        monkeypatch.setattr(bounds, "ITEMS_PER_CALL", 3 if small else 1000)
        key = build(any_client, data)
        pset, cset, holder = snapshot(any_client, key)
        held = manifests_holders(any_client, key)
        assert holder == {text(m): held[text(m)] for m in cset[0::2] if text(m) in held}
        present = pset[0::2] + cset[0::2]
        some = st.lists(st.sampled_from(present) if present else MEMBERS)
        members = data.draw(st.none() | some | st.lists(MEMBERS))
        query = Query(
            members=None if members is None else tuple(dict.fromkeys(members)),
            low=data.draw(BOUNDS),
            high=data.draw(BOUNDS),
            low_open=data.draw(st.booleans()),
            high_open=data.draw(st.booleans()),
            queued=data.draw(st.booleans()),
            reserved=data.draw(st.booleans()),
            holders=data.draw(st.booleans()),
        )
        got_pset, got_cset, got_holder = snapshot(any_client, key, query)
        assert (got_pset, got_cset) == expected(any_client, key, query)
        wanted = {text(m): held[text(m)] for m in got_cset[0::2] if text(m) in held}
        assert got_holder == (wanted if query.holders else {})

    check()


def test_holders_read_from_every_manifest_name_only_the_members_asked_for(any_client, monkeypatch):
    """The example Hypothesis found on a clean clone: with more members asked for than a
    page holds, holders read every open manifest and once named all of their members, here
    b"\x01" (score 1), which a query of the scores [0, 0] did not keep."""
    monkeypatch.setattr(bounds, "ITEMS_PER_CALL", 3)
    key = "snapexample"
    log = ReservationLog(any_client, key)
    Ick(any_client, key).add({b"a": 0.0, b"b": 0.0, b"c": 0.0, b"d": 0.0, b"\x01": 1.0})
    log.reserve(5, 0, log.lease.acquire("t", 60_000))
    _, cset, holder = snapshot(any_client, key, Query(low=0.0, high=0.0))
    assert cset[0::2] == [b"a", b"b", b"c", b"d"]
    assert holder == {"a": 1, "b": 1, "c": 1, "d": 1}


def test_range_pages_skip_no_member_while_members_before_them_leave(client):
    """The first page leaves (reserved, say) with the member that ended it, and the member
    that ended the second page moves down: every member is still read, each once."""
    key = IckKeys("ranged").pset
    per_page = bounds.ITEMS_PER_CALL
    members = {f"t{i:05}": 1.0 for i in range(per_page * 2 + 10)}  # a tie longer than a page
    members |= {f"u{i:05}": 2.0 + i for i in range(per_page)}
    client.zadd(key, members)
    seen: list[bytes] = []
    after: list[Any] = []
    while True:
        page = scripts.run(client, "ick_range", [key], ["-inf", "+inf", per_page, *after])
        seen += page[0::2]
        if len(page) < 2 * per_page:
            break
        after = [page[-1], page[-2]]
        if len(seen) == per_page:
            client.zrem(key, *page[0::2])
        else:
            client.zadd(key, {page[-2]: 0.5})
    assert sorted(seen) == sorted(m.encode() for m in members)


def test_a_range_read_is_exact_at_its_bounds(client):
    key = IckKeys("bounded").pset
    client.zadd(key, {"lo": 1.0, "mid": 1.5, "hi": 2.0, "inf": inf, "-inf": -inf})

    def members(low: str, high: str) -> list[bytes]:
        return score_range(client, key, low, high, "test")[0::2]

    assert members("1", "2") == [b"lo", b"mid", b"hi"]
    assert members("(1", "(2") == [b"mid"]
    assert members("-inf", "(1") == [b"-inf"]
    assert members("(-inf", "1") == [b"lo"]
    assert members("(2", "+inf") == [b"inf"]
    assert members("(2", "(inf") == []
    assert members("2", "1") == []


def test_holders_name_the_highest_open_reservation(client):
    ick = Ick(client, "held")
    log = ReservationLog(client, "held")
    token = log.lease.acquire("t", 60_000)
    ick.add({"a": 1.0, "b": 2.0})
    first = log.reserve(2, 0, token).head
    ick.add({"a": 0.5})  # re-added in flight: queued and reserved
    second = log.reserve(1, first, token).head  # reserved again: held by both
    assert holders(client, "held", [b"a", b"b", b"zz"]) == {"a": second, "b": first}
    many = [b"a", b"b"] + [f"x{i}".encode() for i in range(bounds.ITEMS_PER_CALL)]
    assert {m: r for m, r in holders(client, "held", many).items() if m in "ab"} == {
        "a": second,
        "b": first,
    }
    log.commit(second, token)
    assert holders(client, "held", [b"a", b"b"]) == {}


@pytest.mark.parametrize("members", [(), (b"nothing",)])
def test_no_member_no_shard_reads_nothing(client, members):
    assert snapshot(client, "absent", Query(members=members)) == ([], [], {})
