"""The nemesis soak (tests/nemesis/): its checker proves itself, and a short soak of mixed
faults loses nothing.

- The checker (nemesis.check) on a small synthetic run: I1 holds; removing the
  one delivery of an add, a delivery from an older reservation, or a sink call that ended
  before the add was acknowledged each make I1 fail; a replay with other rows fails I3;
  duplicates and stalls (outside fault windows) are counted; lost counts only kept adds
  (every add of a run since the producers wait for a replica), unkept ones (older
  records) apart; an empty batch fails a run, and an empty or changed replay after a
  failover fails a --sentinel or --cluster run's summary (the readers wait); the
  recovery after each fault is the time to the next delivery begun after it.
- --sentinel without servers: its fault kinds, and the failovers of its summary; the
  same for --cluster, and on records shaped as a cluster run's the checker catches a
  dropped delivery of a kept add and a dropped release of a kept park.
- --poison's checker (nemesis.fates) on synthetic records: every add processed or a
  dead letter; a dropped delivery (a retry never delivered) and a good member among the
  dead letters each fail it.
- The smoke: 75 s of faults (seed 6 draws 6 of the 9 kinds in that time, kill -9 of
  Redis and of Spark's JVM among them) with a
  sink that fails on 2% of the members for good and on 4% once, then the drain: 0 lost,
  0 stuck (no retry waiting, no attempt record), replays identical, every add processed
  or a dead letter, only poison among them; then, on that recorded run, removing the
  delivery of one add makes I1 fail, changing a replayed batch makes I3 fail, dropping
  the calls that processed a good member's add loses it and a good member among the dead
  letters fails the fates.
- The cluster smoke: the same on a Redis Cluster (3 primaries, a replica each) with the
  dehydrator loop, 30 s of its failovers and a slot migration; the Sentinel smoke: 60 s
  of a Sentinel set's failovers; both with writers and readers waiting for replicas.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from nemesis import check as nc
from nemesis import fates as nf
from nemesis.cli import parse
from nemesis.poison import is_flaky, is_poison, refusal
from nemesis.records import Journal
from nemesis.settings import (
    CLUSTER_FAILOVERS,
    CLUSTER_KINDS,
    FAILOVERS,
    SENTINEL_KINDS,
    Settings,
    kinds_of,
)
from nemesis.soak import soak
from nemesis.summary import actors, check_parks, failovers, summarize, table

A = nc.Add
D = nc.Delivery


def synthetic() -> tuple[list[nc.Add], list[nc.Delivery]]:
    """Two members on two shards; ``a`` added again while its first batch was in flight;
    batch 1 replayed once (after a crash) with the same rows."""
    adds = [A("a", 1.0, 0, 0, 1.0), A("b", 2.0, 1, 0, 2.0), A("a", 3.0, 0, 1, 3.5)]
    deliveries = [
        D(0, [("a", 1.0, 0, 1), ("b", 2.0, 1, 1)], 3.0, 3.2),
        D(1, [("a", 3.0, 0, 2)], 4.0, 4.1),
        D(1, [("a", 3.0, 0, 2)], 9.0, 9.1),  # the replay
    ]
    return adds, deliveries


def test_checker_passes_a_good_run() -> None:
    adds, deliveries = synthetic()
    result = nc.check(adds, deliveries, [], until=10.0)
    assert result["ok"], result
    assert (result["lost"], result["replays"], result["duplicate_rows"]) == (0, 1, 0)


def test_an_empty_batch_fails_a_run() -> None:
    adds, deliveries = synthetic()
    with_empty = [*deliveries, D(2, [], 9.5, 9.6)]  # a batch whose reservation was lost
    result = nc.check(adds, with_empty, [], until=10.0)
    assert not result["ok"] and result["empty_batches"] == [2]


@pytest.mark.parametrize("mode", ["--sentinel", "--cluster"])
def test_an_empty_or_changed_replay_after_a_failover_fails_a_waiting_run(tmp_path, mode) -> None:
    """With readers waiting for a replica (--sentinel, --cluster) a failover keeps every
    reservation: a batch after one that reads nothing (an empty replay of a planned
    batch), or a replay with other rows, fails the run's summary (an empty batch was
    reported and passed while the readers did not wait)."""
    settings = parse([mode, "--out", str(tmp_path)])
    kill = "cluster_kill" if settings.cluster else "sentinel_kill"
    adds, deliveries = synthetic()

    def summary(calls: list[nc.Delivery]) -> dict[str, object]:
        journals = {n: Journal(tmp_path / f"{n}.jsonl") for n in ("adds", "faults", "restarts")}
        journals["adds"].records = [a._asdict() for a in adds]
        fault = {"kind": kill, "start": 5.0, "end": 6.0, "hit": True, "promoted": True}
        journals["faults"].records = [{**fault, "answered_after": 1.0}]
        recorded = [d._asdict() for d in calls]
        return summarize(
            settings, journals, recorded, [], [], {}, origin=1.0, until=10.0, drained=True
        )

    assert summary(deliveries)["ok"]  # the replay after the kill read the same rows
    lost = summary([*deliveries, D(2, [], 6.5, 6.6)])  # planned on a reservation the kill lost
    assert not lost["ok"] and lost["empty_batches"] == [2], lost
    empty = summary([*deliveries[:2], D(1, [], 9.0, 9.1)])
    assert not empty["ok"] and (empty["empty_batches"], empty["replays_differing"]) == ([1], [1])
    changed = summary([*deliveries[:2], D(1, [("b", 2.0, 1, 2)], 9.0, 9.1)])
    assert not changed["ok"] and changed["replays_differing"] == [1], changed
    waits = 2 if settings.sentinel else 1  # --sentinel waits for both replicas by default
    assert f"writers and readers wait for {waits} replica(s)" in table(
        {**empty, "drain_seconds": 1.0}
    )


def test_recovery_is_the_time_from_a_faults_end_to_the_next_delivery_begun_after_it() -> None:
    _, deliveries = synthetic()  # sink calls 3.0-3.2, 4.0-4.1, 9.0-9.1
    faults = [
        {"kind": "redis_kill", "start": 2.0, "end": 3.1},  # not 3.0-3.2 (begun before): 4.1
        {"kind": "redis_kill", "start": 4.5, "end": 5.0},  # 9.1
        {"kind": "kill_jvm", "start": 9.5, "end": 9.6},  # nothing after it
    ]
    found = nc.recoveries(faults, deliveries)
    assert found["redis_kill"] == {"count": 2, "median": 2.55, "max": 4.1, "never": 0}
    assert found["kill_jvm"] == {"count": 0, "median": None, "max": None, "never": 1}


def test_checker_catches_a_removed_delivery() -> None:
    adds, deliveries = synthetic()
    without = [d for d in deliveries if d.batch != 1]
    assert nc.lost(adds, without) == [adds[2]]
    assert not nc.check(adds, without, [], until=10.0)["ok"]


def test_checker_catches_an_older_reservation_and_an_early_sink() -> None:
    adds, deliveries = synthetic()
    older = [deliveries[0], D(1, [("a", 3.0, 0, 1)], 4.0, 4.1)]  # reservation 1 <= R = 1
    assert nc.lost(adds, older) == [adds[2]]
    early = [deliveries[0], D(1, [("a", 3.0, 0, 2)], 3.0, 3.4)]  # ended before the ack, 3.5
    assert nc.lost(adds, early) == [adds[2]]
    higher = [deliveries[0], D(1, [("a", 3.1, 0, 2)], 4.0, 4.1)]  # a later score: not it
    assert nc.lost(adds, higher) == [adds[2]]


def test_checker_catches_a_replay_with_other_rows() -> None:
    adds, deliveries = synthetic()
    changed = [*deliveries[:2], D(1, [("a", 3.0, 0, 2), ("b", 2.0, 1, 1)], 9.0, 9.1)]
    assert nc.replays(changed) == (1, [1])
    assert not nc.check(adds, changed, [], until=10.0)["ok"]


def test_checker_counts_duplicates_and_stalls() -> None:
    adds, deliveries = synthetic()
    again = [*deliveries, D(2, [("b", 2.0, 1, 2)], 9.5, 9.6)]  # b not added again: duplicate
    assert nc.duplicates(adds, again) == (1, 4)
    assert nc.empty_batches([D(3, [], 1.0, 1.1)]) == [3]
    late = [deliveries[0], D(1, [("a", 3.0, 0, 2)], 8.0, 8.5)]  # a waited from 3.5 to 8.5
    found = nc.stalls(adds, late, until=10.0)
    assert found[0] == nc.Stall(3.5, 8.5)
    assert nc.Stall(1.0, 3.2) in found  # a cold start: a waited from 1.0 to 3.2
    assert nc.longest_outside(found, [nc.Window("x", 0.0, 7.0)]) == nc.Stall(7.0, 8.5)
    assert nc.longest_outside(found, [nc.Window("x", 0.0, 9.0)]) is None


def test_checker_counts_lost_only_among_kept_adds() -> None:
    """--sentinel: an add no replica confirmed (kept False) may die with its primary; it is
    not lost, but counted apart with how many were delivered anyway, and it is no stall."""
    adds, deliveries = synthetic()
    gone = A("c", 5.0, 1, 1, 5.0, kept=False)  # never delivered: died with a primary
    came = A("d", 5.5, 0, 1, 5.5, kept=False)  # delivered all the same
    delivered = [*deliveries, D(2, [("d", 5.5, 0, 2)], 6.0, 6.1)]
    result = nc.check([*adds, gone, came], delivered, [], until=10.0)
    assert result["ok"], result
    assert (result["adds"], result["kept"], result["lost"]) == (5, 3, 0)
    assert (result["unkept"], result["unkept_delivered"]) == (2, 1)
    assert result["longest_stall_outside_faults"]["seconds"] < 4  # not c's 5 s to the end
    # The same add kept (a replica confirmed it): lost, and the run fails.
    kept = gone._replace(kept=True)
    result = nc.check([*adds, kept, came], delivered, [], until=10.0)
    assert (result["lost"], result["unkept"], result["ok"]) == (1, 1, False)
    assert nc.lost([*adds, kept, came], delivered) == [kept]
    # Records without ``kept`` (runs before --sentinel) are kept adds.
    record = {"member": "a", "score": 1.0, "shard": 0, "reserved": 0, "at": 1.0}
    assert nc.add_of(record).kept and not nc.add_of({**record, "kept": False}).kept


def poisoned() -> tuple[list[nc.Add], list[nc.Delivery], list[nf.DeadLetter]]:
    """--poison: ``p`` fails at every attempt (3) and ends a dead letter; ``f`` fails once
    and is processed on its retry; ``g`` is processed at once."""
    adds = [A("p", 1.0, 0, 0, 1.0), A("f", 1.0, 1, 0, 1.0), A("g", 2.0, 1, 0, 2.0)]
    deliveries = [
        D(0, [("f", 1.0, 1, 1), ("p", 1.0, 0, 1)], 3.0, 3.2, ("f", "p"), 103.2),
        D(1, [("f", 1.0, 1, 2), ("g", 2.0, 1, 2), ("p", 1.0, 0, 2)], 4.0, 4.2, ("p",), 104.2),
        D(2, [("p", 1.0, 0, 3)], 5.0, 5.2, ("p",), 105.2),
    ]
    dead = [nf.DeadLetter("p", 0, 105_300, 3, "nemesis poison: refused")]
    return adds, deliveries, dead


def poison_only(member: str) -> bool:
    return member == "p"


def test_fates_pass_a_run_with_poison() -> None:
    adds, deliveries, dead = poisoned()
    result = nf.fates(adds, deliveries, dead, poison_only, 3)
    assert result["ok"], result
    assert (result["processed"], result["dead_lettered"], result["lost"]) == (2, 1, 0)
    assert result["failed_rows"] == 4
    # I1 alone cannot tell: every add was delivered, processed or not.
    assert nc.lost(adds, deliveries) == []


def test_fates_catch_a_dropped_delivery() -> None:
    """The retry of ``f`` never delivered (its batch dropped): f was only failed, never
    processed nor a dead letter: lost. Likewise p without its dead letter."""
    adds, deliveries, dead = poisoned()
    dropped = [deliveries[0], deliveries[2]]
    result = nf.fates(adds, dropped, dead, poison_only, 3)
    assert not result["ok"] and result["lost"] == 2  # f, and g with it
    assert {a["member"] for a in result["lost_examples"]} == {"f", "g"}
    result = nf.fates(adds, deliveries, [], poison_only, 3)
    assert (result["ok"], result["lost"], result["dead_lettered"]) == (False, 1, 0)


def test_fates_catch_a_good_member_dead_lettered() -> None:
    """``f`` (not poison) a dead letter instead of processed: the run fails, naming it;
    so does a dead letter without its error, or buried before its last failure."""
    adds, deliveries, dead = poisoned()
    wrongly = [*dead, nf.DeadLetter("f", 1, 103_300, 3, "x")]
    without_retry = [d._replace(failed=(*d.failed, "f")) if d.batch == 1 else d for d in deliveries]
    result = nf.fates(adds, without_retry, wrongly, poison_only, 3)
    assert not result["ok"] and result["dead_good_members"] == ["f"]
    no_error = [dead[0]._replace(error=" ")]
    assert nf.fates(adds, deliveries, no_error, poison_only, 3)["dead_without_error"] == 1
    early = [dead[0]._replace(dead_at_ms=104_000)]  # before p's last failed delivery
    assert nf.fates(adds, deliveries, early, poison_only, 3)["lost"] == 1


def test_poison_shares_and_writer_members() -> None:
    """The sink's verdicts are seeded and stable; a writer batch's members follow its
    rate source's offsets; a batch whose row count differs is flagged."""
    members = [f"m{i}" for i in range(2000)]
    poison = [m for m in members if is_poison(3, 0.02, m)]
    flaky = [m for m in members if is_flaky(3, 0.02, m)]
    assert 20 < len(poison) < 60 and 50 < len(flaky) < 120 and not set(poison) & set(flaky)
    assert refusal(3, 0.02, poison[0], 5) and refusal(3, 0.02, flaky[0], 1)
    assert refusal(3, 0.02, flaky[0], 2) is None
    assert nf.writer_members(4, None, 2) == [f"w{i}" for i in range(8)]
    writes = [
        {"batch": 1, "start": None, "end": 2, "rows": 8},
        {"batch": 2, "start": 2, "end": 3, "rows": 5},
    ]
    adds, wrong = nf.writer_adds(writes, 4, lambda m: 0)
    assert len(adds) == 12 and wrong == [2]


