"""The whole operator surface against a plain Python model, on a standalone Redis and the
3-master cluster (issue 50, item 5).

The machine drives, in random order on 1-8 shards, the public client (``ShardedIck.add``
and ``fail``, each shard's ``Ick.reserve`` and ``commit``, as a plain consumer uses them)
and the CLI in this process (its parser and commands on the test's client): add, a
consumer's batch (reserve, then commit, fail to a retry or fail to a dead letter), make
the retries due (the test's clock), retry-due, dead redrive (one member, all), dead purge
(one, all), reshard (grow, shrink, or killed between two bounded calls and run again),
release, layout and del.

The model: each member added and not committed, purged or deleted is in exactly one of
queued, reserved, retrying and dead, with its score (of the add, or of the delivery that
failed), its failed attempts, and whether its retry is due. A producer adds only members
that are nowhere or queued (re-adding a member waiting elsewhere is the retry model's
business). After every step: Redis holds each member in exactly the part the model says,
in shard ``shard_of(member, count)`` and in no other shard key of any count, with its
score and attempt record; the CLI's dead-letter lookup (``dead redrive NAME MEMBER``'s
``named``) finds every dead letter; ``pyspark-ick stats --json``, ``dead count --json``
and the exporter's gauges equal the model's counts per shard.

Hypothesis runs derandomized and without its example database, so a run is reproducible;
a failure prints its steps and the blob to replay them (``PHASES``: set
PYSPARK_ICK_MODEL_SHRINK=1 for a minimal example).
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from itertools import count as numbers
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from prometheus_client import CollectorRegistry

from pyspark_ick import Ick, IckError, ShardedIck, shard_of
from pyspark_ick.cli import EXIT_ERROR, EXIT_NOT_FOUND
from pyspark_ick.cli.dead_commands import named
from pyspark_ick.cli.output import NotFound
from pyspark_ick.cli.parser import build_parser
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.lanes import LANES, Lane, backfill_score
from pyspark_ick.metrics import Collector
from pyspark_ick.reshard import reshard as reshard_to
from pyspark_ick.retries import AttemptRecord, RetryPolicy
from pyspark_ick.values import text
from pyspark_ick.words import plural

MEMBERS = ["a", "b", "c", "d", "doc:1", "doc:32", "é", "z z"]
SCORES = st.integers(-2, 3).map(float)
COUNTS = st.integers(1, 8)
LATER = dict(backoff_ms=3_600_000, backoff_max_ms=3_600_000)  # due only when the test says
RETRY, DEAD = RetryPolicy(max_attempts=25, **LATER), RetryPolicy(max_attempts=1, **LATER)
PARSER = build_parser()
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
PARTS = ("queued", "reserved", "retrying", "dead")


class Killed(Exception):
    """Stands for the reshard's process dying between two bounded calls."""


def order(item: tuple[str, float]) -> tuple[float, bytes]:
    """Redis's order of a sorted set: score, then member bytes."""
    return item[1], item[0].encode()


class Model:
    """What the operator surface promises, in memory."""

    def __init__(self) -> None:
        self.count = 1
        self.exists = False
        self.where: dict[str, tuple[str, float]] = {}  # member -> (part, score)
        self.attempts: dict[str, int] = {}  # failed attempts of members not dead
        self.dead_attempts: dict[str, int] = {}
        self.due: set[str] = set()

    def shard(self, member: str) -> int:
        return shard_of(member, self.count)

    def part(self, part: str, shard: int | None = None) -> dict[str, float]:
        return {
            m: s
            for m, (p, s) in self.where.items()
            if p == part and (shard is None or self.shard(m) == shard)
        }

    def queue(self, member: str, score: float) -> None:
        """Into the queue, the lower score winning."""
        if member in self.where and self.where[member][0] == "queued":
            score = min(score, self.where[member][1])
        self.where[member] = ("queued", score)
        self.due.discard(member)

    def requeue_reserved(self) -> None:
        for member, score in self.part("reserved").items():
            self.queue(member, score)

    def per_shard(self, part: str) -> list[int]:
        found = Counter(self.shard(m) for m in self.part(part))
        return [found[i] for i in range(self.count)]


