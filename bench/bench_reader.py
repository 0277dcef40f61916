"""Benchmarks of readStream.format("ick"), each against baselines of the same run in
alternating rounds (bench/pairs.py: the median ratio over the rounds, its quartiles and
min-max, the load average of each round).

drain:   N queued members (1,000,000; --quick 100,000) through readStream -> noop sink
         (Trigger.AvailableNow), at maxMembersPerTrigger 250,000 and 1,000,000, on 1 and 4
         shards. Baselines: one Python loop doing reserve + read + commit with the same
         Lua scripts, each micro-batch's members at once (Redis's part: a call costs
         Redis more in larger sets, docs/sizing.md), and the no-I/O source (spark_floor.py's
         format "backlog") run through the same micro-batches and tasks (Spark's part).
         Target: the micro-batches (Spark's triggerExecution) >= 0.9 of the physical
         limit, the slower of the two, as the median of the rounds; the loop reserving
         10,000 at a time shown beside.
latency: producers add 1,000 members/s (score = add time) while a query with trigger
         processingTime=0 runs; p50/p99 of arrival in foreachBatch minus score, per round.
         Baseline: the no-I/O source with the same trigger and sink (events at 1,000/s,
         available the moment they happen) while the same producers add to an Ick nobody
         reads; targets p50 <= 1.05x and p99 <= 1.1x it. Also the raw loop. Spark's
         durationMs per step of the triggers that delivered rows, and which triggers hold
         the p99 (params.tail in the JSON).

    python bench/bench_reader.py [--quick] [--rounds 5] [--own-core] [--shards 1,4]
        [--parts drain,latency]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pairs
import spark_floor
from common import Report, median, percentile
from pairs import Spread, run_rounds

from pyspark_ick import ShardedIck, connect
from pyspark_ick.keys import shard_names
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import redis_server, spark_session

SHARDS = 4


def load(client: Any, name: str, n: int) -> None:
    ick = ShardedIck(client, name, SHARDS)
    ick.delete()
    step = 50_000
    for start in range(0, n, step):
        members = [f"doc:{i}" for i in range(start, min(n, start + step))]
        ick.add_pairs(members, [float(i) for i in range(start, start + len(members))])


def raw_drain(client: Any, name: str, batch: int = 10_000) -> int:
    """Reserve ``batch`` per shard round robin, read the manifest, commit: until empty."""
    logs = [ReservationLog(client, key) for key in shard_names(name, SHARDS)]
    tokens = [log.lease.acquire("bench", 60_000) for log in logs]
    numbers = [log.describe()["last_committed"] for log in logs]
    got = 0
    busy = True
    while busy:
        busy = False
        for i, log in enumerate(logs):
            number, moved, _ = log.reserve(batch, numbers[i], tokens[i])
            if moved:
                busy = True
                got += sum(len(m.items) // 2 for m in log.read(numbers[i], number))
                log.commit(number, tokens[i])
                numbers[i] = number
    for log, token in zip(logs, tokens, strict=True):
        log.lease.release(token)
    return got


def stream(spark: Any, url: str, name: str, **options: Any) -> Any:
    reader = (
        spark.readStream.format("ick")
        .option("redis.url", url)
        .option("ick", name)
        .option("shards", SHARDS)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def progress_seconds(query: Any) -> float:
    """Seconds the query spent in micro-batches (Spark's triggerExecution)."""
    return sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress) / 1000


def available_now(reader: Any) -> tuple[float, float, int]:
    """Drain streaming DataFrame ``reader`` into the noop sink with Trigger.AvailableNow;
    returns (seconds in micro-batches, seconds from start to stop, micro-batches)."""
    start = time.perf_counter()
    query = (
        reader.writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-ckpt-"))
        .start()
    )
    query.awaitTermination()
    wall = time.perf_counter() - start
    batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    return progress_seconds(query), wall, batches


