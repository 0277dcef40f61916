"""Helpers the test files share: a recording foreachBatch sink and the stream queries
that feed it (``stream``, ``drain``), Redis's clock, the CLI's command line, the restricted
ACL user's name and password, the processes under this one, and stopping what a failed
test left running.

(The fault suite's workload and invariant checks are in tests/faults_support.py, the tools
that break servers in tests/redis_faults.py and tests/cluster_faults.py; the fixtures
``durable``, ``proxy`` and ``acl_url`` in tests/conftest.py.)
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from math import inf
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

ACL_PASSWORD = "s3cret-Pa55"  # the restricted user ``ick`` of docs/security.md (acl_url)
ACL_NAMES = ("dirty_docs", "parked")  # the only Icks and dehydrators it may touch


def load_module(path: Path, name: str) -> ModuleType:
    """The Python file ``path`` (an example, docs/generate.py: no package) imported as
    module ``name``; its ``if __name__ == "__main__"`` part does not run."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def script_calls(client: Any) -> int:
    """Scripts Redis has run so far (EVAL, EVALSHA, FCALL: INFO commandstats)."""
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("eval", "evalsha", "fcall"))


def redis_ms(client: Any) -> int:
    """Redis's clock (TIME), in milliseconds."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


class Delivery(NamedTuple):
    """One foreachBatch call: Spark's batch id, its rows (as collected, but for the
    ``deliveries`` column, which a replay counts up) and when it ran (by the sink's clock),
    and the batch's deliveries (the values of that column)."""

    batch: int
    rows: list[Any]
    at: float
    deliveries: frozenset[int] = frozenset()

    @property
    def sorted_rows(self) -> list[tuple[Any, ...]]:
        """The rows as sorted tuples: a replay must deliver the same ones, in any order."""
        return sorted((tuple(r) for r in self.rows), key=repr)


def without_deliveries(rows: list[Any]) -> tuple[list[Any], frozenset[int]]:
    """Rows of a stream batch without their ``deliveries`` column, and its values."""
    if not rows or "deliveries" not in rows[0].__fields__:
        return rows, frozenset()
    from pyspark.sql import Row

    kept = [f for f in rows[0].__fields__ if f != "deliveries"]
    shape = Row(*kept)
    return [shape(*(r[f] for f in kept)) for r in rows], frozenset(r.deliveries for r in rows)


class Sink:
    """A foreachBatch function recording every call, replays included, stamped by
    ``clock`` (default ``time.monotonic``; say ``lambda: redis_ms(client)`` for Redis's);
    ``fail_first`` fails the first call once it is recorded."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, fail_first: bool = False
    ) -> None:
        self.calls: list[Delivery] = []
        self.lock = threading.Lock()
        self.clock, self.fail_first = clock, fail_first

    def __call__(self, df: Any, batch_id: int) -> None:
        rows, deliveries = without_deliveries(df.collect())
        with self.lock:
            self.calls.append(Delivery(batch_id, rows, self.clock(), deliveries))
        if self.fail_first:
            self.fail_first = False
            raise RuntimeError(f"the sink fails batch {batch_id} on purpose")

    def snapshot(self) -> list[Delivery]:
        """Every call so far, in order."""
        with self.lock:
            return list(self.calls)

    def batches(self) -> dict[int, Delivery]:
        """The last call of each batch id (a replay replaces the call before it)."""
        return {d.batch: d for d in self.snapshot()}

    def rows(self) -> list[Any]:
        """The rows of every batch, once each (replays aside)."""
        return [row for d in self.batches().values() for row in d.rows]

    def batches_since(self, moment: float) -> int:
        """Calls after ``moment`` (by the sink's clock)."""
        return sum(1 for d in self.snapshot() if d.at > moment)

    def first_since(self, moment: float) -> float:
        """Time from ``moment`` to the first call after it (inf: none)."""
        return min((d.at - moment for d in self.snapshot() if d.at > moment), default=inf)

    def values(self, column: int = 0) -> set[Any]:
        """The values of ``column`` (0: member or id) of every delivered row."""
        return {row[column] for d in self.snapshot() for row in d.rows}


def read_stream(spark: Any, fmt: str, options: Mapping[str, Any]) -> Any:
    """``spark.readStream.format(fmt)`` with ``options`` (``redis.url`` among them), loaded."""
    reader = spark.readStream.format(fmt)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def stream(
    spark: Any,
    fmt: str,
    options: Mapping[str, Any],
    sink: Callable[[Any, int], Any],
    checkpoint: str,
    trigger: str | None = "150 milliseconds",
) -> Any:
    """Start ``read_stream(spark, fmt, options)`` into foreachBatch ``sink`` from
    ``checkpoint``; ``trigger`` is the processing time, None for Trigger.AvailableNow."""
    writer = read_stream(spark, fmt, options).writeStream.foreachBatch(sink)
    writer = (
        writer.trigger(availableNow=True)
        if trigger is None
        else writer.trigger(processingTime=trigger)
    )
    return writer.option("checkpointLocation", checkpoint).start()


def drain(spark: Any, fmt: str, options: Mapping[str, Any], checkpoint: str) -> tuple[Any, Sink]:
    """A Trigger.AvailableNow query from ``checkpoint`` into a new Sink: (query, sink)."""
    sink = Sink()
    return stream(spark, fmt, options, sink, checkpoint, trigger=None), sink


def failure_of(query: Any, timeout: float) -> str:
    """The message the query failed with within ``timeout`` seconds (fails if it did not)."""
    try:
        ended = query.awaitTermination(timeout)
    except Exception as exc:  # noqa: BLE001 - the failure is what we want
        return str(exc)
    raise AssertionError(
        f"the query {'ended cleanly' if ended else 'still runs'}: it should have failed"
    )


def stop_all(*things: Any) -> None:
    """Stop the loops and stream queries that may still run (after a failure); None is
    skipped."""
    for thing in things:
        if thing is None:
            continue
        if hasattr(thing, "isActive"):
            if thing.isActive:
                thing.stop()
        else:
            thing.stop()


def cli_command(*args: str, url: str | None = None) -> list[str]:
    """``python -m pyspark_ick.cli [--url URL] ARGS``: the CLI run by this interpreter."""
    return [sys.executable, "-m", "pyspark_ick.cli", *(["--url", url] if url else []), *args]


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process we can read."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        table[int(name)] = (ppid, cmd)
    return table


def descendants(root: int) -> dict[int, str]:
    """pid -> command line of every live descendant of ``root`` (not ``root`` itself)."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found[pid] = table[pid][1]
            todo += children.get(pid, [])
    return found


def scrape(port: int) -> dict[str, float]:
    """``{'name{labels}': value}`` of a /metrics page (comments left out)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        body = reply.read().decode()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def served(client: Any) -> dict[str, float]:
    """One scrape of the exporter ``serve(client, port)`` runs on a free port."""
    from pyspark_ick.metrics import serve
    from pyspark_ick.testing import free_port

    port = free_port()
    server = serve(client, port)
    try:
        return scrape(port)
    finally:
        server.shutdown()
