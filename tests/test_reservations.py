"""The reservation log and the lease (no Spark), against an in-memory model.

The model of the log: reserve(limit, after) counts the reservations past ``after`` that
exist already against ``limit`` (None: everything), pops the rest (lowest score, then
member bytes) from the pset into a new manifest and folds them into the cset;
commit(through) closes every reservation <= through, and a member leaves the cset unless
a later open reservation holds it; commits are idempotent and may come repeated or out
of order; reading a committed reservation is an error (it must exist), never empty.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from pyspark_ick import Ick, IckScriptError, LeaseError, bounds
from pyspark_ick.errors import LeaseBusy
from pyspark_ick.reservations import ReservationLog, describe
from pyspark_ick.snapshots import snapshot
from pyspark_ick.testing import wait_until
from pyspark_ick.values import pairs, text

MEMBERS = st.sampled_from(["a", "b", "c", "d", "e", "doc:1", "doc:10", "é"])
SCORES = st.integers(-2, 3).map(float)
TTL = 30_000


def order(item: tuple[str, float]) -> tuple[float, bytes]:
    return item[1], item[0].encode()


class LogModel:
    def __init__(self) -> None:
        self.pset: dict[str, float] = {}
        self.cset: dict[str, float] = {}
        self.manifests: dict[int, dict[str, float]] = {}
        self.reserved = self.committed = 0

    def add(self, member: str, score: float) -> None:
        self.pset[member] = min(self.pset.get(member, score), score)

    def reserve(self, limit: int | None, after: int) -> tuple[int, int, int]:
        """(last reservation, members moved, members in the reservations past after)."""
        if limit is None:
            limit = len(self.pset) + sum(len(m) for m in self.manifests.values())
        pending = sum(len(self.manifests.get(r, {})) for r in range(after + 1, self.reserved + 1))
        limit -= pending
        if limit <= 0 or not self.pset:
            return self.reserved, 0, pending
        taken = sorted(self.pset.items(), key=order)[:limit]
        self.reserved += 1
        self.manifests[self.reserved] = dict(taken)
        for member, score in taken:
            del self.pset[member]
            self.cset[member] = min(self.cset.get(member, score), score)
        return self.reserved, len(taken), pending + len(taken)

    def commit(self, through: int) -> int:
        through = min(through, self.reserved)
        if through <= self.committed:
            return self.committed
        later = [self.manifests[r] for r in range(through + 1, self.reserved + 1)]
        for r in range(self.committed + 1, through + 1):
            for member in self.manifests.pop(r):
                if not any(member in m for m in later):
                    self.cset.pop(member, None)
        self.committed = through
        return through


def test_reservation_log_matches_model(any_client):
    names = iter(range(10**6))

    class Machine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.name = f"rl{next(names)}"  # a fresh Ick per example
            self.ick = Ick(any_client, self.name)
            self.log = ReservationLog(any_client, self.name)
            self.token = self.log.lease.acquire("me", TTL)
            self.model = LogModel()

        @rule(member=MEMBERS, score=SCORES)
        def add(self, member: str, score: float) -> None:
            self.ick.add({member: score})
            self.model.add(member, score)

        @rule(limit=st.one_of(st.none(), st.integers(0, 4)), back=st.integers(0, 2))
        def reserve(self, limit: int | None, back: int) -> None:
            # `after` is a logged offset: the last committed number or a later one
            after = max(self.model.committed, self.model.reserved - back)
            assert self.log.reserve(limit, after, self.token) == self.model.reserve(limit, after)

        @rule(through=st.integers(-1, 2))
        def commit(self, through: int) -> None:
            # repeated, out of order, or past the last reservation
            target = self.model.committed + through
            assert self.log.commit(target, self.token) == self.model.commit(target)

        @rule(start=st.integers(0, 3), size=st.integers(0, 3))
        def read(self, start: int, size: int) -> None:
            if start < self.model.committed and size > 0:  # gone: an error, never empty
                with pytest.raises(IckScriptError, match="committed already"):
                    self.log.read(start, start + size)
                return
            got = {m.number: pairs(m.items) for m in self.log.read(start, start + size)}
            want = {
                r: sorted(m.items(), key=order)
                for r, m in self.model.manifests.items()
                if start < r <= start + size
            }
            assert got == want

        @invariant()
        def sets_and_counters_agree(self) -> None:
            stats = self.ick.stats()
            if stats is None:
                assert not self.model.pset and not self.model.cset
                return
            pset, cset, holder = snapshot(any_client, self.name)
            assert dict(pairs(pset)) == self.model.pset
            assert dict(pairs(cset)) == self.model.cset
            info = describe(any_client, self.name)
            assert (info["last_reserved"], info["last_committed"]) == (
                self.model.reserved,
                self.model.committed,
            )
            assert set(holder) <= set(self.model.cset)

    run_state_machine_as_test(
        Machine, settings=settings(max_examples=40, stateful_step_count=30, deadline=None)
    )


def test_a_big_reserve_is_many_bounded_reservations(client):
    ick = Ick(client, "big")
    ick.add({f"m{i:05}": float(i) for i in range(20_000)})
    log = ReservationLog(client, "big")
    token = log.lease.acquire("me", TTL)
    per_call = bounds.MOVES_PER_CALL
    last, moved, pending = log.reserve(None, 0, token)
    assert (last, moved, pending) == (-(-20_000 // per_call), 20_000, 20_000)
    ick.add({"m00007": -1.0})  # re-dirtied while in flight
    assert log.reserve(10, last, token) == (last + 1, 1, 1)
    entries = log.read(0, last)
    assert [m.number for m in entries] == list(range(1, last + 1))
    assert max(len(m.items) // 2 for m in entries) == per_call
    assert [text(x) for m in entries for x in m.items[0::2]] == [
        f"m{i:05}" for i in range(20_000)
    ]  # lowest scores first, each once
    assert log.commit(last, token) == last
    assert ick.stats()["cset_size"] == 1  # held by the later reservation still
    assert log.commit(last + 1, token) == last + 1
    assert ick.stats()["total_size"] == 0
    assert describe(client, "big")["open_members"] == 0


def test_describe_for_operators(client):
    assert describe(client, "none") == {
        "last_reserved": 0,
        "last_committed": 0,
        "open_reservations": 0,
        "open_members": 0,
        "lease_owner": None,
        "lease_expires_in_ms": None,
        "lease_idle_ms": None,
        "done": 0,
    }
    Ick(client, "d").add({"a": 1, "b": 2, "c": 3})
    log = ReservationLog(client, "d")
    token = log.lease.acquire("indexer", 10_000)
    log.reserve(2, 0, token)
    log.reserve(2, 1, token)
    info = describe(client, "d")
    assert info["open_reservations"] == 2 and info["open_members"] == 3
    assert info["lease_owner"] == "indexer"
    assert 9_000 < info["lease_expires_in_ms"] <= 10_000
    log.commit(1, token)
    assert describe(client, "d")["done"] == 2  # members the commits closed, in all
    log.commit(2, token)
    assert describe(client, "d")["done"] == 3
    log.lease.release(token)
    assert describe(client, "d")["lease_owner"] is None


def test_lease_refuses_a_second_owner_and_fences_the_old_token(any_client):
    Ick(any_client, "l").add({"a": 1})
    log = ReservationLog(any_client, "l", "Ick 'l' shard 0")
    first = log.lease.acquire("alpha", TTL)
    with pytest.raises(LeaseBusy, match=r"Ick 'l' shard 0.*'alpha' holds the lease"):
        log.lease.acquire("beta", TTL)
    again = log.lease.acquire("alpha", TTL)  # a restart with the same consumerId
    assert again.token > first.token
    with pytest.raises(LeaseError, match="lost its lease"):
        log.reserve(10, 0, first)
    with pytest.raises(LeaseError, match="lost its lease"):
        log.commit(0, first)
    with pytest.raises(LeaseError, match="lost its lease"):
        log.lease.renew(first)
    assert log.reserve(10, 0, again) == (1, 1, 1)


def test_lease_expires_and_the_stale_consumer_cannot_commit(client):
    Ick(client, "x").add({"a": 1, "b": 2})
    log = ReservationLog(client, "x")
    old = log.lease.acquire("old", 200)
    expiry, renewed = map(int, client.hmget(log.lease.key, "expiry", "renewed"))
    assert expiry - renewed == 200  # expires after its own lease time, not TTL
    assert log.reserve(1, 0, old) == (1, 1, 1)
    with pytest.raises(LeaseBusy):
        log.lease.acquire("new", 200)
    new = wait_until(lambda: log.lease.acquire("new", TTL), timeout=5, what="lease expiry")
    with pytest.raises(LeaseError, match="'new' holds it now"):
        log.commit(1, old)
    assert describe(client, "x")["last_committed"] == 0
    assert log.commit(1, new) == 1
