"""The consumer: a child process (its own process group) streaming the Ick (and the
dehydrator) into recording sinks, and the hooks through which the nemesis kills its
processes from inside."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import redis

from nemesis import poison
from nemesis.records import write_atomically
from nemesis.settings import DEHYDRATOR, ICK
from pyspark_ick.spark import retry_later
from pyspark_ick.testing import spark_session

TESTS = Path(__file__).resolve().parents[1]  # on the PYTHONPATH of the Spark processes
HOOK = "nemesis.consumer:worker_hook"
ARM_ENV = "NEMESIS_WORKER_ARM"
WAITS = ("redis.waitReplicas", "redis.waitTimeout")  # --sentinel, --cluster: every query's

RAISED = re.compile(r"[A-Za-z_]\w*(\.\w+)+: ")
"""A raised exception's line of a traceback (``pyspark_ick.errors.LeaseLost: ...``)."""


def worker_hook(point: str) -> None:
    """PYSPARK_ICK_HOOK of the consumer's Spark processes: kill -9 this process at
    ``during_read`` when the nemesis armed it (the first process to remove the arm file
    dies; the others go on)."""
    path = os.environ.get(ARM_ENV)
    if point != "during_read" or not path:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def die_if_armed(arm: Path) -> None:
    """In the consumer's foreachBatch, after the batch was recorded: when the nemesis
    armed ``arm`` with a pid (the driver's own, or its JVM's), kill -9 it here."""
    try:
        target = int(arm.read_text())
        os.unlink(arm)  # the one who removes it acts; a nemesis that gave up removed it
    except (OSError, ValueError):
        return
    os.kill(target, signal.SIGKILL)


