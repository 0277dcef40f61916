"""Writer benchmark: df.write.format("ick") against raw pipelined ZADD LT, same run.

N rows ``(member string, score double)`` (``spark.range`` + expressions, cached and counted
before timing) written by ``df.write.format("ick")`` on local[2], against the raw baseline:
this one Python process pipelining ``ZADD key LT`` commands of 1,000 members each (redis-py
with hiredis) into the same Redis. Also the per-row Python writer (a ``DataSourceWriter``
fed Spark Rows, registered as format "ick_rows" below) to justify the Arrow path, and with
``--chunks`` the Arrow writer per ``chunkSize`` (how its default was chosen). Runs are
alternated in ``--rounds`` rounds (bench/pairs.py), each into a fresh key; each ratio is
the median of the rounds' with its spread. Target: Arrow writer >= 0.9x raw.

Run: ``python bench/bench_writer.py [--rows N] [--rounds 5] [--own-core] [--chunks 250,1000,4000]``.
Starts its own redis-server and SparkSession; never touches a running server.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pairs
from bench_core import raw_zadd
from common import Report, timed
from pairs import Rounds, run_rounds
from pyspark.sql.datasource import DataSource, DataSourceWriter, WriterCommitMessage

from pyspark_ick import ShardedIck, connect
from pyspark_ick.bounds import ICK_CHUNK as CHUNK_SIZE
from pyspark_ick.testing import redis_server, spark_session

ROWS_BATCH = 10_000  # rows the per-row writer collects before one add


class RowWriter(DataSourceWriter):
    """The per-row alternative: Spark Rows as Python objects, added 10,000 at a time."""

    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        ick = ShardedIck(connect(self.url), self.name)
        members: list[str] = []
        scores: list[float] = []
        for row in iterator:
            members.append(str(row.member))
            scores.append(float(row.score))
            if len(members) == ROWS_BATCH:
                ick.add_pairs(members, scores)
                members, scores = [], []
        ick.add_pairs(members, scores)
        return WriterCommitMessage()


class RowSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "ick_rows"

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return RowWriter(self.options["redis.url"], self.options["ick"])


def alternate(
    client: Any, runs: dict[str, Callable[[str], None]], rounds: int, cpus: dict[str, Any]
) -> Rounds:
    """Seconds of each run per round, alternating them (pairs.py); every call gets a fresh
    key."""
    count = iter(range(1_000_000))

    def side(run: Callable[[str], None], name: str) -> Callable[[], float]:
        def measure() -> float:
            key = f"bench:{name}:{next(count)}"
            seconds = timed(lambda: run(key))
            client.flushall()
            return seconds

        return measure

    return run_rounds("writer", {name: side(run, name) for name, run in runs.items()}, rounds, cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    pairs.add_arguments(parser)
    parser.add_argument("--chunks", default="", help="also time the writer per chunkSize")
    parser.add_argument(
        "--no-rows-writer", action="store_true", help="skip the (slow) per-row writer"
    )
    args = parser.parse_args(argv)
    n = args.rows
    chunks = [int(c) for c in args.chunks.split(",") if c]

    loadavg_start = list(os.getloadavg())
    with redis_server() as server:
        cpus = pairs.layout(server.process.pid if server.process else None, args.own_core)
        client = connect(server.url)
        spark = spark_session("bench-writer")
        spark.dataSource.register(RowSource)
        df = (
            spark.range(n)
            .selectExpr("concat('doc:', id) AS member", "CAST(id % 9973 AS DOUBLE) AS score")
            .cache()
        )
        assert df.count() == n
        mapping = {f"doc:{i}": float(i % 9973) for i in range(n)}

        def spark_write(fmt: str, key: str, chunk: int = CHUNK_SIZE) -> None:
            (
                df.write.format(fmt)
                .option("redis.url", server.url)
                .option("ick", key)
                .option("chunkSize", chunk)
                .mode("append")
                .save()
            )
            assert client.zcard(ShardedIck(client, key).shard(0).keys.pset) == n

        runs: dict[str, Callable[[str], None]] = {
            "raw": lambda key: raw_zadd(client, key, mapping),
            "ick": lambda key: spark_write("ick", key),
        }
        if not args.no_rows_writer:
            runs["ick_rows"] = lambda key: spark_write("ick_rows", key)
        for size in chunks:
            runs[f"ick.{size}"] = lambda key, s=size: spark_write("ick", key, s)
        spark_write("ick", "bench:warmup")  # JIT, Python workers, script loading
        client.flushall()
        done = alternate(client, runs, args.rounds, cpus)
        spark.stop()

    report = Report(
        "writer",
        params={
            "rows": n,
            "rounds": args.rounds,
            "cpus": cpus,
            "loadavg_start": loadavg_start,
            "loadavg_end": list(os.getloadavg()),
            "master": "local[2]",
            "chunkSize": CHUNK_SIZE,
            "raw_chunk": 1000,
        },
    )
    raw = "raw pipelined ZADD LT (1 process)"
    report.add(raw, n / done.side("raw").median, "members/s")

    def pair(name: str, key: str, minimum: float | None = None) -> None:
        per_s = n / done.side(key).median
        report.pair(name, per_s, "members/s", raw, done, done.ratio("raw", key), minimum=minimum)

    pair(f'format("ick") Arrow writer, chunkSize={CHUNK_SIZE}', "ick", minimum=0.9)
    if "ick_rows" in runs:
        pair("per-row DataSourceWriter", "ick_rows")
    for size in chunks:
        pair(f'format("ick") chunkSize={size}', f"ick.{size}")
    report.show()
    return 0


if __name__ == "__main__":
    sys.exit(main())