def test_zombie_and_outage_checks_read_the_query_failures() -> None:
    """A zombie that held leases must fail with "lost its lease"; an outage that began
    while batches flowed must fail a query with the retryTimeout error, not another."""
    settings = Settings(zombie=True, outage=True)
    faults = [
        {"kind": "outage", "start": 10.0, "end": 80.0, "hit": True},
        {"kind": "zombie_consumer", "start": 100.0, "end": 105.0, "hit": True, "pid": 7},
    ]
    clear = {
        "kind": "query_failed",
        "at": 70.0,
        "pid": 7,
        "cause": "IckConnectionError: Ick 'soak': Redis did not answer within "
        "redis.retryTimeout (restarting, failing over, migrating a slot?)",
    }
    fenced = {
        "kind": "query_failed",
        "at": 106.0,
        "pid": 7,
        "cause": "LeaseLost: Ick 'soak' shard 0: this consumer lost its lease (nobody holds it)",
    }
    found = actors(settings, [], [], [], [], faults, [clear, fenced])
    assert found["outage"]["ok"] and found["zombie"]["ok"], found
    vague = {**clear, "cause": "Python worker failed to connect back."}
    found = actors(settings, [], [], [], [], faults, [vague, {**fenced, "pid": 8}])
    assert not found["outage"]["ok"] and not found["zombie"]["ok"], found
    assert (found["zombie"]["fenced"], found["outage"]["clear_error"]) == (0, 0)


