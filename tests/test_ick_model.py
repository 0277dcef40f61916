"""The Ick against an in-memory model of the Redis::Ick README, on standalone Redis and cluster.

The model: a pset and a cset (member -> score). add folds into the pset keeping the lower
score; reserve(n) pops the lowest of the pset into the cset (folding, lower score wins)
until the cset holds n or the pset is empty, and returns the n lowest of the cset; commit
removes from the cset only; exchange commits, optionally backwashes (folds the cset back
into the pset), then reserves. Equal scores order by member bytes, as in Redis.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from pyspark_ick import Ick

# few members and scores, so folding, ties and members in both sets happen often
MEMBERS = st.sampled_from(["a", "b", "c", "d", "e", "doc:1", "doc:10", "é", "z z", ""])
SCORES = st.one_of(
    st.integers(-3, 3).map(float),
    st.sampled_from([0.5, -1.25, 2.5e-3, 1e15, 1.7976931348623157e308]),
)
SIZES = st.integers(0, 6)
COMMITS = st.lists(MEMBERS, max_size=4)


def order(item: tuple[str, float]) -> tuple[float, bytes]:
    """Redis's order of a sorted set: score, then member bytes."""
    return item[1], item[0].encode()


def fold(into: dict[str, float], member: str, score: float) -> None:
    into[member] = min(into.get(member, score), score)


class Model:
    """The README's semantics, in memory."""

    def __init__(self) -> None:
        self.pset: dict[str, float] = {}
        self.cset: dict[str, float] = {}
        self.exists = False

    def add(self, mapping: dict[str, float]) -> tuple[int, int]:
        new = changed = 0
        for member, score in mapping.items():
            if member not in self.pset:
                new += 1
            elif score < self.pset[member]:
                changed += 1
            fold(self.pset, member, score)
        self.exists = self.exists or bool(mapping)
        return new, changed

    def commit(self, members: Iterable[str]) -> int:
        gone = {m for m in members if m in self.cset}
        for member in gone:
            del self.cset[member]
        return len(gone)

    def reserve(self, n: int) -> list[tuple[str, float]]:
        if n <= 0:
            return []
        while len(self.cset) < n and self.pset:
            member, score = min(self.pset.items(), key=order)
            del self.pset[member]
            fold(self.cset, member, score)
        return sorted(self.cset.items(), key=order)[:n]

    def exchange(self, n: int, commit: Iterable[str], backwash: bool) -> list[tuple[str, float]]:
        self.commit(commit)
        if backwash:
            for member, score in self.cset.items():
                fold(self.pset, member, score)
            self.cset.clear()
        return self.reserve(n)

    def stats(self) -> dict[str, Any] | None:
        if not self.exists:
            return None
        out: dict[str, Any] = {
            "pset_size": len(self.pset),
            "cset_size": len(self.cset),
            "total_size": len(self.pset) + len(self.cset),
        }
        both = [*self.pset.values(), *self.cset.values()]
        out["total_min"], out["total_max"] = min(both, default=None), max(both, default=None)
        for name, values in (("pset", self.pset.values()), ("cset", self.cset.values())):
            out[f"{name}_min"] = min(values, default=None)
            out[f"{name}_max"] = max(values, default=None)
        return out


class IckMachine(RuleBasedStateMachine):
    """Every operation on a real Ick and on the model must agree, step by step."""

    client: Any = None  # set by the test before the machine runs

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()  # every example starts from an empty server
        self.ick = Ick(self.client, "model:ick")
        self.model = Model()

    @rule(mapping=st.dictionaries(MEMBERS, SCORES, max_size=5))
    def add(self, mapping: dict[str, float]) -> None:
        assert self.ick.add(mapping) == self.model.add(mapping)

    @rule(n=SIZES)
    def reserve(self, n: int) -> None:
        assert self.ick.reserve(n) == self.model.reserve(n)

    @rule(members=COMMITS)
    def commit(self, members: list[str]) -> None:
        assert self.ick.commit(*members) == self.model.commit(members)

    @rule(k=SIZES)
    def commit_delivered(self, k: int) -> None:
        """The consumer's usual step: commit (part of) the batch it was given."""
        batch = [m for m, _ in sorted(self.model.cset.items(), key=order)[:k]]
        assert self.ick.commit(*batch) == self.model.commit(batch)

    @rule(n=SIZES, members=COMMITS)
    def exchange(self, n: int, members: list[str]) -> None:
        assert self.ick.exchange(n, members) == self.model.exchange(n, members, False)

    @rule(n=SIZES, members=COMMITS)
    def backwash(self, n: int, members: list[str]) -> None:
        got = self.ick.exchange(n, members, backwash=True)
        assert got == self.model.exchange(n, members, True)

    @invariant()
    def stats_agree(self) -> None:
        stats = self.ick.stats()
        expected = self.model.stats()
        if expected is None:
            assert stats is None
            return
        assert stats is not None
        assert {k: stats[k] for k in expected} == expected
        assert stats["ver"] == "ick.v1"


def test_ick_matches_model(any_client: Any) -> None:
    IckMachine.client = any_client
    try:
        run_state_machine_as_test(
            IckMachine,
            settings=settings(max_examples=40, stateful_step_count=25, deadline=None),
        )
    finally:
        IckMachine.client = None
