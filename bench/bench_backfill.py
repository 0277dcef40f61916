"""A backfill beside live work (issue 53): live members' add-to-commit p99 with a backfill
running vs with none, the backfill's finish time vs what the sink's spare capacity allows,
and the same backfill written as live (what users did before the lane).

Three sides in alternating rounds (pairs.py), each on a fresh Ick of one shard:

- ``none``: live producers only, for as long as the backfill would take;
- ``lane``: ``--size`` members marked at once with ``lane="backfill"``, then live producers;
- ``as_live``: the same members written live, then live producers.

The consumer is the stream reader's driver side (``stream_reader``: latestOffset, read,
commit in Spark's order, its job ahead included) with a processingTime trigger of
``--trigger`` seconds: a batch starts at the next trigger, or at once when the one before
ran over. The sink indexes at most ``--sink-rate`` members/s: a batch of n members takes
n / rate seconds. Live producers add ``--live-rate`` members/s (Redis-time scores, in
ticks of 10 ms) until the backfill is done and ``--size / (sink - live rate)`` seconds
passed; every live member they added is delivered and counted. A live member's
add-to-commit time runs from its add to the end of the batch that delivered it (the sink
done: Spark's commit follows). Spark's own cost per
batch (bench/spark_floor.py, about 0.2 s at rest) is left out unless ``--batch-floor``
adds it to every batch with rows; the reader's Redis calls are in.

Run: ``python bench/bench_backfill.py [--size N] [--rounds R] [--share S]``; starts its own
redis-server. Writes bench/results/backfill.json.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from common import Report, percentile
from pairs import add_arguments, layout, run_rounds

from pyspark_ick import ShardedIck, connect
from pyspark_ick.spark.ick_reader import STREAM_SCHEMA, stream_reader
from pyspark_ick.testing import redis_server

TICK = 0.01  # producers add every 10 ms


@dataclass
class Run:
    """What one side measured: live add-to-commit times (s), the backfill's finish (s
    after the start), the run's length."""

    waits: list[float] = field(default_factory=list)
    finished: float | None = None
    seconds: float = 0.0


def produce(
    client: Any, name: str, rate: int, stop: threading.Event, added: dict[str, float]
) -> None:
    """Add ``rate`` live members a second, in ticks, until ``stop``; their add times."""
    ick = ShardedIck(client, name, 1)
    per_tick, n, start = max(1, round(rate * TICK)), 0, time.monotonic()
    while not stop.is_set():
        members = [f"live:{n + i}" for i in range(per_tick)]
        now = time.monotonic()  # before the add: a batch may deliver them at once
        for m in members:
            added[m] = now
        ick.add_groups({0: (members, None)})
        n += per_tick
        pause = start + n / rate - time.monotonic()
        if pause > 0:
            stop.wait(pause)