def test_sentinel_mode_draws_failovers_and_reports_them() -> None:
    """--sentinel (no servers here): its kinds, the proxy's refused; the failovers of the
    summary and its table rows. The Sentinel soak itself is not in CI (a cold JVM start
    alone takes most of a minute); its run is in issue 25's note."""
    settings = parse(["--sentinel", "--minutes", "1"])
    assert settings.sentinel and settings.kinds == ()
    assert set(FAILOVERS) <= set(SENTINEL_KINDS)
    assert not {"redis_kill", "proxy_reset"} & set(SENTINEL_KINDS)
    assert parse(["--sentinel", "--kinds", "sentinel_kill"]).kinds == ("sentinel_kill",)
    assert parse(["--sentinel", "--unwaited", "1"]).unwaited == 1  # the control producer
    for argv in (
        ["--sentinel", "--kinds", "proxy_reset"],
        ["--kinds", "sentinel_kill"],
        ["--unwaited", "1"],
        ["--sentinel", "--unwaited", "2"],  # no waiting producer left
    ):
        with pytest.raises(SystemExit):
            parse(argv)
    faults = [
        {"kind": "sentinel_kill", "hit": True, "promoted": True, "answered_after": 2.5},
        {"kind": "sentinel_kill", "hit": True, "promoted": True, "answered_after": 1.5},
        {"kind": "sentinel_stop", "hit": True, "promoted": False, "answered_after": 0.7},
        {"kind": "sentinel_failover", "hit": False, "error": "INPROG"},
    ]
    found = failovers(faults)
    assert found["sentinel_kill"] | {"answered_after": None} == {
        "drawn": 2,
        "hit": 2,
        "promoted": 2,
        "answered_after": None,
        "median": 2.0,
        "max": 2.5,
    }
    assert (found["sentinel_stop"]["promoted"], found["sentinel_failover"]["max"]) == (0, None)