class SurfaceMachine(RuleBasedStateMachine):
    """Every step on Redis and on the model; after each, Redis and every reader agree."""

    client: Any = None  # set by the test
    names = numbers()

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()  # every example starts from an empty server (the exporter
        self.name = f"surface{next(self.names)}"  # reads every registered Ick)
        self.model = Model()

    # --- helpers -------------------------------------------------------------------------

    def cli(self, *args: str) -> tuple[int, str, str]:
        """``pyspark-ick ARGS`` in this process on the test's client (``cli.run`` without
        its connect): (exit code, stdout, stderr)."""
        parsed = PARSER.parse_args(args)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = int(parsed.run(self.client, parsed))
            except NotFound as exc:
                code, _ = EXIT_NOT_FOUND, err.write(str(exc))
            except IckError as exc:
                code, _ = EXIT_ERROR, err.write(str(exc))
        return code, out.getvalue(), err.getvalue()

    def cli_ok(self, *args: str) -> str:
        """Run the CLI: exit 0 when the Ick exists, else exit 3 (not found)."""
        code, out, err = self.cli(*args)
        assert code == (0 if self.model.exists else EXIT_NOT_FOUND), (args, code, out, err)
        return out

    def sharded(self) -> ShardedIck:
        return ShardedIck(self.client, self.name, self.model.count)

    def ick(self, shard: int) -> Ick:
        return Ick(self.client, shard_names(self.name, self.model.count)[shard])

    # --- producers and a plain consumer (the public client) --------------------------------

    @initialize(count=COUNTS, members=st.sets(st.sampled_from(MEMBERS), min_size=1), score=SCORES)
    def start(self, count: int, members: set[str], score: float) -> None:
        self.model.count = count
        self.add(sorted(members), score)

    def add(self, members: list[str], score: float, lane: Lane = "live") -> None:
        """Add at ``score`` in ``lane``: a backfill member is queued at its score plus the
        offset (lanes.py), so folding keeps a live score over it, and it over none."""
        m = self.model
        stored = backfill_score(score) if lane == "backfill" else score
        new = sum(x not in m.where for x in members)
        changed = sum(x in m.where and stored < m.where[x][1] for x in members)
        assert self.sharded().add(dict.fromkeys(members, score), lane=lane) == (new, changed)
        for member in members:
            m.queue(member, stored)
        m.exists = True

    def addable(self) -> list[str]:
        return [x for x in MEMBERS if self.model.where.get(x, ("queued",))[0] == "queued"]

    @precondition(lambda self: bool(self.addable()))
    @rule(data=st.data(), score=SCORES, cli=st.booleans(), lane=st.sampled_from(LANES))
    def produce(self, data: Any, score: float, cli: bool, lane: Lane) -> None:
        """A producer adds members (ShardedIck.add in either lane, or ``pyspark-ick add``)."""
        members = data.draw(st.lists(st.sampled_from(self.addable()), min_size=1, unique=True))
        if not cli:
            self.add(members, abs(score) if lane == "backfill" else score, lane)
            return
        m = self.model
        shards = ["--shards", str(m.count)]
        code, out, err = self.cli("add", self.name, *members, "--score", str(score), *shards)
        assert code == 0, (out, err)
        for member in members:
            m.queue(member, score)
        m.exists = True

    @rule(data=st.data(), n=st.integers(0, 4))
    def consume(self, data: Any, n: int) -> None:
        """A plain consumer of one shard (most often one holding members): Ick.reserve(n)
        (due retries back into the queue first, at most n, in the retry zset's order: all
        due at 0, so by member; then the lowest queued), then each member of the batch is
        kept reserved, committed (Ick.commit), or failed (ShardedIck.fail): a retry, or on
        its last attempt a dead letter."""
        m = self.model
        busy = sorted({m.shard(x) for x in [*m.part("queued"), *m.due]})
        i = data.draw(st.sampled_from(busy) if busy else st.integers(0, m.count - 1))
        got = self.ick(i).reserve(n)
        if n > 0:
            for member in sorted((x for x in m.due if m.shard(x) == i), key=str.encode)[:n]:
                m.queue(member, m.where[member][1])
            while len(m.part("reserved", i)) < n and m.part("queued", i):
                member, score = min(m.part("queued", i).items(), key=order)
                m.where[member] = ("reserved", score)
        assert got == sorted(m.part("reserved", i).items(), key=order)[:n]
        fates = {x: data.draw(st.sampled_from(["kept", "done", "retry", "dead"])) for x, _ in got}
        done = [x for x, fate in fates.items() if fate == "done"]
        assert self.ick(i).commit(*done) == len(done)
        for member in done:
            del m.where[member]
            m.attempts.pop(member, None)
        for fate, policy in (("retry", RETRY), ("dead", DEAD)):
            failed = [x for x, f in fates.items() if f == fate]
            if failed:
                counted = self.sharded().fail({x: f"no {x}" for x in failed}, policy)
                assert counted == ((len(failed), 0) if fate == "retry" else (0, len(failed)))
            for member in failed:
                n, score = m.attempts.pop(member, 0) + 1, m.where[member][1]
                m.where[member] = ("retrying" if fate == "retry" else "dead", score)
                if fate == "dead":
                    m.dead_attempts[member] = n
                else:
                    m.attempts[member] = n

    @precondition(lambda self: bool(self.model.part("retrying")))
    @rule()
    def tick(self) -> None:
        """The test's clock: every pending retry is due now."""
        for master in shard_names(self.name, self.model.count):
            key = IckKeys(master).retry
            waiting = self.client.zrange(key, 0, -1)
            if waiting:
                self.client.zadd(key, dict.fromkeys(waiting, 0), xx=True)
        self.model.due = set(self.model.part("retrying"))

    # --- the operator's commands (the CLI) -------------------------------------------------

    @rule()
    def retry_due(self) -> None:
        m = self.model
        due = sorted(m.due)
        out = self.cli_ok("retry-due", self.name)
        if m.exists:
            assert f"{plural(len(due), 'due retry', 'due retries')} queued" in out, out
            for member in due:
                m.queue(member, m.where[member][1])

    @rule(data=st.data(), one=st.booleans())
    def redrive(self, data: Any, one: bool) -> None:
        """``dead redrive NAME MEMBER``: a dead letter back into the queue, attempts from
        0, any other member not found (exit 3, nothing changed); ``dead redrive NAME``:
        every one."""
        m = self.model
        dead = m.part("dead")
        if one:
            member = data.draw(st.sampled_from(sorted(dead) or MEMBERS))
            dead = {member: dead[member]} if m.exists and member in dead else {}
        code, out, err = self.cli("dead", "redrive", self.name, *([member] if one else []))
        if m.exists and (dead or not one):
            done = f"{plural(len(dead), 'dead letter')} re-driven"
            assert code == 0 and done in out, (code, out, err)
        else:
            assert code == EXIT_NOT_FOUND, (code, out, err)
        for member, score in dead.items():
            m.queue(member, score)
            del m.dead_attempts[member]

    @rule(data=st.data(), one=st.booleans())
    def purge(self, data: Any, one: bool) -> None:
        """``dead purge NAME MEMBER`` (a dead letter), ``dead purge NAME --yes`` (all)."""
        m = self.model
        dead = m.part("dead")
        if one and dead:
            member = data.draw(st.sampled_from(sorted(dead)))
            dead = {member: dead[member]}
        out = self.cli_ok("dead", "purge", self.name, *([*dead] if one and dead else ["--yes"]))
        if m.exists:
            assert f"{plural(len(dead), 'dead letter')} purged" in out, out
        for member in dead:
            del m.where[member], m.dead_attempts[member]

    @precondition(lambda self: self.model.exists)
    @rule(to=COUNTS, killed=st.booleans(), after=st.integers(1, 12))
    def reshard(self, to: int, killed: bool, after: int) -> None:
        """``reshard NAME --to N --yes``; or a reshard killed after its ``after``-th
        bounded call, then that command to finish it."""
        calls = numbers(1)

        def progress(what: str, items: int) -> None:
            if next(calls) == after:
                raise Killed(what)

        if killed:
            try:
                reshard_to(self.client, self.name, to, progress=progress)
            except Killed:
                pass
        self.cli_ok("reshard", self.name, "--to", str(to), "--yes")
        self.resharded(to)

    def resharded(self, to: int) -> None:
        """A reshard to another count puts the reserved members back into the queue; to
        the same count it does nothing."""
        if to != self.model.count:
            self.model.requeue_reserved()
            self.model.count = to

    @rule()
    def release(self) -> None:
        self.cli_ok("release", self.name)
        if self.model.exists:
            self.model.requeue_reserved()

    @rule()
    def layout(self) -> None:
        """``layout NAME --json``: layout 2, a rollback blocked by exactly the shards that
        hold retries or dead letters."""
        m = self.model
        out = self.cli_ok("layout", self.name, "--json")
        if not m.exists:
            return
        report = json.loads(out)
        assert report["layout"] == 2
        blocked = Counter(
            (int(b.split()[1]), int(b.split(": ")[1].split()[0]), "dead letter" in b)
            for b in report["rollback_blocked_by"]
        )
        expected = Counter(
            (i, n, part == "dead")
            for part in ("retrying", "dead")
            for i, n in enumerate(m.per_shard(part))
            if n
        )
        assert blocked == expected, report

    @rule(really=st.integers(0, 3))
    def delete(self, really: int) -> None:
        """``del NAME --yes`` (one time in four: it ends what the others built)."""
        if really:
            return
        self.cli_ok("del", self.name, "--yes")
        if self.model.exists:
            self.model = Model()

    # --- what must hold after every step ---------------------------------------------------

    @invariant()
    def redis_holds_what_the_model_holds(self) -> None:
        m = self.model
        masters = [self.name, *shard_names(self.name, 8)]
        pipe = self.client.pipeline(transaction=False)
        for master in masters:
            keys = IckKeys(master)
            for key in (keys.pset, keys.cset, keys.retry, keys.dead):
                pipe.zrange(key, 0, -1, withscores=True)
            pipe.hgetall(keys.attempts)
            pipe.hgetall(keys.deadinfo)
        replies = iter(pipe.execute())
        now_ms = self.client.time()[0] * 1000
        found: dict[str, list[tuple[str, str, float]]] = {}
        records: dict[str, list[tuple[str, AttemptRecord]]] = {}
        dead_records: dict[str, list[tuple[str, AttemptRecord]]] = {}
        for master in masters:
            for part in PARTS:
                for member, score in next(replies):
                    found.setdefault(text(member), []).append((part, master, score))
            for into in (records, dead_records):
                for member, raw in next(replies).items():
                    into.setdefault(text(member), []).append((master, AttemptRecord.parse(raw)))
        home = {x: shard_names(self.name, m.count)[m.shard(x)] for x in m.where}
        expected = {x: [(p, home[x], s)] for x, (p, s) in m.where.items()}
        due = {}
        for member, places in found.items():  # a retry's score is when it is due, a
            for k, (part, master, score) in enumerate(places):  # dead letter's when it died
                if part in ("retrying", "dead"):
                    places[k] = (part, master, m.where.get(member, ("", score))[1])
                if part == "retrying":
                    due[member] = score <= now_ms
        assert found == expected
        assert due == {x: x in m.due for x in m.part("retrying")}
        assert {x: [(h, r.attempts) for h, r in rs] for x, rs in records.items()} == {
            x: [(home[x], n)] for x, n in m.attempts.items()
        }
        for member, [(_, record)] in records.items():
            if m.where[member][0] == "retrying":
                assert record.score == m.where[member][1]
        assert {x: [(h, r.attempts, r.score) for h, r in rs] for x, rs in dead_records.items()} == {
            x: [(home[x], n, m.where[x][1])] for x, n in m.dead_attempts.items()
        }

    @invariant()
    def every_dead_letter_is_found_by_redrive(self) -> None:
        """The look-up ``dead redrive NAME MEMBER`` makes (read-only) finds each dead
        letter, and no other member."""
        m = self.model
        if not m.exists:
            return
        dead, others = named(DeadLetters(self.sharded()), MEMBERS)
        assert sorted(dead) == sorted(m.part("dead"))
        assert sorted(others) == sorted(set(MEMBERS) - set(dead))

    @invariant()
    def the_readers_count_what_the_model_holds(self) -> None:
        """``stats --json``, ``dead count --json`` and the exporter's gauges, per shard."""
        m = self.model
        code, out, err = self.cli("stats", self.name, "--json")
        gauges = self.gauges()
        if not m.exists:
            assert code == EXIT_NOT_FOUND, (code, out, err)
            assert not gauges
            return
        assert code == 0, (out, err)
        stats = json.loads(out)
        expected = {part: m.per_shard(part) for part in PARTS}
        assert stats["shards"] == m.count
        assert {
            part: [row[key] for row in stats["rows"]]
            for part, key in zip(PARTS, ("queued", "reserved", "retrying", "dead"), strict=True)
        } == expected
        code, out, err = self.cli("dead", "count", self.name, "--json")
        assert code == 0, (out, err)
        counted = json.loads(out)
        assert [r["dead"] for r in counted["shards"]] == expected["dead"]
        assert [r["retrying"] for r in counted["shards"]] == expected["retrying"]
        assert gauges == expected

    def gauges(self) -> dict[str, list[int]]:
        """The exporter's queued, reserved, retrying and dead-letter gauges of this Ick,
        per shard (the registry metrics.py builds, collected as a scrape does)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Collector(self.client))  # type: ignore[arg-type]
        names = dict(zip(("queued", "reserved", "retrying", "dead_letters"), PARTS, strict=True))
        found: dict[str, dict[int, int]] = {}
        for family in registry.collect():
            for sample in family.samples:
                part = names.get(sample.name.removeprefix("pyspark_ick_"))
                if part and sample.labels.get("ick") == self.name:  # queued: both lanes
                    shard, by_shard = int(sample.labels["shard"]), found.setdefault(part, {})
                    by_shard[shard] = by_shard.get(shard, 0) + int(sample.value)
        return {p: [v[i] for i in range(len(v))] for p, v in found.items()}


PHASES = tuple(Phase) if os.environ.get("PYSPARK_ICK_MODEL_SHRINK") else NO_SHRINK
"""A step takes tens of ms (its checks read every key and run three readers), so shrinking
a failure takes minutes: CI prints the failing steps as found and the blob to replay them;
PYSPARK_ICK_MODEL_SHRINK=1 shrinks them to a minimal example."""


def run(client: Any, examples: int, steps: int) -> None:
    SurfaceMachine.client = client
    try:
        run_state_machine_as_test(
            SurfaceMachine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                derandomize=True,
                database=None,
                print_blob=True,
                suppress_health_check=[HealthCheck.too_slow],
                phases=PHASES,
            ),
        )
    finally:
        SurfaceMachine.client = None


@pytest.mark.parametrize("topology", ["client", "cluster_client"], ids=["standalone", "cluster"])
def test_the_surface_matches_the_model(request: pytest.FixtureRequest, topology: str) -> None:
    """The short profile (the fast tier): it catches the three hand-made bugs of issue
    50 (a reshard that leaves retries behind, a shrink that deletes them, a re-drive that
    keeps the dead record)."""
    run(request.getfixturevalue(topology), examples=10, steps=15)


@pytest.mark.slow  # over 3 s per topology
@pytest.mark.parametrize("topology", ["client", "cluster_client"], ids=["standalone", "cluster"])
def test_the_surface_matches_the_model_at_length(
    request: pytest.FixtureRequest, topology: str
) -> None:
    """The long profile (the full suite): twice the short profile's steps per example,
    three times its examples."""
    run(request.getfixturevalue(topology), examples=30, steps=30)
