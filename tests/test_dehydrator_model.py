"""The dehydrator against an in-memory reference model, with a controllable clock.

The scripts take "now" from the test clock (production passes none and they use Redis
TIME), so due times are exact: an element due at ``now`` is released, one due at
``now + 1`` is not. Two shards, so poll, xpoll and ttn combine shards; claims per shard.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pyspark_ick import Dehydrator, IckError
from pyspark_ick import dehydrator as dehydrator_module

IDS = st.sampled_from(["a", "b", "c", "d", "e", "10", "11"])
ELEMENTS = st.text(alphabet="xyz\u00e9", max_size=3)
TTLS = st.integers(min_value=0, max_value=30)
SHARDS = 2
_names = itertools.count()


class CountingIds:
    """new_id for gidpush, numbered from 1 per example: Hypothesis needs every example to
    draw the same way when it draws the same values, and a random id routes to a random
    shard, which changes how many claims a shard has and so what ``commit`` may draw."""

    n = 0

    @classmethod
    def new_id(cls) -> str:
        cls.n += 1
        return f"{cls.n:032x}"


def test_dehydrator_matches_model(client, monkeypatch):
    monkeypatch.setattr(dehydrator_module, "new_id", CountingIds.new_id)

    class Machine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            CountingIds.n = 0
            self.now = 1_000_000
            self.d = Dehydrator(client, f"model{next(_names)}", SHARDS, clock=lambda: self.now)
            self.live: dict[str, tuple[int, str]] = {}  # id -> (due, element)
            self.claims: list[list[list[tuple[str, int, str]]]] = [[] for _ in range(SHARDS)]
            self.committed = [0] * SHARDS
            self.logs = [self.d.claim_log(i) for i in range(SHARDS)]
            self.tokens = [log.lease.acquire("model", 600_000) for log in self.logs]

        def due_now(self) -> list[str]:
            return [id for id, (due, _) in self.live.items() if due <= self.now]

        def check_order(self, ids: list[str], dues: dict[str, int]) -> None:
            assert [dues[i] for i in ids] == sorted(dues[i] for i in ids)

        @rule(ms=st.integers(min_value=0, max_value=25))
        def advance(self, ms):
            self.now += ms

        @rule(id=IDS, element=ELEMENTS, ttl=TTLS)
        def push(self, id, element, ttl):
            if id in self.live:
                with pytest.raises(IckError, match="already exists"):
                    self.d.push(id, element, ttl)
            else:
                self.d.push(id, element, ttl)
                self.live[id] = (self.now + ttl, element)

        @rule(element=ELEMENTS, ttl=TTLS)
        def gidpush(self, element, ttl):
            id = self.d.gidpush(element, ttl)
            assert id not in self.live
            self.live[id] = (self.now + ttl, element)

        @rule(
            rows=st.lists(st.tuples(IDS, ELEMENTS, TTLS), max_size=6),
            mode=st.sampled_from(["keep", "replace", "error"]),
            at=st.booleans(),
        )
        def park(self, rows, mode, at):
            # one atomic script call per shard: with "error", a shard that meets an id
            # already parked (or twice) writes nothing, the other shards write their rows
            times = [self.now + t if at else t for _, _, t in rows]
            args = ([r[0] for r in rows], [r[1] for r in rows], times)
            by_shard: dict[int, list[tuple[str, str, int]]] = {}
            for row in rows:
                by_shard.setdefault(self.d.shard_of(row[0]), []).append(row)
            clashes = [
                any(i in self.live for i in ids) or len(set(ids)) < len(ids)
                for ids in ([r[0] for r in group] for group in by_shard.values())
            ]
            if mode == "error" and any(clashes):
                with pytest.raises(IckError, match="already exists"):
                    self.d.park(*args, at=at, on_duplicate=mode)
            else:
                got = self.d.park(*args, at=at, on_duplicate=mode)
            new = 0
            for group, clash in zip(by_shard.values(), clashes, strict=True):
                if mode == "error" and clash:
                    continue
                for id, element, ttl in group:
                    new += id not in self.live
                    if id not in self.live or mode == "replace":
                        self.live[id] = (self.now + ttl, element)
            if not (mode == "error" and any(clashes)):
                assert got == (new, len(rows) - new)

        @rule(id=IDS)
        def pull(self, id):
            expected = self.live.pop(id, (0, None))[1]
            assert self.d.pull(id) == expected

        @rule()
        def poll(self):
            due = self.due_now()
            got = self.d.poll()  # (the due order is checked by xpoll)
            assert sorted(got) == sorted(self.live[id][1] for id in due)
            for id in due:
                del self.live[id]

        @rule()
        def xpoll(self):
            due = self.due_now()
            got = self.d.xpoll()
            assert sorted(got) == sorted(due)
            self.check_order(got, {id: self.live[id][0] for id in due})

        @rule(ids=st.lists(IDS, max_size=4, unique=True))
        def xack(self, ids):
            due = set(self.due_now())
            expected = [self.live.pop(id)[1] if id in due else None for id in ids]
            assert self.d.xack(*ids) == expected

        @rule(id=IDS)
        def look(self, id):
            assert self.d.look(id) == self.live.get(id, (0, None))[1]

        @rule(id=IDS, element=ELEMENTS)
        def update(self, id, element):
            if id not in self.live:
                with pytest.raises(IckError, match="does not exist"):
                    self.d.update(id, element)
                return
            due, old = self.live[id]
            assert self.d.update(id, element) == old
            self.live[id] = (due, element)

        @rule()
        def ttn(self):
            expected = min((max(0, due - self.now) for due, _ in self.live.values()), default=-1)
            assert self.d.ttn() == expected

        @rule(shard=st.integers(0, SHARDS - 1), limit=st.integers(0, 4) | st.none())
        def claim(self, shard, limit):
            log, last = self.logs[shard], len(self.claims[shard])
            mine = sorted(
                (self.live[id][0], id) for id in self.due_now() if self.d.shard_of(id) == shard
            )
            take = mine if limit is None else mine[:limit]
            got = log.reserve(limit, last, self.tokens[shard])
            if take:
                self.claims[shard].append([(id, due, self.live.pop(id)[1]) for due, id in take])
                assert got == (last + 1, len(take), len(take))
            else:
                assert got == (last, 0, 0)

        @precondition(lambda self: any(self.claims))
        @rule(shard=st.integers(0, SHARDS - 1), data=st.data())
        def commit(self, shard, data):
            last = len(self.claims[shard])
            through = data.draw(st.integers(0, last + 1))
            done = self.logs[shard].commit(through, self.tokens[shard])
            self.committed[shard] = max(self.committed[shard], min(through, last))
            assert done == self.committed[shard]

        @invariant()
        def claims_replay_exactly(self):
            for shard, log in enumerate(self.logs):
                done = self.committed[shard]
                expected = [e for claim in self.claims[shard][done:] for e in claim]
                read = log.read(done, len(self.claims[shard]))
                assert [entry[:3] for entry in read] == expected
                assert log.last_committed() == done

        @invariant()
        def size_matches(self):
            assert self.d.size() == len(self.live)
            assert sum(log.backlog() for log in self.logs) == len(self.due_now())

    run_state_machine_as_test(
        Machine, settings=settings(max_examples=40, stateful_step_count=30, deadline=None)
    )