def test_cluster_mode_draws_its_faults_and_the_checker_catches_a_dropped_delivery() -> None:
    """--cluster (no servers here): its kinds (no proxy's, no Sentinel's), the
    combinations it refuses, its failovers in the summary; on records shaped as a cluster
    run's (kept adds, an unkept one of an older run), an empty batch fails the run,
    removing the one delivery of a kept add fails I1, and a park a replica confirmed that
    no dehydrator call released is lost (an unkept one is counted apart)."""
    settings = parse(["--cluster", "--minutes", "1", "--dehydrator"])
    assert settings.cluster and settings.dehydrator and not settings.sentinel
    assert set(CLUSTER_FAILOVERS) <= set(CLUSTER_KINDS)
    assert not {"redis_kill", "proxy_reset", "sentinel_kill"} & set(CLUSTER_KINDS)
    assert parse(["--cluster", "--kinds", "cluster_migrate"]).kinds == ("cluster_migrate",)
    both = parse(["--cluster", "--poison", "0.02", "--writer", "--zombie"])
    assert (both.poison, both.writer, both.zombie) == (0.02, True, True)
    assert kinds_of(both) == (*CLUSTER_KINDS, "zombie_consumer")
    outage = parse(["--cluster", "--outage"])  # every node paused past redis.retryTimeout
    assert kinds_of(outage) == (*CLUSTER_KINDS, "outage")
    for argv in (
        ["--cluster", "--kinds", "proxy_reset"],
        ["--cluster", "--kinds", "sentinel_kill"],
        ["--cluster", "--sentinel"],
        ["--kinds", "cluster_kill"],
    ):
        with pytest.raises(SystemExit):
            parse(argv)
    found = failovers(
        [
            {"kind": "cluster_kill", "hit": True, "promoted": True, "answered_after": 3.1},
            {"kind": "cluster_stop", "hit": True, "primary": False, "seconds": 2.0},
        ],
        CLUSTER_FAILOVERS,
    )
    assert set(found) == set(CLUSTER_FAILOVERS)
    assert (found["cluster_kill"]["max"], found["cluster_stop"]["promoted"]) == (3.1, 0)

    adds, deliveries = synthetic()
    gone = A("c", 5.0, 1, 1, 5.0, kept=False)  # an older run's record: no replica confirmed
    result = nc.check([*adds, gone], deliveries, [], until=10.0)
    assert result["ok"] and (result["lost"], result["unkept"]) == (0, 1), result
    empty = D(2, [], 6.0, 6.1)  # a reservation lost in a failover: the readers wait now
    assert not nc.check([*adds, gone], [*deliveries, empty], [], until=10.0)["ok"]
    dropped = [d for d in deliveries if d.batch != 1]  # the kept add of a at 3.5: never delivered
    result = nc.check([*adds, gone], dropped, [], until=10.0)
    assert not result["ok"] and result["lost"] == 1, result
    assert result["lost_examples"][0]["member"] == "a"

    parks = [
        {"id": "d0", "delay_ms": 100, "sent": 1.0, "at": 1.1, "kept": True},
        {"id": "d1", "delay_ms": 100, "sent": 1.0, "at": 1.1, "kept": False},
    ]
    released = [{"batch": 0, "rows": [["d0", "dh:d0", 0]], "start": 1.5, "end": 1.6}]
    ick = [{"batch": 0, "rows": [["dh:d0", 1.1, 0, 1]], "start": 2.0, "end": 2.1}]
    parked = check_parks(parks, released, ick)
    assert (parked["lost"], parked["unkept"], parked["not_in_ick"]) == (0, 1, 0)
    parked = check_parks(parks, [], ick)  # the release of d0 dropped
    assert (parked["lost"], parked["lost_examples"]) == (1, ["d0"])


