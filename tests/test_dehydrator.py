"""The dehydrator client: every example of the ReDe command docs, with Redis time.

The docs' TTLs (1000 and 3000 ms) are scaled down. An assertion that something is not due
yet also accepts a release when Redis time really passed the due time (a stalled test
machine must not fail it), so each one can only fail on an early release.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packing import decode_rows, pack_strings
from support import redis_ms

from pyspark_ick import Dehydrator, IckConfigError, IckError, ShardCountError, scripts
from pyspark_ick.columns import pack_rows
from pyspark_ick.keys import DehydratorKeys
from pyspark_ick.packing import pack_plain
from pyspark_ick.testing import wait_until

SHORT, LONG = 250, 750  # the docs' 1000 and 3000 ms


class Clocked:
    """A dehydrator whose poll, xpoll and ttn assert that nothing is released early.

    ``earliest[id]`` is Redis time before the push plus the TTL: the script read its time
    after that, so a release seen before Redis time reaches it is early for sure.
    """

    def __init__(self, client, name="my_dehydrator") -> None:
        self.client = client
        self.d = Dehydrator(client, name)
        self.earliest: dict[str, int] = {}
        self.ids: dict[str, str] = {}  # element -> id

    def push(self, id, element, ttl) -> None:
        before = redis_ms(self.client)
        self.d.push(id, element, ttl)
        self.earliest[str(id)], self.ids[element] = before + ttl, str(id)

    def _check(self, ids) -> None:
        now = redis_ms(self.client)
        early = [id for id in ids if self.earliest[id] > now]
        assert not early, f"released before due: {early}"

    def poll(self) -> list[str]:
        got = self.d.poll()
        self._check(self.ids[e] for e in got)
        return got

    def xpoll(self) -> list[str]:
        got = self.d.xpoll()
        self._check(got)
        return got

    def ttn(self) -> int:
        wait = self.d.ttn()
        if wait == 0:  # something is due: the earliest one must be
            self._check([min(self.earliest, key=self.earliest.get)])
        return wait


def test_push_example(client):
    c = Clocked(client)
    c.push(101, "Dehydrate this", SHORT)
    assert c.d.look(101) == "Dehydrate this"
    got = c.poll()  # (empty list or set), unless the machine stalled past the due time
    assert got or c.d.look(101) == "Dehydrate this"
    assert (got or wait_until(c.poll, what="due")) == ["Dehydrate this"]


def test_gidpush_example(client):
    c = Clocked(client)
    d = c.d
    before = redis_ms(client)
    id = d.gidpush("Dehydrate this", SHORT)
    c.earliest[id], c.ids["Dehydrate this"] = before + SHORT, id
    assert isinstance(id, str) and len(id) == 32
    assert d.look(id) == "Dehydrate this"
    got = c.poll()
    assert (got or wait_until(c.poll, what="due")) == ["Dehydrate this"]
    assert d.gidpush("again", 0) != id


def test_pull_example(client):
    d = Dehydrator(client, "my_dehydrator")
    d.push(101, "Dehydrate this", 3000)
    assert d.pull(101) == "Dehydrate this"
    assert d.pull(101) is None
    assert d.size() == 0 and d.ttn() == -1


def test_poll_example(client):
    c = Clocked(client)
    c.push(101, "Dehydrate this", LONG)
    c.push(102, "Dehydrate that", SHORT)
    got = c.poll()
    got += [] if got else wait_until(c.poll, what="'Dehydrate that'")
    assert got[0] == "Dehydrate that"
    got += [] if len(got) == 2 else wait_until(c.poll, what="'Dehydrate this'")
    assert got == ["Dehydrate that", "Dehydrate this"]
    assert c.poll() == []


def test_xpoll_example(client):
    c = Clocked(client)
    c.push(101, "Dehydrate this", LONG)
    c.push(102, "Dehydrate that", SHORT)
    assert c.xpoll() in ([], ["102"], ["102", "101"])
    assert wait_until(c.xpoll, what="102 due")[0] == "102"
    # the docs list both ids in id order; here they come in due order
    assert wait_until(lambda: len(ids := c.xpoll()) == 2 and ids) == ["102", "101"]
    assert c.d.size() == 2  # xpoll removes nothing


def test_xack_example(client):
    c = Clocked(client)
    c.push(101, "Dehydrate this", LONG)
    c.push(102, "Dehydrate that", SHORT)
    assert wait_until(c.poll, what="'Dehydrate that'")[0] == "Dehydrate that"
    assert wait_until(c.xpoll, what="101 due") == ["101"]
    assert c.d.xack(101, 102, 103) == ["Dehydrate this", None, None]
    assert c.d.size() == 0


def test_xack_leaves_elements_not_due(client):
    d = Dehydrator(client, "my_dehydrator")
    d.push(1, "later", 60_000)
    d.push(2, "now", 0)
    assert d.xack(1, 2) == [None, "now"]
    assert d.look(1) == "later"


def test_look_example(client):
    d = Dehydrator(client, "my_dehydrator")
    d.push(101, "Dehydrate this", 3000)
    d.push(102, "Dehydrate that", 3000)
    assert d.look(101) == "Dehydrate this"
    assert d.look(102) == "Dehydrate that"
    # the docs' third LOOK 102 answers (nil): that needs the element gone, e.g. pulled
    assert d.pull(102) == "Dehydrate that"
    assert d.look(102) is None
    assert d.size() == 1


def test_ttn_example(client):
    c = Clocked(client)
    assert c.d.ttn() == -1
    c.push(101, "Dehydrate this", LONG)
    c.push(102, "Dehydrate that", SHORT)
    assert c.ttn() <= SHORT
    assert wait_until(lambda: c.ttn() == 0, what="ttn 0")
    assert c.poll()[0] == "Dehydrate that"
    del c.earliest["102"]
    assert c.ttn() <= LONG - SHORT


def test_update_example_keeps_due_time(client):
    d = Dehydrator(client, "my_dehydrator")
    d.push(101, "Dehydrate this", 60_000)
    due = client.zscore(DehydratorKeys("my_dehydrator").due, "101")
    assert d.update(101, "Dehydrate that") == "Dehydrate this"
    assert d.look(101) == "Dehydrate that"
    assert client.zscore(DehydratorKeys("my_dehydrator").due, "101") == due
    with pytest.raises(IckError, match="does not exist"):
        d.update(999, "nothing")


def test_push_existing_id_raises(client):
    d = Dehydrator(client, "my_dehydrator")
    d.push(101, "first", 60_000)
    with pytest.raises(IckError, match="101 already exists"):
        d.push(101, "second", 10)
    assert d.look(101) == "first"
    d.pull(101)
    d.push(101, "again", 10)  # once gone, the id is free
    assert d.look(101) == "again"


@pytest.mark.parametrize("ttl", [-1, 1.5, "10", None, True, 2**63, 2**52 + 1])
def test_bad_ttl_raises_before_redis(client, ttl):
    with pytest.raises(IckConfigError, match="ttl_ms"):
        Dehydrator(client, "my_dehydrator").push(1, "x", ttl)
    assert client.dbsize() == 0


def test_bytes_elements(client):
    d = Dehydrator(client, "bin", decode=False)
    blob = bytes(range(256))
    d.push("b", blob, 0)
    assert d.look("b") == blob
    assert d.poll() == [blob]
    assert Dehydrator(client, "bin").gidpush("text", 0)
    assert d.poll() == [b"text"]


def test_name_with_braces_rejected(client):
    with pytest.raises(IckConfigError, match="braces"):
        Dehydrator(client, "a{b}")


def test_nothing_released_before_due_by_redis_clock(client):
    d = Dehydrator(client, "many", shards=3)
    ttls = {str(i): (i * 37) % 400 for i in range(300)}
    start = redis_ms(client)  # every due time is >= start + ttl
    d.park(list(ttls), [f"e{i}" for i in ttls], list(ttls.values()))
    released: list[str] = []

    def drain() -> bool:
        got = d.xpoll()
        now = redis_ms(client)
        early = [id for id in got if start + ttls[id] > now]
        assert not early, f"released before due: {early}"
        assert d.xack(*got) == [f"e{id}" for id in got]
        released.extend(got)
        return len(released) == len(ttls)

    wait_until(drain, interval=0.005, what="every element")
    assert sorted(released) == sorted(ttls)


def test_sharded_commands_combine_shards(any_client):
    d = Dehydrator(any_client, "sharded", shards=4)
    d.park([f"i{n}" for n in range(40)], [f"e{n}" for n in range(40)], [0] * 20 + [60_000] * 20)
    assert {d.shard_of(f"i{n}") for n in range(40)} == {0, 1, 2, 3}
    assert d.ttn() == 0
    assert sorted(d.xpoll()) == sorted(f"i{n}" for n in range(20))
    assert d.xack("i0", "i39", "nope") == ["e0", None, None]
    assert sorted(d.poll()) == sorted(f"e{n}" for n in range(1, 20))
    assert 59_000 < d.ttn() <= 60_000
    assert d.look("i33") == "e33" and d.pull("i33") == "e33"
    assert d.update("i34", "new") == "e34" and d.look("i34") == "new"
    assert d.size() == 19
    with pytest.raises(ShardCountError, match=r"4 shards recorded.*2 were given"):
        Dehydrator(any_client, "sharded", shards=2).poll()
    assert d.delete() > 0
    assert Dehydrator(any_client, "sharded", shards=2).size() == 0


def test_poll_takes_more_than_one_script_call(client):
    d = Dehydrator(client, "big", shards=2)
    n = 9000  # more than ITEMS_PER_CALL per shard
    d.park([str(i) for i in range(n)], [f"e{i}" for i in range(n)], [0] * n)
    assert sorted(d.poll()) == sorted(f"e{i}" for i in range(n))
    assert d.size() == 0


def test_park_modes(client):
    d = Dehydrator(client, "modes")
    assert d.park(["a", "b", "a"], ["1", "2", "3"], [60_000] * 3) == (2, 1)
    assert d.look("a") == "1"  # keep: the first one stays
    assert d.park(["a"], ["4"], [0], on_duplicate="replace") == (0, 1)
    assert d.look("a") == "4" and d.poll() == ["4"]  # replace: new element, new due time
    with pytest.raises(IckError, match="b already exists"):
        d.park(["c", "b"], ["5", "6"], [0, 0], on_duplicate="error")
    assert d.look("c") is None  # error: nothing of the call was written
    due = 2_000_000_000_000
    d.park(["z"], ["at"], [due], at=True)
    assert client.zscore(DehydratorKeys("modes").due, "z") == due
    with pytest.raises(IckConfigError, match="on_duplicate"):
        d.park(["x"], ["y"], [0], on_duplicate="ignore")


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(max_size=6), st.binary(max_size=6), st.floats(0, 1e15, allow_nan=False)),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 7),
)
def test_columns_pack_like_the_plain_client(rows, chunk):
    ids, elements, times = ([r[i] for r in rows] for i in range(3))
    arrow = pack_rows(
        pa.array(ids), pa.array(elements, pa.binary()), np.array(times, np.float64), chunk
    )
    plain = pack_plain(ids, elements, times, chunk)

    def decoded(packed: bytes) -> list[tuple[float, str, bytes]]:  # the same values, spelt
        return [(float(t), i.decode(), e) for t, i, e in decode_rows(packed, 3)]  # apart

    assert [decoded(a) for a in arrow] == [decoded(p) for p in plain]


def test_due_times_are_exact_whatever_the_delay(client):
    d = Dehydrator(client, "exact", clock=lambda: 1_763_851_234_567)
    delays = [0, 0.5, 30_000, 30_000, 1e-3, 2**40 + 0.25]
    d.park([f"d{i}" for i in range(len(delays))], ["x"] * len(delays), delays)
    d.park(["at"], ["x"], [2_000_000_000_000.125], at=True)
    due = dict(client.zrange(DehydratorKeys("exact").due, 0, -1, withscores=True))
    assert due == {
        **{f"d{i}".encode(): 1_763_851_234_567 + t for i, t in enumerate(delays)},
        b"at": 2_000_000_000_000.125,
    }


@pytest.mark.parametrize("shards", [1, 3])
def test_poll_returns_earliest_due_first_across_pages_and_shards(client, shards):
    n = 2_500  # three calls of ITEMS_PER_CALL per shard at most
    d = Dehydrator(client, f"order{shards}", shards, clock=lambda: 10_000_000)
    d.park(
        [f"id{i}" for i in range(n)],
        [f"e{i}" for i in range(n)],
        [1_000_000 + (n - i) * 7 % n for i in range(n)],
        at=True,
    )
    expected = [f"e{i}" for i in sorted(range(n), key=lambda i: (n - i) * 7 % n)]
    assert d.xpoll() == [e.replace("e", "id") for e in expected]
    assert d.poll() == expected
    assert d.size() == 0


@pytest.mark.parametrize(
    "arg",
    [b"garbage", pack_strings([b"0", b"id"]), pack_strings([b"soon", b"id", b"x"])],
)
def test_dh_push_refuses_an_argument_that_is_not_whole_rows(client, arg):
    keys = DehydratorKeys("malformed")
    with pytest.raises(IckError, match=r"malformed.*not a msgpack array|time must be a number"):
        scripts.run(client, "dh_push", keys.store, ["keep", "", "delay", arg])
    assert client.exists(*keys.store) == 0


def test_a_histogram_of_due_times_counts_every_parked_element_once(client):
    from pyspark_ick.dehydrator_view import due_histogram

    d = Dehydrator(client, "hist", 3)
    assert due_histogram(client, "hist", 3)["counts"] == [0] * 13
    d.park([f"now{i}" for i in range(5)], ["x"] * 5, [0] * 5)
    d.park([f"soon{i}" for i in range(7)], ["x"] * 7, [60_000] * 7)
    d.park([f"late{i}" for i in range(4)], ["x"] * 4, [3_600_000] * 4)
    report = due_histogram(client, "hist", 3, buckets=6)
    counts, edges = report["counts"], report["edges"]
    assert len(counts) == 7 and len(edges) == 7 and sum(counts) == 16
    assert counts[0] == 5 and counts[1] == 7 and counts[-1] == 4
    assert edges[0] == report["now_ms"] and edges[-1] >= report["now_ms"] + 3_599_000
