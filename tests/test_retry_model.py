"""Retries and dead letters of the stream reader's log against an in-memory model, on a
standalone Redis and a cluster (docs/design.md §11).

The model: members are queued (folding to the lower score), delivered in batches (one
open at a time here) as attempt 1 + their failed attempts, handed back by the sink in
the current delivery, and committed: a handed-back member gets one more failed attempt
and waits for a retry, or is a dead letter after ``MAX`` attempts; any other member of
the batch is done, and its record and pending retry go. A crash replays the batch as the
next delivery, and what was handed back in the earlier one counts for nothing. Waiting
members come back when their retry is due (``tick`` moves every due time to the past),
a re-dirtied one at once.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pyspark_ick import Ick
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.retries import AttemptRecord, RetryPolicy
from pyspark_ick.values import text

MAX = 2
MEMBERS = st.sampled_from(["a", "b", "c", "d", "doc:1", "é"])
SCORES = st.integers(-2, 3).map(float)


class Model:
    def __init__(self) -> None:
        self.queued: dict[str, float] = {}
        self.batch: dict[str, tuple[float, int]] = {}  # member -> (score, attempt)
        self.handed: set[str] = set()
        self.waiting: dict[str, float] = {}  # member -> score of its failed delivery
        self.due: set[str] = set()
        self.attempts: dict[str, int] = {}
        self.dead: dict[str, int] = {}

    def add(self, member: str, score: float) -> None:
        self.queued[member] = min(self.queued.get(member, score), score)

    def deliver(self) -> dict[str, int]:
        for member in sorted(self.due & set(self.waiting)):
            self.add(member, self.waiting.pop(member))
        self.due -= self.due
        self.batch = {m: (s, self.attempts.get(m, 0) + 1) for m, s in self.queued.items()}
        for member in self.batch:
            self.waiting.pop(member, None)
        self.queued = {}
        self.handed = set()
        return {m: attempt for m, (_, attempt) in self.batch.items()}

    def commit(self) -> None:
        for member, (score, _) in self.batch.items():
            if member in self.handed:
                n = self.attempts.get(member, 0) + 1
                self.waiting.pop(member, None)
                if n >= MAX:
                    self.dead[member] = n
                    self.attempts.pop(member, None)
                else:
                    self.attempts[member], self.waiting[member] = n, score
            else:
                self.attempts.pop(member, None)
                self.waiting.pop(member, None)
        self.batch, self.handed = {}, set()


def test_retries_match_the_model(any_client: Any) -> None:
    names = iter(range(10**6))
    policy = RetryPolicy(max_attempts=MAX, backoff_ms=3_600_000, backoff_max_ms=3_600_000)

    class Machine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.name = f"rm{next(names)}"
            self.ick = Ick(any_client, self.name)
            self.log = ReservationLog(any_client, self.name)
            self.log.policy = policy
            self.fence = self.log.lease.acquire("me", 30_000)
            self.model = Model()
            self.after = self.end = 0
            self.token = uuid.uuid4().hex
            self.delivery = 0

        @rule(member=MEMBERS, score=SCORES)
        def add(self, member: str, score: float) -> None:
            self.ick.add({member: score})
            self.model.add(member, score)

        @precondition(lambda self: not self.model.batch)
        @rule()
        def deliver(self) -> None:
            self.end = self.log.reserve(None, self.after, self.fence).head
            expected = self.model.deliver()
            self.read(expected)

        def read(self, expected: dict[str, int]) -> None:
            got: dict[str, int] = {}
            for m in self.log.read(self.after, self.end, self.token):
                attempts = m.attempts or [0] * (len(m.items) // 2)
                for member, failed in zip(m.items[0::2], attempts, strict=True):
                    got[text(member)] = failed + 1  # one row per member: no re-add in flight
                self.delivery = m.deliveries
            assert got == expected

        @precondition(lambda self: bool(self.model.batch))
        @rule(data=st.data())
        def hand_back(self, data: Any) -> None:
            members = data.draw(st.sets(st.sampled_from(sorted(self.model.batch))))
            by_reservation: dict[int, dict[str, str]] = {}
            for m in self.log.read(self.after, self.end, ""):
                for member in map(text, m.items[0::2]):
                    if member in members:
                        by_reservation.setdefault(m.number, {})[member] = f"no {member}"
            for number, failures in by_reservation.items():
                assert self.log.fail(number, self.delivery, failures)[0] == len(failures)
            self.model.handed |= members

        @precondition(lambda self: bool(self.model.batch))
        @rule()
        def crash(self) -> None:
            """The query restarts: the batch is delivered again, the hand-backs of the
            earlier delivery count for nothing."""
            self.token = uuid.uuid4().hex
            self.model.handed = set()
            self.read({m: attempt for m, (_, attempt) in self.model.batch.items()})

        @precondition(lambda self: bool(self.model.batch))
        @rule()
        def commit(self) -> None:
            self.log.commit(self.end, self.fence)
            self.after = self.end
            self.model.commit()

        @rule()
        def tick(self) -> None:
            """Every pending retry is due."""
            keys = self.ick.keys
            waiting = any_client.zrange(keys.retry, 0, -1)
            if waiting:
                any_client.zadd(keys.retry, dict.fromkeys(waiting, 0))
            self.model.due = set(self.model.waiting)

        @invariant()
        def redis_holds_what_the_model_holds(self) -> None:
            keys = self.ick.keys

            def zset(key: str) -> dict[str, float]:
                return {text(m): s for m, s in any_client.zrange(key, 0, -1, withscores=True)}

            assert zset(keys.pset) == self.model.queued
            assert set(zset(keys.cset)) == set(self.model.batch)
            assert set(zset(keys.retry)) == set(self.model.waiting)
            records = {
                text(m): AttemptRecord.parse(r)
                for m, r in any_client.hgetall(keys.attempts).items()
            }
            assert {m: r.attempts for m, r in records.items()} == self.model.attempts
            assert {m: records[m].score for m in self.model.waiting} == self.model.waiting
            dead = {
                text(m): AttemptRecord.parse(r).attempts
                for m, r in any_client.hgetall(keys.deadinfo).items()
            }
            assert dead == self.model.dead
            assert set(zset(keys.dead)) == set(self.model.dead)

    run_state_machine_as_test(
        Machine, settings=settings(max_examples=80, stateful_step_count=40, deadline=None)
    )
