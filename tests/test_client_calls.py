"""How the plain client sends its calls (issue 27): bulk writes keep at most two calls out
on a connection (one running, the next sent behind it, packed while the first ran), and
the retry rule of docs/design.md §7 holds for each of them: a refusal does not stop the
other calls and is raised at the end, NOSCRIPT reloads, a call cut off by a dropped
connection is made again when it is replay-safe; calls that are not go one at a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.connection import AbstractConnection

from pyspark_ick import Dehydrator, Ick, IckScriptError, ShardedIck, connect
from pyspark_ick.packing import pack_values
from pyspark_ick.pipe import run_many
from pyspark_ick.testing import wait_until


class Outstanding:
    """The most commands one connection had sent and not read the reply of."""

    def __init__(self) -> None:
        self.out: dict[int, int] = {}
        self.most = 0
        self.sent = 0

    def sent_on(self, conn: Any) -> None:
        self.out[id(conn)] = self.out.get(id(conn), 0) + 1
        self.most = max(self.most, self.out[id(conn)])
        self.sent += 1

    def read_on(self, conn: Any) -> None:
        self.out[id(conn)] = max(0, self.out.get(id(conn), 0) - 1)


@pytest.fixture
def outstanding(monkeypatch: pytest.MonkeyPatch) -> Iterator[Outstanding]:
    spy = Outstanding()
    send, read = AbstractConnection.send_command, AbstractConnection.read_response
    disconnect = AbstractConnection.disconnect

    def send_command(self: Any, *args: Any, **kw: Any) -> Any:
        spy.sent_on(self)
        return send(self, *args, **kw)

    def read_response(self: Any, *args: Any, **kw: Any) -> Any:
        try:
            return read(self, *args, **kw)
        finally:
            spy.read_on(self)

    def dropped(self: Any, *args: Any, **kw: Any) -> Any:
        spy.out.pop(id(self), None)
        return disconnect(self, *args, **kw)

    monkeypatch.setattr(AbstractConnection, "send_command", send_command)
    monkeypatch.setattr(AbstractConnection, "read_response", read_response)
    monkeypatch.setattr(AbstractConnection, "disconnect", dropped)
    yield spy


MEMBERS = {f"m{i}": float(i % 97) for i in range(5000)}


@pytest.mark.parametrize(
    "write",
    [
        lambda c: Ick(c, "two").add(MEMBERS, chunk=100),
        lambda c: ShardedIck(c, "two", 3).add(MEMBERS, chunk=100),
        lambda c: Dehydrator(c, "two", 3).park(
            list(MEMBERS), list(MEMBERS), [60_000] * 5000, chunk=100
        ),
    ],
    ids=["Ick.add", "ShardedIck.add", "Dehydrator.park"],
)
def test_bulk_writes_keep_two_calls_out_at_most(
    any_client: Any, outstanding: Outstanding, write: Any
) -> None:
    write(any_client)  # loads the scripts, records the shard count
    outstanding.most = outstanding.sent = 0
    write(any_client)
    assert outstanding.sent >= 50
    assert outstanding.most == 2  # the next call goes out before the reply of the one before


def test_calls_that_are_not_replay_safe_go_one_at_a_time(
    client: Any, outstanding: Outstanding
) -> None:
    d = Dehydrator(client, "single", 2)
    ids = [f"id{i}" for i in range(1000)]
    assert d.park(ids, ids, [60_000] * 1000, on_duplicate="error", chunk=50) == (1000, 0)
    assert outstanding.most == 1
    assert d.park(ids, ids, [60_000] * 1000, on_duplicate="keep", chunk=50) == (0, 1000)
    assert outstanding.most == 2


def test_the_spark_sinks_calls_go_one_at_a_time(client: Any, outstanding: Outstanding) -> None:
    """The sinks' tasks run side by side (local[2]: two tasks), so two out each would be
    four calls ahead of a neighbour: they keep one."""
    np = pytest.importorskip("numpy")
    pa = pytest.importorskip("pyarrow")
    from pyspark_ick.columns import pack_pairs

    sharded = ShardedIck(client, "sink", 2)
    sharded.check_shards()
    members = pa.array([f"m{i}" for i in range(2000)])
    scores = pa.array([float(i) for i in range(2000)], pa.float64())
    outstanding.most = outstanding.sent = 0
    assert sharded.add_packed({0: pack_pairs(members, scores, 100)}) == (2000, 0)
    d = Dehydrator(client, "sink")
    d.park_arrays(members, members, np.full(2000, 60_000.0), chunk=100)
    assert outstanding.sent >= 40
    assert outstanding.most == 1


def test_every_call_runs_and_the_first_refusal_is_raised_at_the_end(any_client: Any) -> None:
    sharded = ShardedIck(any_client, "refusing", 4)
    sharded.check_shards()
    any_client.zadd(sharded.shard(1).keys.pset, {"flagless": 1.0})  # refused by ickadd
    members = {f"m{i}": float(i) for i in range(2000)}
    with pytest.raises(IckScriptError, match="refusing:1 has a pset or cset but no version"):
        sharded.add(members, chunk=50)
    for i in (0, 2, 3):
        wanted = {m for m in members if sharded.shard_of(m) == i}
        assert {m.decode() for m in any_client.zrange(sharded.shard(i).keys.pset, 0, -1)} >= wanted


def test_replies_keep_the_order_of_the_calls_around_a_refusal(client: Any) -> None:
    """Ick.add sums the replies of its calls: a refused call in the middle gives None and
    the others their own reply, so the totals of the next add are exact."""
    ick = Ick(client, "ordered")
    calls = [("ickadd", ick.keys.base, [pack_values(["1.0", f"a{i}"])]) for i in range(5)]
    calls[2] = ("ickadd", ick.keys.base, [b"garbage"])
    with pytest.raises(IckScriptError, match="not a msgpack array"):
        run_many(client, calls)
    assert client.zcard(ick.keys.pset) == 4
    replies = run_many(
        client,
        [calls[0], calls[1], ("ickadd", ick.keys.base, [pack_values(["0.5", "a9"])])],
    )
    assert replies == [[0, 0], [0, 0], [1, 0]]


def test_script_flush_between_pipelined_calls_reloads(any_client: Any) -> None:
    ick = Ick(any_client, "flushed")
    ick.add({"a": 1.0})
    any_client.script_flush()
    assert ick.add({f"m{i}": float(i) for i in range(300)}, chunk=10) == (300, 0)


def test_a_connection_killed_during_a_bulk_add_is_ridden_out(client: Any, redis_url: str) -> None:
    """ickadd is replay-safe: the calls out when the connection dropped are made again."""
    ick = Ick(client, "killed")
    members = {f"m{i}": float(i) for i in range(100_000)}
    killer = connect(redis_url)
    kills = 0

    def kill() -> None:
        nonlocal kills
        wait_until(lambda: killer.exists(ick.keys.pset), timeout=30)
        for _ in range(3):
            kills += killer.client_kill_filter(_type="normal", skipme=True)
            time.sleep(0.02)

    thread = threading.Thread(target=kill)
    thread.start()
    ick.add(members, chunk=100)
    thread.join()
    assert kills > 0
    assert client.zcard(ick.keys.pset) == len(members)
    assert dict(ick.reserve(3)) == {"m0": 0.0, "m1": 1.0, "m2": 2.0}


def test_a_dropped_connection_does_not_repeat_a_park_that_is_not_replay_safe(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """on_duplicate='error' is not replay-safe: a reply lost to a reset raises (the call
    may have run), it is not made again to fail on its own ids."""
    d = Dehydrator(client, "unsafe")
    d.park(["warm"], ["x"], [60_000], on_duplicate="error")
    read = AbstractConnection.read_response

    def reset_after_running(self: Any, *args: Any, **kw: Any) -> Any:
        read(self, *args, **kw)
        raise redis.ConnectionError("Connection reset by peer (after the call ran)")

    monkeypatch.setattr(AbstractConnection, "read_response", reset_after_running)
    with pytest.raises(Exception, match="reset by peer"):
        d.park(["a", "b"], ["x", "y"], [60_000] * 2, on_duplicate="error")
    monkeypatch.undo()
    assert d.look("a") == "x"  # it ran once, and was not made again


def test_a_lost_reply_of_a_single_replay_safe_call_is_made_again(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The single-call path (one member) keeps the rule too: ickadd is replay-safe."""
    ick = Ick(client, "lost")
    ick.add({"warm": 1.0})
    read, lost = AbstractConnection.read_response, []

    def reset_once(self: Any, *args: Any, **kw: Any) -> Any:
        reply = read(self, *args, **kw)
        if not lost:
            lost.append(reply)
            raise redis.ConnectionError("Connection reset by peer (after the call ran)")
        return reply

    monkeypatch.setattr(AbstractConnection, "read_response", reset_once)
    assert ick.add({"a": 2.0}) == (0, 0)  # the replay found it added
    monkeypatch.undo()
    assert lost == [[1, 0]]
    assert dict(ick.reserve(2)) == {"warm": 1.0, "a": 2.0}
