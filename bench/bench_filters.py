"""Filtered snapshot reads: what Redis sends and spends when Spark pushes the filters down.

N members (500,000; ``--members``; --quick 50,000) in 8 shards, 5% of them reserved
(ReservationLog, so the cset and open manifests are not empty). Each read is
``spark.read.format("ick")...load().where(...).count()`` with
``spark.sql.python.filterPushdown.enabled=true``: all, one member, ``member IN`` 10, one
shard, two shards, a score range of 1% of the members, ``state = 'reserved'`` (with the
``reservation`` column, so the open manifests are read), and once the one-member read
with pushdown off (what every filtered read cost before). For each: wall time (median of
``--repeat``), rows, bytes Redis sent (INFO stats total_net_output_bytes; the INFO reply
itself taken off) and Redis CPU (INFO cpu), both summed over the repeats and divided by
them; bytes as a share of the full read's, and against a raw-Redis baseline of the same
run: one redis-py client sending the least a hand-written reader would (ZMSCORE in the
member's shard, ZSCAN of the shards read, ZRANGE BYSCORE pages, LRANGE of the manifests).
Targets (issue 34): one member <= 1% of the full read's bytes, one shard of 8 <= 15%, the
score range <= 1.5x its share of the rows.

    python bench/bench_filters.py [--members N] [--quick] [--repeat R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import server_cpu
from common import Report

from pyspark_ick import ShardedIck, connect, shard_of
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.spark.ick_reader import SNAPSHOT_SCHEMA
from pyspark_ick.testing import redis_server, spark_session

SHARDS = 8
NAME = "filtered"
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def load(client: Any, n: int) -> None:
    """N members ``doc:i`` with score i, 5% of them (the lowest) reserved."""
    ick = ShardedIck(client, NAME, SHARDS)
    ick.delete()
    step = 50_000
    for start in range(0, n, step):
        members = [f"doc:{i}" for i in range(start, min(n, start + step))]
        ick.add_pairs(members, [float(i) for i in range(start, start + len(members))])
    for key in shard_names(NAME, SHARDS):
        log = ReservationLog(client, key)
        log.reserve(n // 20 // SHARDS, 0, log.lease.acquire("bench", 600_000))


class Meter:
    """Bytes Redis sent and CPU it spent during a call, the INFO replies that measure them
    taken off."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.overhead = 0
        self.overhead = self.measure(lambda: None)[2]

    def sent(self) -> int:
        return int(self.client.info("stats")["total_net_output_bytes"])

    def measure(self, fn: Callable[[], Any]) -> tuple[Any, float, int, float]:
        """(what fn returned, wall s, bytes sent, Redis CPU s)"""
        sent, cpu = self.sent(), server_cpu(self.client)
        start = time.perf_counter()
        got = fn()
        wall = time.perf_counter() - start
        cpu = server_cpu(self.client) - cpu
        return got, wall, self.sent() - sent - self.overhead, cpu


def picked(n: int) -> list[str]:
    """The members looked up: queued ones (the reserved are the lowest 5%), the first alone."""
    return [f"doc:{n * 5 // 8 + k * (n // 40)}" for k in range(10)]


def score_range(n: int) -> tuple[int, int]:
    """The scores of 1% of the members, the upper bound excluded."""
    return n // 2, n // 2 + n // 100


def reads(n: int) -> dict[str, str]:
    """The filter of each read ("": none)."""
    low, high = score_range(n)
    return {
        "all": "",
        "member = one": f"member = '{picked(n)[0]}'",
        "member IN 10": f"member IN ({', '.join(repr(m) for m in picked(n))})",
        "shard = 3": "shard = 3",
        "shard IN (1, 2)": "shard IN (1, 2)",
        "score range 1%": f"score >= {low} AND score < {high}",
        "state = reserved": "state = 'reserved'",
    }


def raw_reads(client: Any, n: int) -> dict[str, Callable[[], Any]]:
    """The least a hand-written redis-py reader sends for each read."""
    keys = [IckKeys(k) for k in shard_names(NAME, SHARDS)]

    def scan(shards: list[int], sets: tuple[str, ...] = ("pset", "cset")) -> None:
        for i in shards:
            for part in sets:
                for _ in client.zscan_iter(getattr(keys[i], part), count=1000):
                    pass

    def manifests() -> None:
        for i, k in enumerate(keys):
            reserved, committed = ReservationLog(client, shard_names(NAME, SHARDS)[i]).counters()
            for r in range(committed + 1, reserved + 1):
                client.lrange(k.reservation(r), 0, -1)

    def lookup(members: list[str]) -> None:
        for member in members:
            k = keys[shard_of(member, SHARDS)]
            client.zmscore(k.pset, [member])
            client.zmscore(k.cset, [member])

    def scores() -> None:
        low, high = score_range(n)
        for k in keys:
            for part in (k.pset, k.cset):
                offset = 0
                while page := client.zrange(
                    part, low, f"({high}", byscore=True, offset=offset, num=1000, withscores=True
                ):
                    offset += len(page)

    return {
        "all": lambda: (scan(list(range(SHARDS))), manifests()),
        "member = one": lambda: lookup(picked(n)[:1]),
        "member IN 10": lambda: lookup(picked(n)),
        "shard = 3": lambda: scan([3]),
        "shard IN (1, 2)": lambda: scan([1, 2]),
        "score range 1%": scores,
        "state = reserved": lambda: (scan(list(range(SHARDS)), ("cset",)), manifests()),
    }