def stream_drain(spark: Any, url: str, name: str, per_trigger: int) -> float:
    """Drain with Trigger.AvailableNow; returns the seconds spent in micro-batches
    (Spark's triggerExecution: without the query's start and stop)."""
    reader = stream(spark, url, name, maxMembersPerTrigger=per_trigger, consumerId="bench")
    return available_now(reader)[0]


def floor_drain(spark: Any, n: int, per_trigger: int, per_partition: int = 100_000) -> Any:
    """The no-I/O source with ``n`` rows waiting, the same micro-batches and tasks as a
    drain of ``n`` members at ``per_trigger`` (spark_floor.py's format "backlog")."""
    return (
        spark.readStream.format("backlog")
        .option("members", n)
        .option("perTrigger", per_trigger)
        .option("minPerPartition", per_partition)
        .load()
    )


def floor_query(spark: Any) -> float:
    """Seconds for a Trigger.AvailableNow query of the no-I/O source, start to stop."""
    return available_now(spark.readStream.format("clock").load())[1]


@contextmanager
def shard_count(shards: int) -> Iterator[None]:
    """load, raw_drain and stream work on ``shards`` shards in the block."""
    global SHARDS
    saved, SHARDS = SHARDS, shards
    try:
        yield
    finally:
        SHARDS = saved


TRIGGERS: tuple[int, ...] = (250_000, 1_000_000)  # --triggers


