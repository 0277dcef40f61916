"""The core of the suite on one pyspark, run by tests/test_spark_versions.py with the python
of that pyspark's venv: ``python spark_versions_job.py REDIS_URL WORKDIR``.

One Spark session (``local[2]``) runs, each against the Redis server at REDIS_URL:
a batch write of format("ick"); a stream drain of format("ick") capped per micro-batch,
killed twice and restarted from its checkpoint in the same JVM (the source's process at
after_reserve, then foreachBatch after its sink wrote batch 1), every member delivered and
the replayed batch delivering exactly the same rows; Trigger.AvailableNow over a backlog
larger than the cap; the dehydrator's streaming sink (a timestamp column) and its stream
source; a filtered snapshot read with Spark's filter pushdown off and on (the same rows;
Redis answering the filters on 4.1+). It prints one JSON line of what it saw and exits
non-zero on the first failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

URL, WORK = sys.argv[1], Path(sys.argv[2])
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "crash"))
FAULT_FILE = WORK / "fault"
os.environ.update(
    PYSPARK_ICK_FAULT_FILE=str(FAULT_FILE), PYSPARK_ICK_FAULT_COUNTER=str(WORK / "fault-count")
)
import faults  # noqa: E402 - tests/crash, found through the path above

faults.arm(os.environ)  # before the JVM starts: Spark's Python processes inherit it

import importlib.util  # noqa: E402

import pyspark  # noqa: E402
import pyspark.sql.datasource  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from pyspark_ick import Dehydrator, ShardedIck, connect  # noqa: E402

CAP, SHARDS = 40, 2
# Spark 4.2's admission control for Python sources, and 4.1's streaming Arrow writer
ADMISSION = importlib.util.find_spec("pyspark.sql.streaming.datasource") is not None
seen: dict[str, Any] = {
    "pyspark": pyspark.__version__,
    "admission_control": ADMISSION,
    "arrow_stream_writer": hasattr(pyspark.sql.datasource, "DataSourceStreamArrowWriter"),
}


def check(ok: bool, what: str) -> None:
    if not ok:
        print(json.dumps(seen), flush=True)
        raise SystemExit(f"FAILED: {what}")


def arm(point: str = "", after: int = 1, kill: str = "exit") -> None:
    """Arm (or, without a point, disarm) the fault of tests/crash/faults.py."""
    FAULT_FILE.write_text(f"{point} {after} {kill}" if point else "")
    (WORK / "fault-count").unlink(missing_ok=True)


spark = (
    SparkSession.builder.master("local[2]")
    .appName("pyspark-ick-versions")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
client = connect(URL)
ick = ShardedIck(client, "v", SHARDS)

# --- a batch write ----------------------------------------------------------------------
members = [f"m{i:03d}" for i in range(150)]
(
    spark.createDataFrame(
        [(m, float(i)) for i, m in enumerate(members)], "member string, score double"
    )
    .write.format("ick")
    .option("redis.url", URL)
    .option("ick", "v")
    .option("shards", SHARDS)
    .mode("append")
    .save()
)
check(ick.stats()["total_size"] == len(members), "the batch write added every member")

# --- a stream drain, crashed twice and restarted from its checkpoint --------------------
batches: dict[int, list[list[tuple[str, float]]]] = defaultdict(list)
deliveries: dict[int, list[set[int]]] = defaultdict(list)
attempt = {"n": 0}


def sink(df: Any, batch_id: int) -> None:
    collected = df.collect()
    rows = sorted((r.member, r.score) for r in collected)
    batches[batch_id].append(rows)
    deliveries[batch_id].append({r.deliveries for r in collected})
    if attempt["n"] == 1 and batch_id == 1 and len(batches[1]) == 1:
        raise RuntimeError("crash after the sink wrote batch 1")


def drain(checkpoint: Path, **options: Any) -> Any:
    reader = (
        spark.readStream.format("ick")
        .option("redis.url", URL)
        .option("ick", "v")
        .option("shards", SHARDS)
        .option("maxMembersPerTrigger", CAP)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    )


def until_empty(checkpoint: Path) -> str | None:
    """Run a query until it fails or has delivered everything; its error, if any."""
    query = drain(checkpoint).trigger(processingTime="0 seconds").start()
    deadline = time.monotonic() + 120
    while query.isActive and time.monotonic() < deadline:
        if ick.stats()["total_size"] == 0 and not query.status["isDataAvailable"]:
            break
        time.sleep(0.2)
    if query.isActive:
        query.stop()
    error = query.exception()
    return None if error is None else str(error).splitlines()[0][:160]


checkpoint = WORK / "drain"
arm("after_reserve", 2)  # the source's process dies having reserved batch 1, unlogged
failures = []
for n in range(3):
    attempt["n"] = n
    failures.append(until_empty(checkpoint))
    arm()
check(
    failures[0] is not None and failures[1] is not None and failures[2] is None,
    f"two crashes, then a clean run: {failures}",
)
delivered = [m for runs in batches.values() for m, _ in runs[-1]]
seen["drain"] = {
    "batches": len(batches),
    "sizes": [len(b[-1]) for b in batches.values()],
    "failures": failures,
}
check(sorted(set(delivered)) == members, "every member delivered")
check(len(delivered) == len(members), "each member once (no re-add happened)")
check(all(len(runs[-1]) <= CAP for runs in batches.values()), "batches capped")
check(
    all(run == runs[0] for runs in batches.values() for run in runs),
    "a replayed batch has exactly the same rows (I3)",
)
check(len(batches[1]) == 2, "batch 1 was replayed after the crash")
check(deliveries[1] == [{1}, {2}], f"the replay was delivery 2: {deliveries[1]}")
check(ick.stats()["total_size"] == 0, "the Ick is empty")

# --- Trigger.AvailableNow over a backlog larger than the cap, then a query after it ----
ick.add({f"n{i:03d}": float(i) for i in range(100)})
batches.clear()
attempt["n"] = 0
drain(WORK / "available").trigger(availableNow=True).start().awaitTermination(120)
got = sum(len(runs[-1]) for runs in batches.values())
check(until_empty(WORK / "available") is None, "the query after AvailableNow ran")
after = [m for runs in batches.values() for m, _ in runs[-1]]
seen["available_now"] = {"backlog": 100, "delivered": got, "then": len(after) - got}
check(
    got == (100 if ADMISSION else CAP),
    "AvailableNow: all (pyspark 4.2+), else one batch of the cap",
)
check(
    sorted(after) == [f"n{i:03d}" for i in range(100)],
    "what AvailableNow left is delivered once by the next query from its checkpoint",
)
check(ick.stats()["total_size"] == 0, "the Ick is empty")

# --- the dehydrator: streaming sink with a timestamp column, stream source -------------
now_s = int(client.time()[0])
source = WORK / "parked"
source.mkdir()
(source / "rows.json").write_text(
    "".join(json.dumps({"element": f"doc:{i}", "releaseAt": now_s - i}) + "\n" for i in range(30))
)
(
    spark.readStream.schema("element string, releaseAt long")
    .json(str(source))
    .selectExpr("element", "timestamp_seconds(releaseAt) AS releaseAt")
    .writeStream.format("dehydrator")
    .option("redis.url", URL)
    .option("dehydrator", "d")
    .option("checkpointLocation", str(WORK / "park"))
    .trigger(availableNow=True)
    .start()
    .awaitTermination(120)
)
parked = Dehydrator(client, "d")
check(parked.size() == 30, "the streaming sink parked every element")
rows: list[Any] = []
query = (
    spark.readStream.format("dehydrator")
    .option("redis.url", URL)
    .option("dehydrator", "d")
    .option("maxElementsPerTrigger", 12)
    .load()
    .writeStream.foreachBatch(lambda df, i: rows.extend(df.collect()))
    .option("checkpointLocation", str(WORK / "rehydrate"))
    .trigger(processingTime="0 seconds")
    .start()
)
deadline = time.monotonic() + 60
while len(rows) < 30 and time.monotonic() < deadline:
    time.sleep(0.2)
query.stop()
due = {r.element: int(r.due.timestamp() * 1000) for r in rows}
seen["dehydrator"] = {"delivered": len(rows)}
check(sorted(due) == sorted(f"doc:{i}" for i in range(30)), "every element released once")
check(
    all(due[f"doc:{i}"] == (now_s - i) * 1000 for i in range(30)),
    "due times as written (the releaseAt timestamps, in UTC)",
)
check(parked.size() == 0, "the dehydrator is empty")

# --- poison: a member the sink hands back is retried, then a dead letter -------------
from pyspark_ick.dead_letters import DeadLetters  # noqa: E402
from pyspark_ick.spark import retry_later  # noqa: E402

ick.add({f"p{i}": float(i) for i in range(20)})
poison = {
    "redis.url": URL,
    "ick": "v",
    "shards": str(SHARDS),
    "maxAttempts": "2",
    "retryBackoff": "100ms",
    "retryBackoffMax": "200ms",
}
attempts: dict[str, list[int]] = defaultdict(list)


def failing(df: Any, batch_id: int) -> None:
    rows = df.collect()
    for r in rows:
        attempts[r.member].append(r.attempt)
    retry_later([(r, "refused") for r in rows if r.member == "p7"], poison)


query = (
    spark.readStream.format("ick")
    .options(**poison)
    .load()
    .writeStream.foreachBatch(failing)
    .option("checkpointLocation", str(WORK / "poison"))
    .trigger(processingTime="0 seconds")
    .start()
)
letters = DeadLetters(ick)
deadline = time.monotonic() + 60
while sum(letters.count()) < 1 and query.isActive and time.monotonic() < deadline:
    time.sleep(0.2)
query.stop()
dead = (
    spark.read.format("ick")
    .options(**{k: v for k, v in poison.items() if not k.startswith(("max", "retry"))})
    .option("deadLetters", "true")
    .load()
    .collect()
)
seen["poison"] = {"attempts_of_p7": attempts["p7"], "dead": [(d.member, d.attempts) for d in dead]}
check(attempts["p7"] == [1, 2], "the handed-back member came back as attempt 2")
check([(d.member, d.attempts, d.error) for d in dead] == [("p7", 2, "refused")], "then dead")
check(all(a == [1] for m, a in attempts.items() if m != "p7"), "the others once, first time")
check(ick.stats()["total_size"] == 0, "the Ick is empty")

# --- a filtered snapshot read: Redis answers the filters where pyspark pushes them ------
PUSHDOWN = hasattr(pyspark.sql.datasource, "EqualTo")  # filter pushdown: pyspark 4.1+
ick.add({f"s{i:03d}": float(i) for i in range(500)})


def snapshot(where: str, pushdown: str) -> tuple[list[tuple[str, float]], int]:
    """The rows of a filtered snapshot read, and the bytes Redis sent for them."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", pushdown)
    before = int(client.info("stats")["total_net_output_bytes"])
    got = (
        spark.read.format("ick")
        .option("redis.url", URL)
        .option("ick", "v")
        .option("shards", SHARDS)
        .load()
        .where(where)
        .collect()
    )
    sent = int(client.info("stats")["total_net_output_bytes"]) - before
    return sorted((r.member, r.score) for r in got), sent


seen["filtered_read"] = {"pushdown": PUSHDOWN}
in_shard_1 = [(f"s{i:03d}", float(i)) for i in range(10, 20) if ick.shard_of(f"s{i:03d}") == 1]
# a member lookup; a shard and a score range (=, >= and <: the range calls) in one read
for where, expected in (
    ("member = 's007'", [("s007", 7.0)]),
    ("shard = 1 AND score >= 10 AND score < 20", in_shard_1),
):
    off, off_bytes = snapshot(where, "false")  # the default: everything read, Spark filters
    on, on_bytes = snapshot(where, "true")
    seen["filtered_read"][where] = {"rows": len(on), "bytes": [off_bytes, on_bytes]}
    check(on == off == expected, f"{where}: the rows it names, with pushdown on and off")
    check(not PUSHDOWN or on_bytes < off_bytes / 2, f"{where}: Redis answered it (4.1+)")
print(json.dumps(seen), flush=True)
spark.stop()