@pytest.mark.slow
def test_smoke_soak(tmp_path) -> None:
    """About 2.5 minutes: a cold start, 75 s of mixed faults with --poison 0.02, the drain,
    the checks; then the checkers catch a delivery removed from this run's record."""
    began = time.monotonic()
    settings = Settings(
        minutes=1.25, seed=6, out=str(tmp_path / "soak"), drain_timeout=75.0, poison=0.02
    )
    summary = soak(settings)
    took = time.monotonic() - began
    print(f"smoke soak: {took:.0f} s")
    assert summary["faults"] >= 5, summary["faults_by_kind"]
    assert summary["drained"], summary
    assert summary["lost"] == 0, summary["lost_examples"]
    assert summary["replays_differing"] == [] and summary["empty_batches"] == []
    assert not any(summary["stuck"].values()), summary["stuck"]
    fates = summary["fates"]
    assert fates["ok"] and fates["lost"] == 0, fates
    assert fates["dead_letters"] and fates["dead_lettered"] and fates["failed_rows"], fates
    assert summary["ok"], summary

    catches_a_dropped_delivery_and_a_changed_replay(tmp_path / "soak")
    catches_a_lost_retry_and_a_good_dead_letter(tmp_path / "soak", settings)


def catches_a_dropped_delivery_and_a_changed_replay(out: Path) -> None:
    """On the run recorded in ``out``: I1 holds; removing the batch that delivered the
    last kept add makes I1 fail; a replay of a batch with one row fewer makes I3 fail."""
    adds = [nc.add_of(r) for r in nc.read_jsonl(out / "adds.jsonl")]
    deliveries = [nc.delivery_of(r) for r in nc.read_jsonl(out / "deliveries.jsonl")]
    assert adds and deliveries and nc.lost(adds, deliveries) == []
    # Remove the batch (every call of its id) that delivered the last kept add: I1 fails.
    last = [a for a in adds if a.kept][-1]
    batches = {
        d.batch
        for d in deliveries
        for m, s, sh, r in d.rows
        if (m, sh) == (last.member, last.shard)
        and r > last.reserved
        and s <= last.score
        and d.end > last.at
    }
    assert batches
    cut = [d for d in deliveries if d.batch not in batches]
    assert last in nc.lost(adds, cut)
    # A replay of some batch with one row fewer: I3 fails.
    victim = next(d for d in deliveries if len(d.rows) > 1)
    replayed = [*deliveries, victim._replace(rows=victim.rows[1:], end=victim.end + 1)]
    assert victim.batch in nc.replays(replayed)[1]


