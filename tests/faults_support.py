"""Helpers of the fault suite (tests/test_faults.py): producers that record every add Redis
acknowledged, the I1 and I3 checks over what a recording sink (tests/support.py) got, and
how to find a query's reader process.

I1 as in tests/test_reader_crash.py: an add is (member, score, shard, R), R the shard's last
reservation number read in the same MULTI as the add; a delivery of the member from a
reservation > R with a score <= the add's score, by a sink call that ran after the add was
acknowledged, started after the add.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import redis
from support import Sink, descendants

from pyspark_ick import ShardedIck, lua, scripts
from pyspark_ick.ick import queue_add
from pyspark_ick.keys import IckKeys, shard_names, shard_of
from pyspark_ick.reservations import describe
from pyspark_ick.testing import wait_until


class Add(NamedTuple):
    """An add Redis acknowledged; ``kept`` is False when no replica confirmed it (WAIT)."""

    member: str
    score: float
    shard: int
    reserved: int
    at: float  # time.monotonic() of the acknowledgement
    kept: bool = True
    node: int = 0  # the port of the node that ran it (nemesis: which primary took it)


def add_recorded(client: Any, ick: str, shards: int, member: str, score: float) -> Add:
    """Add ``member`` to shard of logical Ick ``ick`` in a MULTI that also reads the shard's
    last reservation number; raises (and nothing counts) unless Redis acknowledged it."""
    shard = shard_of(member, shards)
    keys = IckKeys(shard_names(ick, shards)[shard])
    pipe = client.pipeline(transaction=True)
    queue_add(pipe, keys, [member], [score])
    pipe.hget(keys.rlog, "reserved")
    _, reserved = pipe.execute()
    return Add(member, score, shard, int(reserved or 0), time.monotonic())


def replicated(client: redis.RedisCluster, key: str, timeout_ms: int = 5000) -> bool:
    """True once a replica of the primary of ``key`` has every write the primary made so
    far (its replication offset), False after ``timeout_ms`` (5 s: a loaded machine lags
    the replica by more than a second at times; an add unconfirmed that long before the
    kill fails the test). Not WAIT: WAIT covers the writes of its own connection
    only, and a pooled connection other than the add's answers at once."""
    deadline = time.monotonic() + timeout_ms / 1000
    try:
        primary = client.get_node_from_key(key).redis_connection
        target = int(primary.info("replication")["master_repl_offset"])
        while time.monotonic() < deadline:
            info = primary.info("replication")
            if any(
                int(v["offset"]) >= target
                for k, v in info.items()
                if k.startswith("slave") and isinstance(v, dict)
            ):
                return True
            time.sleep(0.005)
    except (redis.RedisError, redis.exceptions.RedisClusterException):
        pass
    return False


class Loop:
    """A daemon thread calling ``tick()`` every ``period`` seconds until ``stop()``;
    a failed tick is recorded in ``errors`` (not acknowledged: nothing counts)."""

    def __init__(self, name: str, period: float) -> None:
        self.period = period
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def start(self) -> Loop:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread.ident is None:  # never started
            return
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self._thread.name} did not stop"

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - Redis away: try again next tick
                self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                self.recover()

    def tick(self) -> None:
        raise NotImplementedError

    def recover(self) -> None:
        """After a failed tick (default: a short pause)."""
        time.sleep(0.05)


class Producer(Loop):
    """Adds ``hot`` and two random members of ``m0..m{members-1}`` per tick, with strictly
    increasing scores, each in its own MULTI; records every acknowledged add in ``adds``.
    ``wait_replica``: WAIT for a replica after each add (``Add.kept``)."""

    def __init__(
        self,
        client: Any,
        ick: str,
        shards: int,
        members: int = 60,
        period: float = 0.02,
        wait_replica: bool = False,
    ) -> None:
        super().__init__(f"add-{ick}", period)
        self.client, self.ick, self.shards = client, ick, shards
        self.members, self.wait_replica = members, wait_replica
        self.adds: list[Add] = []
        self._rng = random.Random(7)
        self._last = 0.0
        scripts.ensure_loaded(client, "ickadd")

    def tick(self) -> None:
        for member in (
            "hot",
            f"m{self._rng.randrange(self.members)}",
            f"m{self._rng.randrange(self.members)}",
        ):
            self._last = score = max(time.time(), self._last + 1e-6)
            add = add_recorded(self.client, self.ick, self.shards, member, score)
            if self.wait_replica:
                master = shard_names(self.ick, self.shards)[add.shard]
                add = add._replace(kept=replicated(self.client, master))
            self.adds.append(add)

    def recover(self) -> None:
        """The script cache may be new (a restarted or promoted server): load ickadd."""
        try:
            self.client.script_load(lua.source("ickadd"))
        except Exception:  # noqa: BLE001 - still away: the next tick tries again
            time.sleep(0.05)

    def acked_since(self, moment: float, shards: set[int] | None = None) -> int:
        """Adds acknowledged after ``moment`` (time.monotonic()), of ``shards`` if given."""
        return sum(
            1 for a in list(self.adds) if a.at > moment and (shards is None or a.shard in shards)
        )