def bench(report: Report, spark: Any, url: str, n: int, repeat: int) -> dict[str, Any]:
    client = connect(url)
    load(client, n)
    meter = Meter(client)
    reader = (
        spark.read.format("ick")
        .option("redis.url", url)
        .option("ick", NAME)
        .option("shards", SHARDS)
        .schema(SNAPSHOT_SCHEMA)
    )

    def spark_read(where: str, pushdown: bool) -> Callable[[], int]:
        def run() -> int:
            spark.conf.set(PUSHDOWN, str(pushdown).lower())
            df = reader.load()
            return int((df.where(where) if where else df).count())

        return run

    runs = {name: spark_read(where, True) for name, where in reads(n).items()}
    runs["member = one, pushdown off"] = spark_read(reads(n)["member = one"], False)
    raw = raw_reads(client, n)
    for run in runs.values():  # warm-up: Python workers, scripts loaded
        run()
    got: dict[str, dict[str, Any]] = {}
    for name in runs:
        walls, sent, cpus = [], 0, 0.0
        for _ in range(repeat):
            rows, wall, out, cpu = meter.measure(runs[name])
            walls.append(wall)
            sent += out
            cpus += cpu
        got[name] = {
            "rows": rows,
            "wall": statistics.median(walls),
            "bytes": sent / repeat,
            "cpu": cpus / repeat,
        }
        if name in raw:
            got[name]["raw bytes"] = meter.measure(raw[name])[2]
    full = got["all"]
    targets = {"member = one": 0.01, "shard = 3": 0.15}
    targets["score range 1%"] = 1.5 * got["score range 1%"]["rows"] / full["rows"]
    for name, g in got.items():
        report.add(f"{name}: rows", g["rows"], "rows")
        report.add(f"{name}: wall (median of {repeat})", g["wall"], "s")
        if name != "all":
            report.compare(
                f"{name}: bytes out",
                g["bytes"],
                "bytes",
                "all: bytes out",
                maximum=targets.get(name),
            )
        else:
            report.add("all: bytes out", g["bytes"], "bytes")
        report.add(f"{name}: Redis CPU", g["cpu"], "s")
        if "raw bytes" in g:
            report.add(f"{name}: raw redis-py, bytes out", g["raw bytes"], "bytes")
            report.compare(
                f"{name}: bytes out, against raw",
                g["bytes"],
                "bytes",
                f"{name}: raw redis-py, bytes out",
            )
    client.close()
    return got


def summary(got: dict[str, dict[str, Any]]) -> None:
    full = got["all"]
    print(
        f"\n{'read':<28} {'rows':>8} {'wall s':>7} {'bytes out':>11} {'% full':>8} "
        f"{'Redis CPU s':>11} {'raw bytes':>11} {'/raw':>5}"
    )
    for name, g in got.items():
        raw = g.get("raw bytes")
        print(
            f"{name:<28} {g['rows']:>8,} {g['wall']:>7.2f} {g['bytes']:>11,.0f} "
            f"{100 * g['bytes'] / full['bytes']:>7.3f}% {g['cpu']:>11.3f} "
            + (f"{raw:>11,} {g['bytes'] / raw:>5.2f}" if raw else "")
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--members", type=int, default=None, help="members in the Ick")
    parser.add_argument("--repeat", type=int, default=3, help="median of this many")
    args = parser.parse_args(argv)
    n = args.members or (50_000 if args.quick else 500_000)
    report = Report(
        "bench_filters_quick" if args.quick else "bench_filters",
        params={"members": n, "shards": SHARDS, "reserved": n // 20, "repeat": args.repeat},
    )
    with redis_server() as server:
        spark = spark_session("bench-filters")
        spark.sparkContext.setLogLevel("ERROR")
        try:
            got = bench(report, spark, server.url, n, args.repeat)
        finally:
            spark.stop()
    report.show()
    summary(got)
    return 0 if all(r.ok is not False for r in report.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