def catches_a_lost_retry_and_a_good_dead_letter(out: Path, settings: Settings) -> None:
    """--poison, on the run recorded in ``out``: the dead letters are poison only; without
    the calls that processed the last add of a good member, its add is lost; a good
    member among the dead letters fails the run."""
    adds = [nc.add_of(r) for r in nc.read_jsonl(out / "adds.jsonl")]
    deliveries = [nc.delivery_of(r) for r in nc.read_jsonl(out / "deliveries.jsonl")]
    dead = [nf.dead_letter_of(r) for r in nc.read_jsonl(out / "dead_letters.jsonl")]

    def poison(member: str) -> bool:
        return is_poison(settings.seed, settings.poison, member)

    assert dead and all(poison(d.member) and "poison" in d.error for d in dead)
    assert nf.fates(adds, deliveries, dead, poison, 3)["ok"]
    good = next(a for a in reversed(adds) if not poison(a.member))
    done = {
        (d.batch, d.end)
        for d in deliveries
        if any(m == good.member and r > good.reserved for m, _, _, r in d.rows)
        and good.member not in d.failed
        and d.end > good.at
    }
    dropped = [d for d in deliveries if (d.batch, d.end) not in done]
    assert done and nf.fates([good], deliveries, dead, poison, 3)["lost"] == 0
    assert nf.fates([good], dropped, dead, poison, 3)["lost"] == 1
    assert not nf.fates(adds, dropped, dead, poison, 3)["ok"]
    wrongly = [*dead, nf.DeadLetter(good.member, good.shard, 0, 3, "refused")]
    result = nf.fates(adds, deliveries, wrongly, poison, 3)
    assert not result["ok"] and result["dead_good_members"] == [good.member]


