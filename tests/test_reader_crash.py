"""The crash matrix: readStream.format("ick") is killed at every point of the protocol
while producers keep adding and re-adding members in both lanes (lanes.py), and
restarted from its checkpoint.

Points: after_reserve (reserved, no offset log yet), before_read (offset log written),
during_read, after_sink (foreachBatch ran, no commit log yet), before_commit (commit log
written, the source not committed). Each point is hit 3 times: once by kill -9 of the
whole child (tests/crash/child.py: its process group, JVM included), restarted from the
checkpoint by a new child; twice by killing only the process at the point (the
reader's Python process, or failing foreachBatch), and the child restarts the query from
the checkpoint in the same JVM (a JVM start costs 10+ s; the source sees the same thing:
its process gone without stop(), its lease held, Spark's logs as they were). Two chains
(two Icks, two checkpoints) run at once. Then producers stop, the queries drain, and a
model checks:

- I1: every add (member, score, shard, R = the shard's last reservation number at the add,
  read in the same MULTI) is followed by a delivery of that member from a reservation > R
  with a score <= the add's score: a delivery that started after the add.
- no starvation: the hot member, re-added on every tick, passes I1 on every add too, and
  the Ick ends empty with no open reservation.
- I3: every delivery of the same batch id (a replay) has exactly the same rows.
- lanes: every tick also marks a backfill member dirty, and now and then a live one as
  backfill (it stays live while queued): batches hold both lanes (the backfill's default
  share), an add in either lane passes I1 at its own score, and a batch of both lanes is
  among the replays.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pyspark_ick import ShardedIck, scripts
from pyspark_ick.ick import queue_add
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.lanes import backfill_score, lane_of

pytestmark = pytest.mark.slow  # the crash matrix: Spark drivers killed and restarted

POINTS = ["after_reserve", "before_read", "during_read", "after_sink", "before_commit"]
CHILD = Path(__file__).parent / "crash" / "child.py"
SHARDS = 2


class Producer(threading.Thread):
    """Adds members (scores: strictly increasing times) and logs (member, score, shard, R)."""

    def __init__(self, client: Any, icks: list[str]) -> None:
        super().__init__(daemon=True)
        self.client, self.icks = client, icks
        self.adds: dict[str, list[tuple[str, float, int, int]]] = {i: [] for i in icks}
        self.stopped = threading.Event()
        self.last = 0.0

    def add(self, ick: str, member: str, backfill: bool = False) -> None:
        """Queue ``member`` as ickadd does (the lower score wins), in the backfill lane at
        its time plus the offset, as ickadd_backfill queues it."""
        sharded = ShardedIck(self.client, ick, SHARDS)
        shard = sharded.shard_of(member)
        keys = IckKeys(shard_names(ick, SHARDS)[shard])
        self.last = score = max(time.time(), self.last + 1e-6)
        if backfill:
            score = backfill_score(score)
        pipe = self.client.pipeline(transaction=True)
        queue_add(pipe, keys, [member], [score])
        pipe.hget(keys.rlog, "reserved")
        _, reserved = pipe.execute()
        self.adds[ick].append((member, score, shard, int(reserved or 0)))

    def run(self) -> None:
        rng = random.Random(7)
        scripts.ensure_loaded(self.client, "ickadd")
        while not self.stopped.wait(0.02):
            for ick in self.icks:
                self.add(ick, "hot")
                for _ in range(3):
                    self.add(ick, f"m{rng.randrange(60)}")
                self.add(ick, f"b{rng.randrange(30)}", backfill=True)
                if rng.random() < 0.1:
                    self.add(ick, f"m{rng.randrange(60)}", backfill=True)


def spawn(tmp: Path, url: str, ick: str, schedule: list[list[Any]]) -> subprocess.Popen[str]:
    config = {
        "url": url,
        "ick": ick,
        "shards": SHARDS,
        "checkpoint": str(tmp / f"{ick}-ckpt"),
        "deliveries": f"deliveries:{ick}",
        "fault_file": str(tmp / f"{ick}.fault"),
        "counter": str(tmp / f"{ick}.count"),
        "drain_file": str(tmp / "drain"),
        "schedule": schedule,
    }
    return subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ},
    )


def chain(
    tmp: Path, url: str, ick: str, children: list[list[list[Any]]], faults_done: threading.Event
) -> str:
    """Run one child per schedule on the same checkpoint. A schedule ending in a "group"
    fault kills its child (JVM included); the last child has none: it drains."""
    lines: list[str] = []
    for schedule in children:
        child = spawn(tmp, url, ick, schedule)
        assert child.stdout is not None
        out = []
        for line in child.stdout:
            out.append(line.strip())
            if line.startswith("FAULTS DONE") and schedule is children[-1]:
                faults_done.set()
        child.wait(60)
        killed = bool(schedule) and schedule[-1][2] == "group"
        lines += [*out, f"KILLED {schedule[-1][0]}" if killed else f"EXIT {child.returncode}"]
        assert child.returncode == (-9 if killed else 0), lines
        assert sum(line.startswith("CYCLE") for line in out) == len(schedule) - killed, lines
    return "\n".join(lines)


def schedules(rng: random.Random) -> tuple[list[Any], list[Any]]:
    """Children of two chains: every point failed 4 times in a running JVM and once by
    kill -9 of the whole child, spread so both chains take about as long."""
    soft = [[p, 1, "raise" if p == "after_sink" else "exit"] for p in POINTS * 2]
    hard = [[p, rng.randint(1, 3), "group"] for p in POINTS]
    rng.shuffle(soft)
    rng.shuffle(hard)
    a = [[soft[0], hard[0]], [soft[1], hard[1]], [soft[2], hard[2]], []]
    b = [[*soft[3:6], hard[3]], [*soft[6:9], hard[4]], soft[9:10]]
    return a, b


def check_model(client: Any, ick: str, adds: list[tuple[str, float, int, int]]) -> tuple[int, int]:
    """Checks I1, no starvation and I3; returns (replayed batches, those of both lanes)."""
    deliveries = [json.loads(d) for d in client.lrange(f"deliveries:{ick}", 0, -1)]
    by_batch: dict[int, list[Any]] = defaultdict(list)
    delivered: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for d in deliveries:
        by_batch[d["batch"]].append(d["rows"])
        for member, score, _shard, reservation in d["rows"]:
            delivered[member].append((score, reservation))
    replays = mixed = 0
    for batch, versions in by_batch.items():  # I3: a replayed batch has the same rows
        assert all(v == versions[0] for v in versions), f"batch {batch} replayed differently"
        replays += len(versions) - 1
        lanes = {lane_of(score) for _, score, _, _ in versions[0]}
        mixed += len(versions) > 1 and lanes == {"live", "backfill"}
    for member, score, _shard, reserved in adds:  # I1 and no starvation
        assert any(s <= score and r > reserved for s, r in delivered[member]), (
            f"{ick}: add of {member} at {score} (after reservation {reserved}) was never "
            f"delivered: {sorted(delivered[member])[-5:]}"
        )
    assert ShardedIck(client, ick, SHARDS).stats()["total_size"] == 0
    return replays, mixed


def test_crash_matrix(client, redis_url, tmp_path):
    rng = random.Random(int(os.environ.get("CRASH_SEED", "4")))
    producer = Producer(client, ["crash_a", "crash_b"])
    producer.start()
    results: dict[str, Any] = {}
    done = {"crash_a": threading.Event(), "crash_b": threading.Event()}
    children = dict(zip(done, schedules(rng), strict=True))

    def run(name: str) -> None:
        try:
            results[name] = chain(tmp_path, redis_url, name, children[name], done[name])
        except BaseException as exc:  # noqa: BLE001 - reported below
            results[name] = exc
            done[name].set()

    def drain_when_faults_done() -> None:
        # the children drain only once the drain file exists: stop producing first
        for event in done.values():
            event.wait()
        producer.stopped.set()
        producer.join()
        (tmp_path / "drain").touch()

    threads = [
        threading.Thread(target=run, args=("crash_a",)),
        threading.Thread(target=run, args=("crash_b",)),
        threading.Thread(target=drain_when_faults_done, daemon=True),
    ]
    for t in threads:
        t.start()
    for t in threads[:2]:
        t.join()
    producer.stopped.set()
    for name, result in results.items():
        if isinstance(result, BaseException):
            raise AssertionError(f"chain {name} failed") from result
    mixed = 0
    for ick in ("crash_a", "crash_b"):
        adds = producer.adds[ick]
        assert len(adds) > 500
        assert sum(lane_of(score) == "backfill" for _, score, _, _ in adds) > 100
        replays, both = check_model(client, ick, adds)
        mixed += both
        print(f"{ick}: {len(adds)} adds, {replays} replayed batches, {both} of both lanes")
    assert mixed > 0, "no batch holding both lanes was replayed"