def run(url: str, kind: str, args: argparse.Namespace, span: float, seq: list[int]) -> Run:
    """One side: ``kind`` in none, lane, as_live; ``span``: seconds live producers run at
    least (the backfill's ideal drain time)."""
    seq[0] += 1
    name = f"bf{seq[0]}"
    client = connect(url)
    ick = ShardedIck(client, name, 1)
    if kind != "none":
        members = [f"re:{i}" for i in range(args.size)]
        now = float(client.time()[0])
        for i in range(0, args.size, 10_000):
            part = members[i : i + 10_000]
            ick.add_pairs(part, [now] * len(part), lane="backfill" if kind == "lane" else "live")
    added: dict[str, float] = {}
    stop = threading.Event()
    producer = threading.Thread(target=produce, args=(client, name, args.live_rate, stop, added))
    options = {
        "redis.url": url,
        "ick": name,
        "maxMembersPerTrigger": str(args.max_per_trigger),
        "backfillShare": str(args.share),
    }
    reader = stream_reader(options, STREAM_SCHEMA)
    out = Run()
    left = args.size if kind != "none" else 0
    start, done = reader.initialOffset(), None  # leases taken before the clock starts
    begin = next_trigger = time.monotonic()
    producer.start()
    while True:
        pause = next_trigger - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        batch_start = time.monotonic()
        next_trigger = batch_start + args.trigger
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if done is not None:
            reader.commit(done)
        if end != start:
            rows = [
                (r["member"], r["score"])
                for p in reader.partitions(start, end)
                for b in reader.read(p)
                for r in b.select(["member", "score"]).to_pylist()
            ]
            cost = args.batch_floor + len(rows) / args.sink_rate
            time.sleep(max(0.0, cost - (time.monotonic() - batch_start)))
            committed = time.monotonic()
            for member, _score in rows:
                if member.startswith("live:"):
                    out.waits.append(committed - added[member])
                else:
                    left -= 1
            if left == 0 and kind != "none" and out.finished is None:
                out.finished = committed - begin
            done, start = end, end
        elapsed = time.monotonic() - begin
        if not stop.is_set() and elapsed >= span and (kind == "none" or out.finished is not None):
            stop.set()  # producers stop; what they added is still delivered and counted
            producer.join()
        if stop.is_set() and len(out.waits) == len(added):
            break
    if done is not None:
        reader.commit(done)
    reader.stop()
    out.seconds = time.monotonic() - begin
    ick.delete()
    client.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000, help="backfill members")
    parser.add_argument("--sink-rate", type=int, default=5_000, help="members/s the sink indexes")
    parser.add_argument("--live-rate", type=int, default=1_000, help="live members added a second")
    parser.add_argument("--share", type=float, default=0.1, help="option backfillShare")
    parser.add_argument("--max-per-trigger", type=int, default=5_000)
    parser.add_argument("--trigger", type=float, default=1.0, help="processingTime, seconds")
    parser.add_argument(
        "--batch-floor",
        type=float,
        default=0.0,
        help="seconds a batch with rows costs at least besides the sink (Spark's own per "
        "trigger, about 0.2 at rest: docs/sizing.md)",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    spare = args.sink_rate - args.live_rate
    ideal = args.size / spare  # what the sink's spare capacity allows
    report = Report("backfill", params={k: v for k, v in vars(args).items()})
    with redis_server() as server:
        cpus = layout(server.process.pid if server.process else None, args.own_core)
        seq = [0]
        runs: dict[str, list[Run]] = {"none": [], "lane": [], "as_live": []}

        def side(kind: str) -> Any:
            def measure() -> float:
                result = run(server.url, kind, args, ideal, seq)
                runs[kind].append(result)
                p99 = percentile(result.waits, 0.99)
                print(
                    f"    {kind}: live p99 {p99:.3f} s over {len(result.waits)}, backfill "
                    f"finished {result.finished} s, ran {result.seconds:.1f} s",
                    flush=True,
                )
                return p99

            return measure

        rounds = run_rounds("live p99", {k: side(k) for k in runs}, args.rounds, cpus)
    p99 = {k: rounds.side(k) for k in runs}
    report.add("live p99, no backfill", p99["none"].median, "s")
    report.pair(
        "live p99, backfill lane",
        p99["lane"].median,
        "s",
        "live p99, no backfill",
        rounds,
        rounds.ratio("lane", "none"),
        maximum=1.5,
    )
    report.pair(
        "live p99, backfill written live",
        p99["as_live"].median,
        "s",
        "live p99, no backfill",
        rounds,
        rounds.ratio("as_live", "none"),
    )
    report.add("backfill drain at the spare capacity", ideal, "s")
    finish = [r.finished or float("nan") for r in runs["lane"]]
    lane_finish = sorted(finish)[len(finish) // 2]
    report.compare(
        "backfill finish, lane",
        lane_finish,
        "s",
        "backfill drain at the spare capacity",
        maximum=1.2,
    )
    drained = sorted(r.finished or float("nan") for r in runs["as_live"])[len(runs["as_live"]) // 2]
    report.compare(
        "backfill finish, written live", drained, "s", "backfill drain at the spare capacity"
    )
    report.params["lane finish per round"] = finish
    report.params["as_live finish per round"] = [r.finished for r in runs["as_live"]]
    report.show()
    return 0


if __name__ == "__main__":
    sys.exit(main())