def drain_sides(
    spark: Any,
    url: str,
    n: int,
    walls: dict[str, list[float]],
    variant: dict[str, str] | None = None,
) -> dict[str, Callable[[], float]]:
    """The sides of a drain round: the raw loop, the no-I/O source and the readStream drain
    at each of TRIGGERS (and with the reader options ``variant``, if any), each on a fresh
    backlog of ``n`` members (loaded untimed); each returns seconds (micro-batches for
    Spark's), its start-to-stop seconds go to ``walls``."""
    client = connect(url)
    name = f"drain{SHARDS}"  # one Ick per shard count: a shard count is fixed once written

    def raw(batch: int = 10_000) -> Callable[[], float]:
        def side() -> float:
            load(client, name, n)
            start = time.perf_counter()
            assert raw_drain(client, name, batch) == n
            return time.perf_counter() - start

        return side

    def drain(per_trigger: int, key: str = "drain", **options: str) -> Callable[[], float]:
        def side() -> float:
            load(client, name, n)
            reader = stream(
                spark,
                url,
                name,
                maxMembersPerTrigger=per_trigger,
                consumerId="bench",
                **options,
            )
            busy, wall, _ = available_now(reader)
            assert ShardedIck(client, name, SHARDS).stats()["total_size"] == 0
            walls.setdefault(f"{key} {per_trigger}", []).append(wall)
            return busy

        return side

    def floor(per_trigger: int) -> Callable[[], float]:
        def side() -> float:
            busy, wall, _ = available_now(floor_drain(spark, n, per_trigger))
            walls.setdefault(f"floor {per_trigger}", []).append(wall)
            return busy

        return side

    sides: dict[str, Callable[[], float]] = {"raw": raw()}
    for per_trigger in TRIGGERS:
        sides[f"raw {per_trigger}"] = raw(max(1, per_trigger // SHARDS))  # the batch's share
        sides[f"floor {per_trigger}"] = floor(per_trigger)
        sides[f"drain {per_trigger}"] = drain(per_trigger)
        if variant:
            sides[f"variant {per_trigger}"] = drain(per_trigger, "variant", **variant)
    return sides


def bench_drain(
    report: Report,
    spark: Any,
    url: str,
    n: int,
    rounds: int,
    shards: tuple[int, ...],
    cpus: dict[str, Any],
    variant: dict[str, str] | None = None,
) -> None:
    """Per shard count, ``rounds`` alternating rounds of drain_sides; the target is each
    drain against the slower of the raw loop and the no-I/O source, each run through the
    drain's micro-batches (the physical limit); the raw loop of 10,000s shown beside."""
    client = connect(url)
    report.params.update(
        members=n, shards=list(shards), rounds=rounds, triggers=TRIGGERS, variant=variant or {}
    )
    with shard_count(max(shards)):  # warm-up: JIT, script loads, Python workers
        load(client, "warm", min(n, 2 * TRIGGERS[0]))
        stream_drain(spark, url, "warm", TRIGGERS[0])
        load(client, "warm", min(n, 2 * TRIGGERS[0]))
        raw_drain(client, "warm")
        available_now(floor_drain(spark, min(n, 2 * TRIGGERS[0]), TRIGGERS[0]))
    start_stop = min(floor_query(spark) for _ in range(2))
    for count in shards:
        walls: dict[str, list[float]] = {}
        with shard_count(count):
            done = run_rounds(
                f"drain, {count} shard(s)", drain_sides(spark, url, n, walls, variant), rounds, cpus
            )
        raw = f"{count} shard(s): raw loop (reserve 10k + read + commit)"
        report.add(raw, n / done.side("raw").median, "members/s")
        for t in TRIGGERS:
            floor = f"{count} shard(s), {t:,}/trigger: no-I/O source, same batches"
            batches = f"{count} shard(s), {t:,}/trigger: raw loop, same batches"
            drain = f"{count} shard(s), {t:,}/trigger: drain"
            per_s = {
                side: n / done.side(side).median
                for side in (f"floor {t}", f"raw {t}", f"drain {t}")
            }
            report.pair(
                floor, per_s[f"floor {t}"], "members/s", raw, done, done.ratio("raw", f"floor {t}")
            )
            report.pair(
                batches, per_s[f"raw {t}"], "members/s", raw, done, done.ratio("raw", f"raw {t}")
            )
            report.pair(
                f"{drain} vs raw loop",
                per_s[f"drain {t}"],
                "members/s",
                raw,
                done,
                done.ratio("raw", f"drain {t}"),
            )
            report.pair(
                f"{drain} vs the limit (slower of the two)",
                per_s[f"drain {t}"],
                "members/s",
                raw,
                done,
                done.ratios(lambda v, t=t: max(v[f"raw {t}"], v[f"floor {t}"]) / v[f"drain {t}"]),
                minimum=0.9,
            )
            spent = median(walls[f"drain {t}"]) - done.side(f"drain {t}").median
            report.add(f"{drain}: query start and stop, median", spent, "s")
            if variant:
                change = done.ratio(f"drain {t}", f"variant {t}")
                told = "told apart" if change.excludes(1.0) else "within the noise"
                shown = ",".join(f"{k}={v}" for k, v in variant.items())
                report.pair(
                    f"{drain} with {shown} vs without ({told})",
                    n / done.side(f"variant {t}").median,
                    "members/s",
                    raw,
                    done,
                    change,
                )
    report.add("query start and stop: no-I/O Python source (Spark's floor)", start_stop, "s")


class Producer(threading.Thread):
    """Adds ``rate`` members per second in ticks of 10 ms, score = time of the add."""

    def __init__(self, client: Any, name: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.ick = ShardedIck(client, name, SHARDS)
        self.rate = rate
        self.stopped = threading.Event()
        self.count = 0

    def run(self) -> None:
        tick = 0.01
        per_tick = max(1, round(self.rate * tick))
        next_at = time.time()
        while not self.stopped.is_set():
            now = time.time()
            members = [f"m{self.count + i}" for i in range(per_tick)]
            self.ick.add_pairs(members, [now] * per_tick)
            self.count += per_tick
            next_at += tick
            time.sleep(max(0.0, next_at - time.time()))


def raw_latency(client: Any, name: str, seconds: float) -> list[float]:
    logs = [ReservationLog(client, key) for key in shard_names(name, SHARDS)]
    tokens = [log.lease.acquire("bench", 60_000) for log in logs]
    numbers = [log.describe()["last_committed"] for log in logs]
    delays: list[float] = []
    end = time.time() + seconds
    while time.time() < end:
        for i, log in enumerate(logs):
            number, moved, _ = log.reserve(100_000, numbers[i], tokens[i])
            if moved:
                for manifest in log.read(numbers[i], number):
                    now = time.time()
                    delays += [now - float(s) for s in manifest.items[1::2]]
                log.commit(number, tokens[i])
                numbers[i] = number
    for log, token in zip(logs, tokens, strict=True):
        log.lease.release(token)
    return delays


@dataclass
class Trigger:
    """One micro-batch of a latency query: Spark's durationMs by step, when it started
    (s, epoch), the gap since the previous one ended, the delays of the rows it gave."""

    batch: int
    started: float
    ms: dict[str, float]
    gap_ms: float
    delays: list[float] = field(default_factory=list)


WARM_BATCHES = 3  # batches with rows before the latency is measured


def stream_latency(
    spark: Any,
    reader: Any,
    seconds: float,
    client: Any | None = None,
    name: str = "",
) -> list[Trigger]:
    """The triggers of ``seconds`` of a processingTime=0 query of ``reader`` (with a
    Producer adding to Ick ``name`` when ``client`` is given) that delivered rows, each
    with the delays (arrival in foreachBatch minus score) of its rows."""
    delays: dict[int, list[float]] = {}
    measuring = threading.Event()

    def sink(df: Any, batch: int) -> None:
        scores = [row.score for row in df.select("score").collect()]
        now = time.time()
        if measuring.is_set():
            delays[batch] = [now - s for s in scores]

    query = (
        reader.writeStream.foreachBatch(sink)
        .trigger(processingTime="0 seconds")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-ckpt-"))
        .start()
    )
    producer = Producer(client, name, 1000) if client is not None else None
    if producer:
        producer.start()
    try:
        # warm-up: the first micro-batches that deliver rows plan, start Python workers and
        # (the Ick) take the leases; on a loaded machine the first takes seconds, so wait
        # for WARM_BATCHES of them, not a fixed time, or it lands in the window measured
        # (docs/sizing.md#the-latency-tail)
        deadline = time.monotonic() + 180
        while sum(1 for p in query.recentProgress if p["numInputRows"]) < WARM_BATCHES:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {WARM_BATCHES} batches with rows in 180 s")
            time.sleep(0.2)
        measuring.set()
        time.sleep(seconds)
        measuring.clear()
        return triggers(query.recentProgress, delays)
    finally:
        if producer:
            producer.stopped.set()
            producer.join()
        query.stop()


def triggers(progress: list[dict[str, Any]], delays: dict[int, list[float]]) -> list[Trigger]:
    """The measured triggers of ``progress`` (those whose batch ``delays`` has)."""
    found: list[Trigger] = []
    end = None
    for p in progress:
        started = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        gap = (started - end) * 1000 if end is not None else 0.0
        end = started + p["durationMs"].get("triggerExecution", 0) / 1000
        if p["batchId"] in delays and p["numInputRows"]:
            ms = {k: float(v) for k, v in p["durationMs"].items()}
            found.append(Trigger(p["batchId"], started, ms, gap, delays[p["batchId"]]))
    return found


def tail(found: list[Trigger], q: float = 0.99) -> dict[str, Any]:
    """Which triggers make the ``q`` quantile of the delays: per step of Spark's durationMs
    (and the gap before a trigger), the median over all triggers, over the triggers holding
    a delay at or above the quantile (the tail), and over the triggers just before those."""
    every = [d for t in found for d in t.delays]
    if not every:
        return {}
    cut = percentile(every, q)
    index = {id(t): i for i, t in enumerate(found)}
    slow = [t for t in found if max(t.delays) >= cut]
    before = [found[index[id(t)] - 1] for t in slow if index[id(t)] > 0]
    steps = sorted({k for t in found for k in t.ms} | {"gap"})

    def med(group: list[Trigger], step: str) -> float:
        values = [t.gap_ms if step == "gap" else t.ms.get(step, 0.0) for t in group]
        return median(values) if values else float("nan")

    worst = sorted(found, key=lambda t: -max(t.delays))[:3]
    return {
        "slowest": [
            {
                "batch": t.batch,
                "max_delay_ms": max(t.delays) * 1000,
                "ms": {**t.ms, "gap": t.gap_ms},
                "before_ms": {**found[index[id(t)] - 1].ms, "gap": found[index[id(t)] - 1].gap_ms}
                if index[id(t)] > 0
                else {},
            }
            for t in worst
        ],
        "quantile": q,
        "delay_ms": cut * 1000,
        "triggers": len(found),
        "tail_triggers": len(slow),
        "tail_batches": [t.batch for t in slow],
        "steps_ms": {
            step: {"all": med(found, step), "tail": med(slow, step), "before": med(before, step)}
            for step in steps
        },
    }


def bench_latency(
    report: Report, spark: Any, url: str, seconds: float, rounds: int, cpus: dict
) -> None:
    """``rounds`` alternating rounds of the Ick query, the no-I/O source under the same
    producers, and the raw loop, ``seconds / rounds`` each; p50 and p99 ratios per round."""
    client = connect(url)
    # The session's first foreachBatch query is slower for a minute whatever its source
    # (the no-I/O source: p50 230 ms first, 198 ms next): warm that path up unmeasured.
    stream_latency(spark, spark.readStream.format("clock").load(), min(seconds, 10.0))
    each = seconds / rounds
    got: dict[str, list[list[Trigger]]] = {"ick": [], "floor": []}
    raw: list[list[float]] = []

    def ick() -> float:
        ShardedIck(client, "lat", SHARDS).delete()
        reader = stream(spark, url, "lat", consumerId="bench-latency")
        got["ick"].append(stream_latency(spark, reader, each, client, "lat"))
        return percentile([d for t in got["ick"][-1] for d in t.delays], 0.5) * 1000

    def floor() -> float:
        # the same producers, adding to an Ick nobody reads: the same load on the machine
        clock = spark.readStream.format("clock").load()
        got["floor"].append(stream_latency(spark, clock, each, client, "lat-idle"))
        ShardedIck(client, "lat-idle", SHARDS).delete()
        return percentile([d for t in got["floor"][-1] for d in t.delays], 0.5) * 1000

    def loop() -> float:
        ShardedIck(client, "lat2", SHARDS).delete()
        producer = Producer(client, "lat2", 1000)
        producer.start()
        try:
            raw.append(raw_latency(client, "lat2", each))
        finally:
            producer.stopped.set()
            producer.join()
        return percentile(raw[-1], 0.5) * 1000

    done = run_rounds("latency", {"ick": ick, "floor": floor, "raw": loop}, rounds, cpus)
    report.params.update(rate=1000, seconds=seconds, trigger="processingTime=0", rounds=rounds)

    def at(side: str, i: int, q: float) -> float:
        return percentile([d for t in got[side][i] for d in t.delays], q) * 1000

    for q in (0.5, 0.99):
        name = f"latency p{round(q * 100)}"
        report.add(
            f"{name} raw loop, median of rounds",
            median([percentile(r, q) * 1000 for r in raw]),
            "ms",
        )
        floor_row = f"{name} no-I/O Python source (Spark's floor), median of rounds"
        report.add(floor_row, median([at("floor", i, q) for i in range(rounds)]), "ms")
        report.pair(
            f"{name} readStream -> foreachBatch, median of rounds",
            median([at("ick", i, q) for i in range(rounds)]),
            "ms",
            floor_row,
            done,
            Spread.of([at("ick", i, q) / at("floor", i, q) for i in range(rounds)]),
            maximum=1.1 if q > 0.5 else 1.05,
        )
    report.add(
        "latency members measured (readStream)",
        sum(len(t.delays) for r in got["ick"] for t in r),
        "members",
    )
    every = {side: [t for r in got[side] for t in r] for side in got}
    # where a trigger's time goes: Spark's durationMs of the triggers that delivered rows
    steps = {k for t in every["ick"] for k in t.ms}
    for step in sorted(steps, key=lambda k: -median([t.ms.get(k, 0.0) for t in every["ick"]])):
        floor_step = f"trigger {step}, median: no-I/O source"
        report.add(floor_step, median([t.ms.get(step, 0.0) for t in every["floor"]]), "ms")
        report.compare(
            f"trigger {step}, median: readStream",
            median([t.ms.get(step, 0.0) for t in every["ick"]]),
            "ms",
            floor_step,
        )
    report.params["tail"] = {side: tail(every[side]) for side in every}
    for side, found in report.params["tail"].items():
        if not found:
            continue
        print(
            f"\n{side}: p99 {found['delay_ms']:.0f} ms, {found['tail_triggers']} of "
            f"{found['triggers']} triggers hold the tail; median ms all / tail / the one before"
        )
        for step, ms in sorted(found["steps_ms"].items(), key=lambda kv: -kv[1]["all"]):
            print(f"  {step:<18} {ms['all']:8.1f} {ms['tail']:8.1f} {ms['before']:8.1f}")
        for worst in found["slowest"]:
            steps = ", ".join(f"{k} {v:.0f}" for k, v in worst["ms"].items() if v)
            before = ", ".join(f"{k} {v:.0f}" for k, v in worst["before_ms"].items() if v)
            print(f"  batch {worst['batch']}: {worst['max_delay_ms']:.0f} ms: {steps}")
            print(f"    the trigger before: {before}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="100,000 members, 20 s of latency in all"
    )
    parser.add_argument("--members", type=int, default=None, help="drain backlog")
    parser.add_argument("--seconds", type=float, default=None, help="latency, all rounds")
    parser.add_argument("--shards", default="1,4", help="shard counts of the drain")
    parser.add_argument("--parts", default="drain,latency", help="drain, latency or both")
    parser.add_argument(
        "--triggers", default="250000,1000000", help="maxMembersPerTrigger of the drains"
    )
    parser.add_argument(
        "--variant",
        default="",
        help="reader options KEY=VALUE[,KEY=VALUE]: every drain also runs with them, a side "
        "of its own, and the change is told from noise or not (docs/sizing.md)",
    )
    pairs.add_arguments(parser)
    args = parser.parse_args(argv)
    n = args.members or (100_000 if args.quick else 1_000_000)
    seconds = args.seconds or (20.0 if args.quick else 60.0)
    shards = tuple(int(x) for x in args.shards.split(","))
    parts = set(args.parts.split(","))
    global TRIGGERS
    TRIGGERS = tuple(int(x) for x in args.triggers.split(","))
    variant = dict(kv.split("=", 1) for kv in args.variant.split(",") if kv)
    suffix = ("_quick" if args.quick else "") + ("_variant" if args.variant else "")
    with redis_server() as server:
        cpus = pairs.layout(server.process.pid if server.process else None, args.own_core)
        spark = spark_session("bench-reader", **{"spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        spark_floor.register(spark)
        loads = {"loadavg_start": list(os.getloadavg()), "cpus": cpus}
        if "drain" in parts:
            drain = Report(f"reader_drain{suffix}", params=dict(loads))
            bench_drain(drain, spark, server.url, n, args.rounds, shards, cpus, variant)
            drain.params["loadavg_end"] = list(os.getloadavg())
            drain.show()
        if "latency" in parts:
            latency = Report(f"reader_latency{suffix}", params=dict(loads))
            bench_latency(latency, spark, server.url, seconds, args.rounds, cpus)
            latency.params["loadavg_end"] = list(os.getloadavg())
            latency.show()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