@pytest.mark.slow
def test_smoke_soak_cluster(tmp_path) -> None:
    """About 2 minutes idle (4 loaded): a cold start, 30 s of Redis Cluster faults (seed
    22 draws a CLUSTER FAILOVER, a slot migration, a kill -9 of a primary and a SIGSTOP,
    in that order; 3 of them fit), the dehydrator loop, writers and readers waiting for a
    replica through the connector, the drain: every recorded add on a replica, none lost,
    no park lost or released early, no empty batch, replays identical, nothing stuck;
    then the checker catches a delivery removed from the record."""
    settings = Settings(cluster=True, dehydrator=True, kinds=CLUSTER_FAILOVERS, seed=22)
    summary = failover_smoke(tmp_path / "soak", settings)
    parks = summary["dehydrator"]
    assert (parks["lost"], parks["early"], parks["not_in_ick"]) == (0, 0, 0), parks


@pytest.mark.slow
def test_smoke_soak_sentinel(tmp_path) -> None:
    """About 2 minutes idle: 60 s of Sentinel failovers, one every 3-6 s after the last
    (kill -9, SENTINEL FAILOVER and SIGSTOP of the primary; each waits for the
    sentinels' promotion, so fewer fit) with
    the dehydrator loop, writers and readers waiting for both replicas: the same checks
    as the cluster's."""
    settings = Settings(sentinel=True, wait_replicas=2, dehydrator=True, kinds=FAILOVERS)
    summary = failover_smoke(tmp_path / "soak", settings, minutes=1.0, faults=2, every=(3.0, 6.0))
    parks = summary["dehydrator"]
    assert (parks["lost"], parks["early"], parks["not_in_ick"]) == (0, 0, 0), parks


def failover_smoke(
    out: Path,
    settings: Settings,
    minutes: float = 0.5,
    faults: int = 3,
    every: tuple[float, float] = (4.0, 8.0),
) -> dict[str, Any]:
    """A soak of ``settings`` (a Sentinel set or a cluster) for ``minutes`` and its checks:
    a fault ``every`` seconds after the last (at least ``faults``), every recorded add on
    a replica and none lost, no empty batch, replays identical, nothing stuck; then the
    checker catches a delivery removed from it."""
    began = time.monotonic()
    settings.minutes, settings.out, settings.every = minutes, str(out), every
    settings.drain_timeout = 120.0  # a consumer restarted late (a loaded machine) still drains
    summary = soak(settings)
    print(f"failover smoke soak: {time.monotonic() - began:.0f} s")
    assert summary["faults"] >= faults, summary["faults_by_kind"]
    assert summary["drained"], summary
    assert summary["lost"] == 0, summary["lost_examples"]
    assert summary["replays_differing"] == [], summary["replays_differing"]
    assert summary["empty_batches"] == [], summary["empty_batches"]  # readers wait
    assert summary["unkept"] == 0 and summary["kept"] == summary["adds"] > 0, summary
    assert not any(summary["stuck"].values()), summary["stuck"]
    assert summary["ok"], summary
    catches_a_dropped_delivery_and_a_changed_replay(out)
    return summary


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