class Parker(Loop):
    """Parks new ids ``p0, p1, ...`` in ``dehydrator`` (delays 0-200 ms), a few per tick;
    ``parked`` maps each acknowledged id to the time.monotonic() of the acknowledgement."""

    def __init__(self, dehydrator: Any, period: float = 0.05) -> None:
        super().__init__(f"park-{dehydrator.name}", period)
        self.dehydrator = dehydrator
        self.parked: dict[str, float] = {}
        self._next = 0

    def tick(self) -> None:
        ids = [f"p{self._next + k}" for k in range(4)]
        self._next += 4
        self.dehydrator.park(ids, [f"element of {i}" for i in ids], [0, 50, 100, 200])
        now = time.monotonic()
        self.parked.update(dict.fromkeys(ids, now))

    def acked_since(self, moment: float) -> int:
        return sum(1 for at in list(self.parked.values()) if at > moment)


def check_deliveries(sink: Sink) -> int:
    """No empty batch (a batch runs only when something was reserved, so an empty one lost
    it) and I3: every replay of a batch id has the same rows. Returns the replays."""
    by_batch: dict[int, list[list[Any]]] = defaultdict(list)
    for d in sink.snapshot():
        assert d.rows, f"batch {d.batch} was delivered empty"
        by_batch[d.batch].append(d.sorted_rows)
    for batch, versions in by_batch.items():
        assert all(v == versions[0] for v in versions), f"batch {batch} replayed differently"
    return sum(len(v) - 1 for v in by_batch.values())


def check_i1(adds: Iterable[Add], sink: Sink, what: str) -> int:
    """I1 for every add: a delivery of its member from a reservation > R with a score <=
    the add's score, whose sink ran after the add was acknowledged (a reservation number
    alone could be one Redis lost in a failover and numbered again). Returns the count."""
    delivered: dict[str, list[tuple[float, int, float]]] = defaultdict(list)
    numbers: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for d in sink.snapshot():
        for member, score, shard, reservation, _attempt in d.rows:
            delivered[member].append((score, reservation, d.at))
            numbers[shard][reservation].append(d.batch)
    checked = 0
    for add in adds:
        found = delivered[add.member]
        near = {
            r: sorted(set(b))
            for r, b in sorted(numbers[add.shard].items())
            if abs(r - add.reserved) <= 3
        }  # which batches delivered the numbers around R
        assert any(s <= add.score and r > add.reserved and at > add.at for s, r, at in found), (
            f"{what}: add of {add.member} at {add.score} (shard {add.shard}, after reservation "
            f"{add.reserved}) was never delivered: {sorted(found)[-5:]}; reservations of the "
            f"shard around it -> batches: {near}"
        )
        checked += 1
    return checked


def drained(client: Any, ick: str, shards: int) -> bool:
    """True when the Ick is empty and no reservation is open."""
    if ShardedIck(client, ick, shards).stats()["total_size"]:
        return False
    return all(describe(client, k)["open_reservations"] == 0 for k in shard_names(ick, shards))


def wait_running(query: Any, check: Callable[[], Any], timeout: float, what: str) -> Any:
    """``wait_until(check)`` while the query runs: fails at once, with the query's
    exception, when the query stops first."""
    try:
        value = wait_until(
            lambda: not query.isActive or check(), timeout=timeout, interval=0.1, what=what
        )
    except TimeoutError as exc:
        raise AssertionError(str(exc)) from None
    assert query.isActive, f"the query stopped while waiting for {what}: {query.exception()}"
    return value


def source_runners() -> set[int]:
    """Pids of Spark's Python stream-source processes (one per running Python source:
    the driver side of a reader, where its lease heartbeat runs) under this process."""
    return {
        pid
        for pid, command in descendants(os.getpid()).items()
        if "python_streaming_source_runner" in command
    }
