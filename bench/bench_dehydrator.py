"""Dehydrator benchmark: the client, the Spark sink and source, against a raw-Redis
baseline of the same run and against ReDe's published figures.

(1) Client push: N elements parked with ``Dehydrator.park`` (pipelined dh_push calls of
    ``bounds.DEHYDRATOR_CHUNK``) against the raw baseline, pipelined ``ZADD`` + ``HSET`` of the
    same elements in chunks of 1,000 (alternated, best of ``--repeat``); ``push()`` one
    round trip per element (ReDe's PUSH: ~23,000/s) and one dh_push per element in a
    pipeline (redis-benchmark's PUSH with 50 clients: ~170,000 req/s).
(2) Client poll: ``poll()`` draining N due elements (ReDe's POLL: ~305,000/s) against a
    raw baseline (ZRANGE BYSCORE + HMGET + ZREMRANGEBYRANK + HDEL per 1,000, pipelined) of
    the same due times, with 1 and with 10,000 distinct TTLs: the store must not slow
    down as TTLs grow.
(3) Spark sink: ``df.write.format("dehydrator")`` of 1,000,000 rows (local[2]); target
    >= 230,000 elements/s (10x ReDe PUSH), also shown as a ratio to the raw baseline.
(4) Spark source: release throughput of ``readStream.format("dehydrator")`` draining due
    elements (Trigger.AvailableNow), and release lateness after the due time (Redis time
    at foreachBatch minus the due time) with elements coming due over a few seconds;
    target p99 <= 1 s.

Run: ``python bench/bench_dehydrator.py`` (``--quick``: a smaller smoke run;
``--sink-only``: only (3)). Starts its
own redis-server via pyspark_ick.testing; never touches a running server.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Report, percentile, timed

from pyspark_ick import Dehydrator, bounds, connect
from pyspark_ick.testing import redis_server, spark_session

RAW_CHUNK = 1000
REDE = {"PUSH": 23_000, "POLL": 305_000, "redis-benchmark PUSH": 170_000}
HOUR = 3_600_000


def redis_ms(client: Any) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def raw_push(
    client: Any, key: str, ids: list[str], elements: list[str], due: int | list[int]
) -> None:
    """The baseline: ZADD due + HSET elements per 1,000, one pipeline; ``due``: one due
    time for all, or one per element."""
    dues = due if isinstance(due, list) else [due] * len(ids)
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(ids), RAW_CHUNK):
        zargs: list[Any] = []
        hargs: list[Any] = []
        for id, element, at in zip(
            ids[start : start + RAW_CHUNK],
            elements[start : start + RAW_CHUNK],
            dues[start : start + RAW_CHUNK],
            strict=True,
        ):
            zargs += (at, id)
            hargs += (id, element)
        pipe.execute_command("ZADD", f"{key}:due", *zargs)
        pipe.execute_command("HSET", f"{key}:elements", *hargs)
    pipe.execute()


def raw_poll(client: Any, key: str) -> int:
    """The baseline: what poll does, sent by the client: the due ids, ITEMS_PER_CALL per
    round trip, their elements, and both removed (the ids are the lowest ranks)."""
    taken = 0
    while True:
        ids = client.zrange(
            f"{key}:due",
            "-inf",
            redis_ms(client),
            byscore=True,
            offset=0,
            num=bounds.ITEMS_PER_CALL,
        )
        if not ids:
            return taken
        pipe = client.pipeline(transaction=False)
        pipe.hmget(f"{key}:elements", ids)
        pipe.zremrangebyrank(f"{key}:due", 0, len(ids) - 1)
        pipe.hdel(f"{key}:elements", *ids)
        pipe.execute()
        taken += len(ids)


def best_alternating(runs: dict[str, Any], repeat: int, reset: Any) -> dict[str, float]:
    best = dict.fromkeys(runs, float("inf"))
    for rep in range(repeat):
        for name, run in runs.items():
            reset()
            best[name] = min(best[name], timed(lambda r=run, k=f"b{rep}{name}": r(k)))
    return best


def bench_client(report: Report, client: Any, n: int, singles: int, repeat: int) -> None:
    ids = [f"id:{i}" for i in range(n)]
    elements = [f"doc:{i}" for i in range(n)]
    many = [HOUR + i % 10_000 for i in range(n)]  # 10,000 distinct TTLs
    best = best_alternating(
        {
            "raw": lambda key: raw_push(client, key, ids, elements, redis_ms(client) + HOUR),
            "park": lambda key: Dehydrator(client, key).park(ids, elements, [HOUR] * n),
            "park_many": lambda key: Dehydrator(client, key).park(ids, elements, many),
        },
        repeat,
        client.flushall,
    )
    raw = "raw pipelined ZADD + HSET"
    report.add(raw, n / best["raw"], "elements/s")
    report.compare(
        f"Dehydrator.park (chunk {bounds.DEHYDRATOR_CHUNK}), pipelined",
        n / best["park"],
        "elements/s",
        raw,
    )
    report.compare(
        "Dehydrator.park, 10,000 distinct TTLs", n / best["park_many"], "elements/s", raw
    )
    report.params["push_many_ttls_vs_one"] = best["park"] / best["park_many"]

    for name, value in REDE.items():
        report.add(f"ReDe {name} (published)", value, "/s")
    client.flushall()
    d = Dehydrator(client, "singles")
    seconds = timed(lambda: [d.push(ids[i], elements[i], HOUR) for i in range(singles)])
    report.compare(
        "Dehydrator.push, one round trip each", singles / seconds, "push/s", "ReDe PUSH (published)"
    )
    client.flushall()
    seconds = timed(lambda: Dehydrator(client, "singles").park(ids, elements, [HOUR] * n, chunk=1))
    report.compare(
        "dh_push per element, pipelined",
        n / seconds,
        "push/s",
        "ReDe redis-benchmark PUSH (published)",
    )

    # poll: every element already due; "TTLs" are distinct due times in the past, the same
    # for the raw baseline (distinct due times cost Redis too: raw 0.77-0.86x of 1 TTL)
    for ttls in (1, 10_000):
        label = f"{ttls:,} TTL{'s' * (ttls > 1)}"
        raw_best = poll_best = float("inf")
        for rep in range(repeat):
            client.flushall()
            now = redis_ms(client)
            dues = [now - 1 - i % ttls for i in range(n)]
            raw_push(client, f"r{rep}", ids, elements, dues)
            raw_best = min(raw_best, timed(lambda r=rep: raw_poll(client, f"r{r}")))
            client.flushall()
            d = Dehydrator(client, f"p{rep}")
            d.park(ids, elements, dues, at=True)
            got: list[Any] = []
            poll_best = min(poll_best, timed(lambda d=d, g=got: g.extend(d.poll())))
            assert len(got) == n
        report.add(f"raw poll ({label})", n / raw_best, "elements/s")
        report.compare(
            f"Dehydrator.poll ({label})", n / poll_best, "elements/s", f"raw poll ({label})"
        )
        if ttls == 1:
            report.compare(
                "Dehydrator.poll vs ReDe POLL", n / poll_best, "elements/s", "ReDe POLL (published)"
            )
            report.add("poll at 1 TTL", n / poll_best, "elements/s")
        else:
            report.compare(
                "poll at 10,000 TTLs vs 1 TTL",
                n / poll_best,
                "elements/s",
                "poll at 1 TTL",
                minimum=0.8,
            )
    client.flushall()


def bench_sink(report: Report, spark: Any, client: Any, url: str, rows: int) -> None:
    """The sink with the raw baseline's ids in a column (the same work), and with ids
    generated from the elements (content_id: a hash per row on the tasks)."""
    given = (
        spark.range(rows)
        .selectExpr("concat('id:', id) AS id", "concat('doc:', id) AS element")
        .cache()
    )
    given.count()
    generated = given.select("element")
    ids = [f"id:{i}" for i in range(rows)]
    elements = [f"doc:{i}" for i in range(rows)]
    best = {"raw": float("inf"), "given": float("inf"), "generated": float("inf")}
    for rep in range(2):
        client.flushall()
        best["raw"] = min(
            best["raw"],
            timed(lambda: raw_push(client, "raw", ids, elements, redis_ms(client) + HOUR)),
        )
        for kind, df in (("given", given), ("generated", generated)):
            client.flushall()
            best[kind] = min(
                best[kind],
                timed(
                    lambda d=df, name=f"{kind}{rep}": (
                        d.write.format("dehydrator")
                        .option("redis.url", url)
                        .option("dehydrator", name)
                        .option("delay", "1h")
                        .mode("append")
                        .save()
                    )
                ),
            )
            assert Dehydrator(client, f"{kind}{rep}").size() == rows
    client.flushall()
    given.unpersist()
    base = "raw pipelined ZADD + HSET, 1 client"
    report.add(base, rows / best["raw"], "elements/s")
    report.compare(
        f"Spark sink, {rows:,} rows with ids, local[2]",
        rows / best["given"],
        "elements/s",
        base,
        minimum=0.9,
    )
    report.compare(
        f"Spark sink, {rows:,} rows, ids generated", rows / best["generated"], "elements/s", base
    )
    report.add("target: 10x ReDe PUSH", 230_000, "elements/s")
    report.compare(
        "Spark sink (ids generated) vs target",
        rows / best["generated"],
        "elements/s",
        "target: 10x ReDe PUSH",
        minimum=1.0,
    )


def bench_source(
    report: Report, spark: Any, client: Any, url: str, rows: int, spread_ms: int
) -> None:
    d = Dehydrator(client, "released", 2)
    n = 0
    for start in range(0, rows, 100_000):
        chunk = range(start, min(rows, start + 100_000))
        d.park([f"id:{i}" for i in chunk], [f"doc:{i}" for i in chunk], [0] * len(chunk))
        n += len(chunk)
    with tempfile.TemporaryDirectory() as ckpt:
        query = (
            spark.readStream.format("dehydrator")
            .option("redis.url", url)
            .option("dehydrator", "released")
            .option("shards", 2)
            .option("maxElementsPerTrigger", 100_000)
            .load()
            .writeStream.format("noop")
            .trigger(availableNow=True)
            .option("checkpointLocation", ckpt)
            .start()
        )
        seconds = timed(lambda: query.awaitTermination(600))
        batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert d.size() == 0
    report.add(
        f"Spark source release, {n:,} due, AvailableNow, end to end", n / seconds, "elements/s"
    )
    busy = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    report.add(
        f"Spark source release, per batch time ({len(batches)} batches)",
        sum(p["numInputRows"] for p in batches) / busy,
        "elements/s",
    )

    lateness: list[float] = []
    lock = threading.Lock()

    def sink(df: Any, _batch: int) -> None:
        dues = [r.due.timestamp() * 1000 for r in df.select("due").collect()]
        now = redis_ms(client)
        with lock:
            lateness.extend(now - due for due in dues)

    d = Dehydrator(client, "lateness", 2)
    count = 2000
    with tempfile.TemporaryDirectory() as ckpt:
        query = (
            spark.readStream.format("dehydrator")
            .option("redis.url", url)
            .option("dehydrator", "lateness")
            .option("shards", 2)
            .load()
            .writeStream.foreachBatch(sink)
            .trigger(processingTime="0 seconds")
            .option("checkpointLocation", ckpt)
            .start()
        )
        deadline = time.monotonic() + 120
        while query.lastProgress is None and time.monotonic() < deadline:
            time.sleep(0.1)
        d.park(
            [f"l{i}" for i in range(count)],
            [f"doc:{i}" for i in range(count)],
            [1000 + i * spread_ms // count for i in range(count)],
        )
        deadline = time.monotonic() + spread_ms / 1000 + 120
        while len(lateness) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        query.stop()
    report.add("release lateness p50", percentile(lateness, 0.5), "ms")
    report.add("target: lateness p99", 1000, "ms")
    report.compare(
        "release lateness p99",
        percentile(lateness, 0.99),
        "ms",
        "target: lateness p99",
        maximum=1.0,
    )
    report.params["lateness_samples"] = len(lateness)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--repeat", type=int, default=None, help="best of this many")
    parser.add_argument("--sink-only", action="store_true", help="only (3), the Spark sink")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else 200_000
    singles = 2_000 if args.quick else 20_000
    sink_rows = 100_000 if args.quick else 1_000_000
    source_rows = 50_000 if args.quick else 500_000
    spread_ms = 3_000 if args.quick else 10_000
    repeat = args.repeat or (2 if args.quick else 3)
    name = "dehydrator_quick" if args.quick else "dehydrator"
    report = Report(
        name + "_sink" if args.sink_only else name,
        params={
            "n": n,
            "singles": singles,
            "sink_rows": sink_rows,
            "source_rows": source_rows,
            "spread_ms": spread_ms,
            "repeat": repeat,
            "chunk": bounds.DEHYDRATOR_CHUNK,
        },
    )
    with redis_server() as server:
        client = connect(server.url)
        if not args.sink_only:
            bench_client(report, client, n, singles, repeat)
        spark = spark_session("bench-dehydrator")
        spark.sparkContext.setLogLevel("ERROR")
        try:
            bench_sink(report, spark, client, server.url, sink_rows)
            if not args.sink_only:
                bench_source(report, spark, client, server.url, source_rows, spread_ms)
        finally:
            spark.stop()
        client.close()
    report.show()
    return 0 if all(r.ok is not False for r in report.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