def child_main(cfg: dict[str, Any]) -> int:
    """The consumer: stream query (or two) into the recording sink until the stop file
    appears; a failed query restarts in this JVM (at most 5 times without a batch in
    between), anything else ends the process (the supervisor restarts it)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p
    )
    os.environ["PYSPARK_ICK_HOOK"] = HOOK
    os.environ[ARM_ENV] = cfg["arm_file"]
    spark = spark_session(
        "nemesis-consumer", **{"spark.master": "local[2,4]", "spark.sql.shuffle.partitions": "1"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    record = redis.Redis(port=cfg["record_port"])
    common = {
        "redis.url": cfg["url"],
        "shards": cfg["shards"],
        "redis.timeout": "5",
        "redis.retryTimeout": cfg["retry_timeout"],
        "leaseTimeout": "20s",
    }
    if cfg["consumer_id"]:
        common["consumerId"] = cfg["consumer_id"]
    if cfg.get("wait_replicas"):  # readers and the sinks' writes: on a replica, or failed
        waits = (cfg["wait_replicas"], f"{cfg['wait_timeout']:g}s")  # a bare number is ms
        common.update(zip(WAITS, waits, strict=True))
    writes = {k: v for k, v in common.items() if k not in ("leaseTimeout", "consumerId")}
    ick_options = {"ick": ICK, "maxMembersPerTrigger": cfg["max_per_trigger"]}
    if cfg["poison"]:
        ick_options.update(
            maxAttempts=cfg["max_attempts"],
            retryBackoff=cfg["retry_backoff"],
            retryBackoffMax=cfg["retry_backoff_max"],
        )
    progress = [0]

    def ick_sink(df: Any, batch_id: int) -> None:
        start = time.monotonic()
        collected = df.collect()
        rows = sorted([r.member, r.score, r.shard, r.reservation] for r in collected)
        failed = poison.failures(cfg["seed"], cfg["poison"], collected) if cfg["poison"] else []
        handed = retry_later(failed, {**common, **ick_options}) if failed else [0, 0, 0]
        record.rpush(
            "deliveries",
            json.dumps(
                {
                    "batch": batch_id,
                    "rows": rows,
                    "start": start,
                    "end": time.monotonic(),
                    "wall": time.time(),
                    "pid": os.getpid(),
                    "failed": sorted(r.member for r, _ in failed),
                    "handed": handed,
                }
            ),
        )
        progress[0] += 1
        die_if_armed(Path(cfg["sink_arm"]))

    def dh_sink(df: Any, batch_id: int) -> None:
        start = time.monotonic()
        rows = df.collect()
        if rows:  # rehydrate: each released element becomes a member of the Ick
            write = (
                df.sparkSession.createDataFrame(
                    [(r.element, r.due.timestamp()) for r in rows], "member string, score double"
                )
                .write.format("ick")
                .mode("append")
                .option("ick", ICK)
                .options(**writes)  # --sentinel, --cluster: on a replica, or the batch fails
            )
            write.save()
        record.rpush(
            "dh_deliveries",
            json.dumps(
                {
                    "batch": batch_id,
                    "rows": sorted([r.id, r.element, r.shard] for r in rows),
                    "start": start,
                    "end": time.monotonic(),
                }
            ),
        )
        progress[0] += 1

    def start() -> list[Any]:
        streams = [("ick", ick_options, ick_sink, "ick")]
        if cfg["dehydrator"]:
            streams.append(("dehydrator", {"dehydrator": DEHYDRATOR}, dh_sink, "dh"))
        queries = []
        for fmt, options, sink, name in streams:
            reader = spark.readStream.format(fmt)
            for key, value in {**common, **options}.items():
                reader = reader.option(key, value)
            queries.append(
                reader.load()
                .writeStream.foreachBatch(sink)
                .trigger(processingTime=cfg["trigger"])
                .option("checkpointLocation", f"{cfg['checkpoint']}-{name}")
                .start()
            )
        if cfg["writer"] and not writer_stop.exists():
            queries.append(start_writer(spark, cfg, writes))
        elif cfg["writer"]:
            event("writer_stopped")
        return queries

    recorded: set[int] = set()  # writer batches recorded (committed: in its progress)

    def record_writes(queries: list[Any]) -> None:
        for q in queries:
            if q.name == WRITER:
                for p in q.recentProgress:
                    record_write(record, p, recorded)

    def event(kind: str, **more: Any) -> None:
        record.rpush(
            "events",
            json.dumps(
                {
                    "kind": kind,
                    "pid": os.getpid(),
                    "at": time.monotonic(),
                    "wall": time.time(),
                    **more,
                }
            ),
        )

    stop_file, beat = Path(cfg["stop_file"]), Path(cfg["heartbeat"])
    writer_stop = Path(cfg["stop_file"] + "-writer")  # the soak's drain: the writer first
    failures = 0
    while True:
        queries = start()
        event("started")
        seen = progress[0]
        while True:
            write_atomically(beat, str(time.monotonic()))
            if progress[0] != seen:
                failures, seen = 0, progress[0]
            record_writes(queries)
            writer = [q for q in queries if q.name == WRITER]
            if writer and writer_stop.exists():
                writer[0].stop()
                record_writes(writer)
                queries.remove(writer[0])
                event("writer_stopped")
            if stop_file.exists():
                for q in queries:
                    q.stop()
                record_writes(queries)
                event("stopped")
                return 0
            dead = [q for q in queries if not q.isActive]
            if dead:
                break
            time.sleep(0.25)
        record_writes(queries)
        exc = dead[0].exception()
        cause = str(exc) if exc is not None else "stopped without an exception"
        if len(cause) > 4000:  # Spark's wrapping, the errors raised (the last), and the end
            raised = [
                x
                for x in cause.splitlines()
                if RAISED.match(x) or "Error:" in x or "Exception:" in x
            ]
            cause = f"{cause[:1500]}\n...\n{chr(10).join(raised)[-2000:]}\n...\n{cause[-500:]}"
        event("query_failed", cause=cause)
        print(f"NEMESIS-QUERY-FAILED: {cause.splitlines()[0] if cause else ''}", flush=True)
        for q in queries:
            with contextlib.suppress(Exception):
                q.stop()
        failures += 1
        if failures > 5:
            print("NEMESIS-EXIT: 6 query failures in a row without a batch", flush=True)
            return 3


WRITER = "nemesis-writer"


def start_writer(spark: Any, cfg: dict[str, Any], writes: dict[str, Any]) -> Any:
    """--writer: a rate source (``writer_rate`` rows a second, one partition) into
    ``writeStream.format("ick")`` with the sinks' options ``writes``: value n becomes
    member ``w<n>`` with score n (what nemesis.fates.writer_members computes from a
    batch's offsets; --sentinel, --cluster: each write waits for a replica, so a committed
    batch is on one, as the producers' adds are)."""
    from pyspark.sql import functions as F

    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", cfg["writer_rate"])
        .option("numPartitions", 1)
        .load()
        .select(
            F.concat(F.lit("w"), F.col("value").cast("string")).alias("member"),
            F.col("value").cast("double").alias("score"),
        )
        .writeStream.format("ick")
        .queryName(WRITER)
        .option("ick", ICK)
        .options(**writes)
        .option("checkpointLocation", f"{cfg['checkpoint']}-w")
        .trigger(processingTime="5 seconds")
        .start()
    )


def record_write(record: Any, progress: Any, recorded: set[int]) -> None:
    """Record a writer batch once its progress says it was committed (progress comes after
    the commit): batch id, the rate source's offsets (seconds), rows, when it was seen."""
    batch, rows = int(progress["batchId"]), int(progress["numInputRows"])
    if batch in recorded or rows == 0:
        return
    source = progress["sources"][0]
    start = source["startOffset"]
    record.rpush(
        "writes",
        json.dumps(
            {
                "batch": batch,
                "start": None if start is None else int(start),
                "end": int(source["endOffset"]),
                "rows": rows,
                "at": time.monotonic(),
                "pid": os.getpid(),
            }
        ),
    )
    recorded.add(batch)
