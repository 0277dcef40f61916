"""Neighbour benchmark: does the connector leave Redis to its other clients? (issue 11)

A probe client in another process does GET of a small key in a bounded loop and records
each call's latency, on an idle Redis (the baseline row) and during each phase: (a) stream
drains of N members against bench_reader's raw loop, (b) ``df.write.format("ick")``
against pipelined ``ZADD LT``, (c) the snapshot read, (d) the dehydrator sink and source,
(e) the plain client's bulk writes; then memory per member and a sweep of members per
call. docs/sizing.md#the-neighbour-benchmark says how it measures, why (priorities, the
probe's gap, rounds) and what each row means.

Run: ``python bench/bench_neighbour.py [--quick] [--members N] [--repeat R] [--phases
drain,write,park,client,memory,sweep]``. Starts its own redis-server on a free 127.0.0.1
port and one SparkSession; writes bench/results/bench_neighbour.json (``--quick``:
bench_neighbour_quick.json).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_reader
import numpy as np
import pairs
from bench_core import raw_zadd, server_cpu
from common import Report
from pairs import Rounds

from pyspark_ick import Dehydrator, Ick, ShardedIck, bounds, connect, lua
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import RedisServer, spark_session, start_binary

PROBE_KEY = b"neighbour:probe"
GET_COMMAND = b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(PROBE_KEY), PROBE_KEY)
GET_REPLY = b"$2\r\nok\r\n"
PROBE_MAX_SECONDS = 900.0  # one sampling run never lasts longer
PROBE_MAX_SAMPLES = 20_000_000

LONGEST_CALL_MS = 10.0  # target: the connector's longest call
PROBE_P999_MS = 15.0  # target: the probe's p99.9
CALL_BUDGET_MS = 5.0  # what ITEMS_PER_CALL should keep a call within
DRAIN_RATIO, WRITER_RATIO = 0.9, 0.9
TTL_MS = 600_000
HOUR_MS = 3_600_000
PHASES = ("drain", "write", "park", "client", "memory", "sweep")  # --phases
SWEPT = (
    "rlog_reserve",
    "log_read",
    "rlog_commit",
    "dh_claim",
    "dh_commit",
    "ickadd",
    "dh_push",
)  # the scripts whose work grows with ITEMS_PER_CALL (or the chunk)
MOVERS = ("rlog_reserve", "dh_claim (dehydrator)")  # bound by MOVES_PER_CALL instead
OWN_COMMANDS = {"SLOWLOG", "INFO", "CONFIG", "PING", "CLIENT", "HELLO"}  # the bench's own


# --- the probe: a separate process doing GET in a tight loop --------------------------


def probe_get(sock: socket.socket) -> None:
    """One GET of the probe key, reply read in full."""
    sock.sendall(GET_COMMAND)
    got = sock.recv(64)
    while len(got) < len(GET_REPLY):
        more = sock.recv(64)
        if not more:
            raise ConnectionError("Redis closed the probe's connection")
        got += more


def probe_sample(sock: socket.socket, conn: Connection, gap_s: float) -> array:
    """GET latencies in microseconds until ``conn`` has a message or a bound is hit."""
    out = array("f")
    clock = time.perf_counter_ns
    deadline = time.monotonic() + PROBE_MAX_SECONDS
    while len(out) < PROBE_MAX_SAMPLES:
        if len(out) % 64 == 0 and (conn.poll() or time.monotonic() > deadline):
            break
        start = clock()
        probe_get(sock)
        out.append((clock() - start) / 1000)
        if gap_s:
            time.sleep(gap_s)
    return out


def probe_main(conn: Connection, host: str, port: int, gap_s: float) -> None:
    """The probe process: on "run" it acknowledges and samples; on "stop" it sends the
    latencies (float32 microseconds); "exit" or a closed pipe ends it."""
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            try:
                if conn.recv() != "run":
                    return
                conn.send("running")
                samples = probe_sample(sock, conn, gap_s)
                if conn.recv() != "stop":
                    return
                conn.send_bytes(samples.tobytes())
            except (EOFError, BrokenPipeError):
                return


class Probe:
    """The probe process, driven from here: ``start()`` then ``stop() -> latencies``."""

    def __init__(self, server: RedisServer, gap_us: float) -> None:
        context = mp.get_context("spawn")  # no fork of a process that holds a JVM gateway
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=probe_main,
            args=(child, server.host, server.port, gap_us / 1e6),
            name="neighbour-probe",
            daemon=True,
        )
        self.process.start()
        child.close()

    def start(self) -> None:
        """Begin sampling; returns once the probe runs."""
        self.conn.send("run")
        if self.conn.recv() != "running":
            raise RuntimeError("the probe process did not start sampling")

    def stop(self) -> np.ndarray:
        """Stop sampling; the latencies of the run in milliseconds."""
        self.conn.send("stop")
        return np.frombuffer(self.conn.recv_bytes(), np.float32).astype(np.float64) / 1000

    def close(self) -> None:
        """End the probe process (ours, by its handle)."""
        try:
            self.conn.send("exit")
        except (BrokenPipeError, OSError):
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(10)


def run_queue_wait(pid: int | None) -> float:
    """Seconds process ``pid`` (its main thread) has waited for a CPU while runnable, from
    /proc/PID/schedstat; 0.0 where that is not available."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def host_steal() -> float:
    """CPU seconds the hypervisor has run other guests instead of this machine's CPUs (the
    steal column of /proc/stat, all CPUs); 0.0 where that is not available. A stolen CPU
    stops whatever ran on it, Redis mid-call included, and no priority here prevents it."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def prioritize(pids: dict[str, int | None], nice: int) -> dict[str, Any]:
    """Set the nice value of every thread of processes ``pids`` (ours: the server, the
    probe); returns what was set, or why not. Every thread: Linux keeps a nice value per
    thread, and Redis's main thread waits on locks its other threads hold (jemalloc's)."""
    done: dict[str, Any] = {}
    for name, pid in pids.items():
        if pid is None or nice == 0:
            continue
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                os.setpriority(os.PRIO_PROCESS, int(task), nice)
            done[name] = nice
        except OSError as exc:
            done[name] = f"left alone: {exc}"
    return done


def quantiles(values: np.ndarray) -> dict[str, float]:
    """p50, p99, p99.9 and max of ``values`` (nearest rank, as common.percentile)."""
    if not len(values):
        return dict.fromkeys(("p50", "p99", "p99.9", "max"), float("nan"))
    q = np.percentile(values, [50, 99, 99.9], method="nearest")
    return {
        "p50": float(q[0]),
        "p99": float(q[1]),
        "p99.9": float(q[2]),
        "max": float(values.max()),
    }


# --- SLOWLOG: the longest calls and what they were --------------------------------------


@dataclass(frozen=True)
class Call:
    """One SLOWLOG entry: how long it held Redis, the script (or command), its arguments."""

    micros: int
    name: str
    detail: str

    @property
    def ms(self) -> float:
        """The duration in milliseconds."""
        return self.micros / 1000


def script_names() -> dict[str, str]:
    """EVALSHA sha -> script name, for every script of lua/."""
    return {
        lua.sha(path.stem): path.stem
        for path in lua.lua_dir().glob("*.lua")
        if path.stem != lua.PRELUDE
    }


def short(arg: bytes, width: int = 24) -> str:
    """An argument as text, cut to ``width`` characters (packed binary shows as such)."""
    text = arg.decode("utf-8", "replace")
    if not text.isprintable():
        return f"<{len(arg)} bytes>"
    return text if len(text) <= width else text[: width - 1] + "~"


def parse_call(entry: list[Any], names: dict[str, str]) -> Call:
    """A Call from a raw SLOWLOG GET entry (id, start, duration, args, ...)."""
    args: list[bytes] = entry[3]
    command = args[0].decode().upper()
    if command == "EVALSHA" and len(args) > 2:
        numkeys = int(args[2])
        argv = args[3 + numkeys :]
        detail = f"{numkeys} keys; ARGV " + " ".join(short(a) for a in argv[:8])
        return Call(int(entry[2]), names.get(args[1].decode(), "EVALSHA ?"), detail)
    return Call(int(entry[2]), command, " ".join(short(a) for a in args[1:4]))


def slowlog(client: Any, names: dict[str, str]) -> list[Call]:
    """Every connector call SLOWLOG holds, slowest first (the probe and the bench left out),
    then SLOWLOG RESET."""
    entries = client.execute_command("SLOWLOG", "GET", "-1")
    client.slowlog_reset()
    calls = [parse_call(e, names) for e in entries]
    calls = [
        c
        for c in calls
        if c.name not in OWN_COMMANDS and not (c.name == "GET" and c.detail == PROBE_KEY.decode())
    ]
    return sorted(calls, key=lambda c: -c.micros)


# --- phases -------------------------------------------------------------------------


@dataclass
class Phase:
    """What the probe, SLOWLOG and INFO cpu saw while one workload ran (all repeats)."""

    name: str
    connector: bool = True  # the targets apply (not to raw baselines)
    latencies: list[np.ndarray] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    cpu: float = 0.0
    waited: float = 0.0  # seconds Redis was runnable but had no CPU (a busy machine)
    stolen: float = 0.0  # CPU seconds the hypervisor took from this machine (all CPUs)
    calls: list[Call] = field(default_factory=list)  # the slowest few
    logged: int = 0  # SLOWLOG entries (commands run inside scripts are logged too)
    scripts: int = 0  # script calls logged
    scripts_over: int = 0  # script calls longer than LONGEST_CALL_MS
    items: int = 0
    busy: list[float] = field(default_factory=list)  # seconds the throughput counts

    @property
    def probe(self) -> dict[str, float]:
        """The probe's quantiles over every repeat."""
        return quantiles(np.concatenate(self.latencies) if self.latencies else np.empty(0))

    @property
    def slowest(self) -> Call | None:
        """The longest connector call of the phase."""
        return self.calls[0] if self.calls else None

    @property
    def throughput(self) -> float:
        """Items per second of the fastest repeat."""
        return self.items / min(self.busy) if self.busy else float("nan")

    def json(self) -> dict[str, Any]:
        """The phase for the JSON file."""
        samples = sum(len(x) for x in self.latencies)
        return {
            "probe_ms": self.probe,
            "probe_samples": samples,
            "probe_rate": samples / sum(self.walls) if self.walls else 0.0,
            "wall_s": self.walls,
            "busy_s": self.busy,
            "items": self.items,
            "redis_cpu_s": self.cpu,
            "redis_run_queue_wait_s": self.waited,
            "host_steal_s": self.stolen,
            "slowlog_entries": self.logged,
            "script_calls_logged": self.scripts,
            f"script_calls_over_{LONGEST_CALL_MS:g}_ms": self.scripts_over,
            "slowest": [vars(c) for c in self.calls],
        }


@dataclass
class Lab:
    """The Redis server, its clients, the probe and the Spark session of this run."""

    server: RedisServer
    spark: Any
    probe: Probe
    slowlog_us: int
    names: dict[str, str] = field(default_factory=script_names)
    phases: dict[str, Phase] = field(default_factory=dict)
    rounds: dict[str, Rounds] = field(default_factory=dict)  # raw against connector, by phase
    cpus: dict[str, Any] = field(default_factory=dict)  # pairs.layout
    admin: Any = field(init=False)  # plain redis-py (bytes): SLOWLOG, INFO, CONFIG
    client: Any = field(init=False)  # the connector's client (pyspark_ick.connect)

    def __post_init__(self) -> None:
        self.admin = self.server.client()
        self.client = connect(self.server.url)

    @property
    def url(self) -> str:
        """redis://127.0.0.1:PORT/0 of our server."""
        return self.server.url

    @property
    def waited(self) -> float:
        """Seconds our redis-server has waited for a CPU so far."""
        return run_queue_wait(self.server.process.pid if self.server.process else None)

    def phase(self, key: str, name: str, connector: bool = True) -> Phase:
        """The phase ``key``, created on first use."""
        return self.phases.setdefault(key, Phase(name, connector))

    def pair_round(self, key: str, name: str, raw: float, ours: float, order: list[str]) -> None:
        """One round of the pair ``key`` (seconds of the raw baseline and the connector)."""
        rounds = self.rounds.setdefault(key, Rounds(name, ["raw", "connector"], cpus=self.cpus))
        rounds.add({"raw": raw, "connector": ours}, order)

    def log_slow_calls(self) -> None:
        """SLOWLOG every call slower than ``slowlog_us`` from now on, emptied."""
        self.admin.config_set("slowlog-log-slower-than", self.slowlog_us)
        self.admin.config_set("slowlog-max-len", 200_000)
        self.admin.slowlog_reset()


def measure(lab: Lab, phase: Phase, action: Callable[[], Any]) -> Any:
    """Run ``action`` with the probe sampling, SLOWLOG emptied before and read after,
    Redis CPU and wall time added to ``phase``; returns what ``action`` returns."""
    lab.admin.slowlog_reset()
    cpu, waited, stolen = server_cpu(lab.admin), lab.waited, host_steal()
    lab.probe.start()
    start = time.perf_counter()
    try:
        result = action()
    finally:
        phase.walls.append(time.perf_counter() - start)
        phase.latencies.append(lab.probe.stop())
    phase.cpu += server_cpu(lab.admin) - cpu
    phase.waited += lab.waited - waited
    phase.stolen += host_steal() - stolen
    calls = slowlog(lab.admin, lab.names)
    scripts_run = [c for c in calls if c.name in lab.names.values()]
    phase.logged += len(calls)
    phase.scripts += len(scripts_run)
    phase.scripts_over += sum(c.ms > LONGEST_CALL_MS for c in scripts_run)
    phase.calls = sorted(phase.calls + calls[:5], key=lambda c: -c.micros)[:5]
    return result


def idle(lab: Lab, seconds: float) -> None:
    """The probe on an idle Redis: the baseline row."""
    phase = lab.phase("idle", "idle Redis (probe only)", connector=False)
    measure(lab, phase, lambda: time.sleep(seconds))


@contextmanager
def reader_shards(shards: int) -> Iterator[None]:
    """bench_reader's load/raw_drain/stream work on ``bench_reader.SHARDS`` shards: set it
    for the block."""
    saved = bench_reader.SHARDS
    bench_reader.SHARDS = shards
    try:
        yield
    finally:
        bench_reader.SHARDS = saved


def run_available_now(reader: Any) -> tuple[float, int]:
    """Drain ``reader`` (a streaming DataFrame) into the noop sink with Trigger.AvailableNow;
    returns (seconds in micro-batches, rows delivered), from the query's progress."""
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as checkpoint:
        query = (
            reader.writeStream.format("noop")
            .trigger(availableNow=True)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        query.awaitTermination()
        progress = query.recentProgress
    busy = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return busy, sum(p["numInputRows"] for p in progress)


def drain(lab: Lab, n: int, shards: int, rep: int) -> None:
    """(a): the raw loop and readStream at default options, each on a fresh backlog, the
    raw loop first in even rounds and second in odd ones."""
    raw = lab.phase(f"raw{shards}", f"(a) raw loop, {shards} shard(s)", connector=False)
    stream = lab.phase(f"drain{shards}", f"(a) readStream drain, {shards} shard(s)")
    busy = 0.0

    def run_raw() -> None:
        bench_reader.load(lab.client, f"raw{shards}.{rep}", n)
        got = measure(lab, raw, lambda: bench_reader.raw_drain(lab.client, f"raw{shards}.{rep}"))
        assert got == n, (got, n)

    def run_stream() -> None:
        nonlocal busy
        name = f"drain{shards}.{rep}"
        bench_reader.load(lab.client, name, n)
        reader = bench_reader.stream(lab.spark, lab.url, name)  # default options
        busy, rows = measure(lab, stream, lambda: run_available_now(reader))
        assert rows == n, (rows, n)
        assert ShardedIck(lab.client, name, shards).stats()["total_size"] == 0

    order = ["raw", "connector"] if rep % 2 == 0 else ["connector", "raw"]
    with reader_shards(shards):
        for side in order:
            run_raw() if side == "raw" else run_stream()
    raw.items, raw.busy = n, raw.walls
    stream.items = n
    stream.busy.append(busy)
    lab.pair_round(f"drain{shards}", f"drain, {shards} shard(s)", raw.walls[-1], busy, order)


def writer_frame(spark: Any, n: int) -> Any:
    """bench_writer's DataFrame: ``doc:<id>`` and a score, cached and counted."""
    df = (
        spark.range(n)
        .selectExpr("concat('doc:', id) AS member", "CAST(id % 9973 AS DOUBLE) AS score")
        .cache()
    )
    assert df.count() == n
    return df


def write(lab: Lab, df: Any, n: int, mapping: dict[str, float], rep: int) -> str:
    """(b): raw pipelined ZADD LT and df.write.format("ick"), alternating which goes first;
    returns the Ick written."""
    raw = lab.phase("rawzadd", "(b) raw pipelined ZADD LT", connector=False)
    sink = lab.phase("write", '(b) df.write.format("ick")')
    name = f"written.{rep}"

    def run_raw() -> None:
        measure(lab, raw, lambda: raw_zadd(lab.client, f"rawzadd.{rep}", mapping))
        lab.client.unlink(f"rawzadd.{rep}")

    def run_sink() -> None:
        measure(
            lab,
            sink,
            lambda: (
                df.write.format("ick")
                .option("redis.url", lab.url)
                .option("ick", name)
                .mode("append")
                .save()
            ),
        )

    order = ["raw", "connector"] if rep % 2 == 0 else ["connector", "raw"]
    for side in order:
        run_raw() if side == "raw" else run_sink()
    assert ShardedIck(lab.client, name).stats()["total_size"] == n
    raw.items = sink.items = n
    raw.busy, sink.busy = raw.walls, sink.walls
    lab.pair_round("write", "write", raw.walls[-1], sink.walls[-1], order)
    return name


def snapshot(lab: Lab, name: str, n: int) -> None:
    """(c): count a snapshot of Ick ``name``."""
    phase = lab.phase("snapshot", '(c) spark.read.format("ick") count')
    got = measure(
        lab,
        phase,
        lambda: (
            lab.spark.read.format("ick")
            .option("redis.url", lab.url)
            .option("ick", name)
            .load()
            .count()
        ),
    )
    assert got == n, (got, n)
    phase.items, phase.busy = n, phase.walls


def used_memory(client: Any, timeout: float = 60.0) -> int:
    """Bytes Redis has allocated (INFO memory used_memory), once Redis has no lazily freed
    object pending: the phases end with UNLINKs, which Redis frees in a background thread,
    and a baseline taken while it frees was 35 MB high (71 B per queued member were
    reported instead of 110)."""
    deadline = time.monotonic() + timeout
    while True:
        info = client.info("memory")
        if not int(info.get("lazyfree_pending_objects", 0)) or time.monotonic() > deadline:
            return int(info["used_memory"])
        time.sleep(0.05)


def dehydrate(lab: Lab, n: int, rep: int) -> int:
    """(d): park n elements (half due at once, half in an hour), release the due half
    with readStream AvailableNow; returns the bytes the park added to Redis."""
    park = lab.phase("park", '(d) df.write.format("dehydrator")')
    release = lab.phase("release", '(d) readStream.format("dehydrator")')
    df = (
        lab.spark.range(n)
        .selectExpr(
            "concat('doc:', id) AS element",
            f"CAST(IF(id % 2 = 0, 0, {HOUR_MS}) AS BIGINT) AS delayMs",
        )
        .cache()
    )
    assert df.count() == n
    name = f"parked.{rep}"
    before = used_memory(lab.admin)
    measure(
        lab,
        park,
        lambda: (
            df.write.format("dehydrator")
            .option("redis.url", lab.url)
            .option("dehydrator", name)
            .mode("append")
            .save()
        ),
    )
    added = used_memory(lab.admin) - before
    df.unpersist()
    assert Dehydrator(lab.client, name).size() == n
    reader = (
        lab.spark.readStream.format("dehydrator")
        .option("redis.url", lab.url)
        .option("dehydrator", name)
        .load()
    )
    busy, rows = measure(lab, release, lambda: run_available_now(reader))
    assert rows == n // 2 + n % 2, (rows, n)
    park.items, park.busy = n, park.walls
    release.items = rows
    release.busy.append(busy)
    Dehydrator(lab.client, name).delete()
    return added


def warm_up(lab: Lab, n: int) -> None:
    """Every workload once, small and unmeasured: Python workers, JIT, script loads.
    The reads are cut into several tasks, so that every task slot's Python worker starts
    here: with one, the 1-shard drain started the second worker, a second or so of its
    four."""
    with reader_shards(8):
        bench_reader.load(lab.client, "warm", n)
        run_available_now(
            bench_reader.stream(lab.spark, lab.url, "warm", minMembersPerPartition=n // 8)
        )
    df = writer_frame(lab.spark, n)
    df.write.format("ick").option("redis.url", lab.url).option("ick", "warmw").mode("append").save()
    df.unpersist()
    lab.spark.read.format("ick").option("redis.url", lab.url).option("ick", "warmw").load().count()
    lab.spark.range(n).selectExpr("concat('doc:', id) AS element").write.format(
        "dehydrator"
    ).option("redis.url", lab.url).option("dehydrator", "warmd").option("delay", "0ms").mode(
        "append"
    ).save()
    run_available_now(
        lab.spark.readStream.format("dehydrator")
        .option("redis.url", lab.url)
        .option("dehydrator", "warmd")
        .option("minElementsPerPartition", n // 8)
        .load()
    )
    lab.admin.flushall()


def client_writes(lab: Lab, n: int, mapping: dict[str, float], rep: int) -> None:
    """(e): Ick.add, ShardedIck.add (8 shards) and Dehydrator.park by the plain client."""
    ids = list(mapping)
    for key, name, write in [
        ("client_add", "(e) Ick.add", lambda: Ick(lab.client, f"cadd.{rep}").add(mapping)),
        (
            "client_sharded",
            "(e) ShardedIck.add, 8 shards",
            lambda: ShardedIck(lab.client, f"csh.{rep}", 8).add(mapping),
        ),
        (
            "client_park",
            "(e) Dehydrator.park",
            lambda: Dehydrator(lab.client, f"cpark.{rep}").park(ids, ids, [HOUR_MS] * n),
        ),
    ]:
        phase = lab.phase(key, name)
        measure(lab, phase, write)
        phase.items, phase.busy = n, phase.walls
        lab.admin.flushall()
        lab.admin.set(PROBE_KEY, "ok")


def run_phases(lab: Lab, n: int, repeat: int, phases: set[str]) -> dict[str, Any]:
    """Every phase, ``repeat`` times (throughput: the best; probe and calls: all)."""
    df = writer_frame(lab.spark, n) if "write" in phases else None
    mapping = {f"doc:{i}": float(i % 9973) for i in range(n)}
    parked: list[int] = []
    for rep in range(repeat):
        if "drain" in phases:
            for shards in (1, 8):
                drain(lab, n, shards, rep)
        if df is not None:
            name = write(lab, df, n, mapping, rep)
            snapshot(lab, name, n)
            ShardedIck(lab.client, name).unlink()
        if "park" in phases:
            parked.append(dehydrate(lab, n, rep))
        if "client" in phases:
            client_writes(lab, n, mapping, rep)
        print(f"  round {rep + 1}/{repeat} done", flush=True)
    if df is not None:
        df.unpersist()
    return {"park_bytes": min(parked) if parked else float("nan")}


# --- memory ---------------------------------------------------------------------------


def bench_memory(lab: Lab, n: int) -> dict[str, float]:
    """Bytes per queued member, then per reserved member (queued, then all reserved by
    ReservationLog.reserve(None, ...)), from INFO used_memory on an emptied Redis."""
    admin = lab.admin
    admin.flushall()
    admin.config_set("slowlog-log-slower-than", -1)
    admin.slowlog_reset()
    members = [f"doc:{1_000_000 + i}" for i in range(n)]
    start = used_memory(admin)
    ick = ShardedIck(lab.client, "memory")
    for first in range(0, n, 50_000):
        ick.add_pairs(
            members[first : first + 50_000],
            [float(i) for i in range(first, min(n, first + 50_000))],
        )
    queued = used_memory(admin)
    log = ReservationLog(lab.client, "memory")
    token = log.lease.acquire("bench", TTL_MS)
    moved = log.reserve(None, 0, token).moved
    assert moved == n, (moved, n)
    reserved = used_memory(admin)
    admin.flushall()
    lab.log_slow_calls()
    return {
        "queued": (queued - start) / n,
        "reserved": (reserved - start) / n,
        "reserve_adds": (reserved - queued) / n,
        "member_bytes": len(members[-1]),
    }


# --- ITEMS_PER_CALL and MOVES_PER_CALL: call durations per size -------------------------


@contextmanager
def per_call(size: int) -> Iterator[None]:
    """``bounds.ITEMS_PER_CALL`` and ``MOVES_PER_CALL`` = ``size`` in this process for the
    block (plain client calls only: Spark's Python workers are other processes)."""
    saved = bounds.ITEMS_PER_CALL, bounds.MOVES_PER_CALL
    bounds.ITEMS_PER_CALL = bounds.MOVES_PER_CALL = size
    try:
        yield
    finally:
        bounds.ITEMS_PER_CALL, bounds.MOVES_PER_CALL = saved


def durations(lab: Lab, suffix: str = "") -> dict[str, list[int]]:
    """Microseconds of each call of the SWEPT scripts SLOWLOG holds, by name + ``suffix``."""
    out: dict[str, list[int]] = {}
    for call in slowlog(lab.admin, lab.names):
        if call.name in SWEPT:
            out.setdefault(call.name + suffix, []).append(call.micros)
    return out


def sweep_ick(lab: Lab, size: int, calls: int) -> dict[str, list[int]]:
    """``calls`` reservations of ``size`` members (kept open, as two batches are), read,
    committed, on the deep Ick "sweep"."""
    log = ReservationLog(lab.client, "sweep")
    token = log.lease.acquire("sweep", TTL_MS)
    _, after = log.counters()
    lab.admin.slowlog_reset()
    head, moved, _ = log.reserve(size * calls, after, token)
    assert moved == size * calls, (moved, size, calls)
    log.read(after, head)
    log.commit(head, token)
    found = durations(lab)
    log.lease.release(token)
    return found


def sweep_dehydrator(lab: Lab, size: int, calls: int) -> dict[str, list[int]]:
    """``calls`` claims of ``size`` due elements, read, committed."""
    claims = Dehydrator(lab.client, "sweepdh").claim_log(0)
    token = claims.lease.acquire("sweep", TTL_MS)
    _, after = claims.counters()
    lab.admin.slowlog_reset()
    head, moved, _ = claims.reserve(size * calls, after, token)
    assert moved == size * calls, (moved, size, calls)
    claims.read(after, head)
    claims.commit(head, token)
    found = durations(lab, " (dehydrator)")
    claims.lease.release(token)
    return found


def sweep_writers(lab: Lab, size: int, calls: int) -> dict[str, list[int]]:
    """``calls`` ickadd calls of ``size`` new members into the deep Ick "sweep", and
    ``calls`` dh_push calls of ``size`` elements (due in an hour) into "sweepdh"."""
    members = [f"w{size}:{1_000_000 + i}" for i in range(size * calls)]
    lab.admin.slowlog_reset()
    ShardedIck(lab.client, "sweep").add_pairs(
        members, [float(i % 9973) for i in range(len(members))], chunk=size
    )
    Dehydrator(lab.client, "sweepdh").park(members, members, [HOUR_MS] * len(members), chunk=size)
    return durations(lab)


def bench_sweep(
    lab: Lab, depth: int, sizes: list[int], calls: int
) -> dict[str, dict[int, list[int]]]:
    """Script call durations (us) per members-per-call value: script -> size -> calls."""
    lab.admin.flushall()
    need = calls * sum(sizes)
    with reader_shards(1):
        bench_reader.load(lab.client, "sweep", max(depth, need))
    ids = [f"id:{i}" for i in range(need)]
    Dehydrator(lab.client, "sweepdh").park(ids, [f"doc:{i}" for i in range(need)], [0] * need)
    lab.admin.config_set("slowlog-log-slower-than", 0)  # no probe now: log every call
    table: dict[str, dict[int, list[int]]] = {}
    for size in sizes:
        with per_call(size):
            for sweep in (sweep_ick, sweep_dehydrator, sweep_writers):
                for name, micros in sweep(lab, size, calls).items():
                    table.setdefault(name, {})[size] = micros
    lab.admin.flushall()
    lab.log_slow_calls()
    return table


def p90(micros: list[int]) -> float:
    """The 90th percentile (nearest rank): robust to a call the OS preempted."""
    return float(np.percentile(micros, 90, method="nearest"))


def per_member_fit(by_size: dict[int, list[int]]) -> tuple[float, float]:
    """(fixed us, us per member) of a line through the p90 call of each size."""
    sizes = sorted(by_size)
    if len(sizes) < 2:
        return 0.0, p90(by_size[sizes[0]]) / sizes[0]
    slope, fixed = np.polyfit(sizes, [p90(by_size[s]) for s in sizes], 1)
    return float(fixed), float(slope)


def recommend(
    table: dict[str, dict[int, list[int]]], budget_ms: float = CALL_BUDGET_MS
) -> dict[str, Any]:
    """The largest swept size whose p90 call of every swept script stays within
    ``budget_ms``, and the size the fitted lines give for it (rounded down to 250)."""
    sizes = sorted({s for by in table.values() for s in by})
    fits = {name: per_member_fit(by) for name, by in table.items()}
    within = [
        s for s in sizes if all(p90(by[s]) <= budget_ms * 1000 for by in table.values() if s in by)
    ]
    limits = {
        name: (budget_ms * 1000 - fixed) / slope
        for name, (fixed, slope) in fits.items()
        if slope > 0
    }
    fitted = min(limits.values(), default=float("inf"))
    return {
        "largest_swept_within": max(within) if within else None,
        "fitted": int(fitted // 250 * 250) if fitted != float("inf") else None,
        "bound_by": min(limits, key=limits.__getitem__) if limits else None,
        "fits_us": {name: {"fixed": f, "per_member": s} for name, (f, s) in fits.items()},
        "budget_ms": budget_ms,
        "statistic": "p90 of the calls of each size",
    }


# --- the report ---------------------------------------------------------------------------


def phase_rows(report: Report, phase: Phase, idle_name: str) -> None:
    """The probe, longest call, CPU and run-queue rows of one phase."""
    probe, idle = phase.probe, phase.name == idle_name
    for q in ("p50", "p99", "p99.9", "max"):
        name = f"{phase.name}: probe {q}"
        row = (
            report.add(name, probe[q], "ms")
            if idle
            else report.compare(name, probe[q], "ms", f"{idle_name}: probe {q}")
        )
        if q == "p99.9" and phase.connector:
            row.target, row.ok = f"<= {PROBE_P999_MS:g} ms", probe[q] <= PROBE_P999_MS
    if not idle:
        slowest = phase.slowest
        row = report.add(
            f"{phase.name}: longest call ({slowest.name if slowest else 'none'})",
            slowest.ms if slowest else 0.0,
            "ms",
        )
        if phase.connector:
            row.target, row.ok = f"<= {LONGEST_CALL_MS:g} ms", row.value <= LONGEST_CALL_MS
        report.add(
            f"{phase.name}: script calls > {LONGEST_CALL_MS:g} ms",
            phase.scripts_over,
            f"of {phase.scripts}",
        )
    report.add(f"{phase.name}: Redis CPU", phase.cpu, "s")
    report.add(f"{phase.name}: Redis waiting for a CPU", phase.waited, "s")
    report.add(f"{phase.name}: CPU stolen by the hypervisor", phase.stolen, "s")


def throughput_rows(report: Report, lab: Lab) -> None:
    """Throughput of each workload; the drains and the writer against their raw baselines
    as the median ratio of the alternating rounds (pairs.py), with its spread."""
    phases = lab.phases
    for shards in (1, 8):
        if f"raw{shards}" not in phases:
            continue
        raw, stream = phases[f"raw{shards}"], phases[f"drain{shards}"]
        done = lab.rounds[f"drain{shards}"]
        base = report.add(
            f"{raw.name}: throughput, median", raw.items / done.side("raw").median, "members/s"
        ).name
        report.pair(
            f"{stream.name}: micro-batches, median",
            stream.items / done.side("connector").median,
            "members/s",
            base,
            done,
            done.ratio("raw", "connector"),
            minimum=DRAIN_RATIO,
        )
        report.compare(
            f"{stream.name}: query start to stop, best",
            stream.items / min(stream.walls),
            "members/s",
            base,
        )
    if "rawzadd" in phases:
        done = lab.rounds["write"]
        base = report.add(
            f"{phases['rawzadd'].name}: throughput, median",
            phases["rawzadd"].items / done.side("raw").median,
            "members/s",
        ).name
        report.pair(
            f"{phases['write'].name}: throughput, median",
            phases["write"].items / done.side("connector").median,
            "members/s",
            base,
            done,
            done.ratio("raw", "connector"),
            minimum=WRITER_RATIO,
        )
        report.add(
            f"{phases['snapshot'].name}: throughput", phases["snapshot"].throughput, "members/s"
        )
    if "park" in phases:
        report.add(f"{phases['park'].name}: throughput", phases["park"].throughput, "elements/s")
        report.add(
            f"{phases['release'].name}: micro-batches", phases["release"].throughput, "elements/s"
        )
    for key in ("client_add", "client_sharded", "client_park"):
        if key in phases:
            report.add(f"{phases[key].name}: throughput", phases[key].throughput, "items/s")


def advise(table: dict[str, dict[int, list[int]]]) -> dict[str, dict[str, Any]]:
    """``recommend`` for each bound: MOVES_PER_CALL (reserve, claim) and ITEMS_PER_CALL."""
    movers = {name: by for name, by in table.items() if name in MOVERS}
    rest = {name: by for name, by in table.items() if name not in MOVERS}
    return {"MOVES_PER_CALL": recommend(movers), "ITEMS_PER_CALL": recommend(rest)}


def sweep_rows(
    report: Report, table: dict[str, dict[int, list[int]]], advice: dict[str, dict[str, Any]]
) -> None:
    """The p90 call per script and members per call; the recommendations."""
    for name in sorted(table):
        for size in sorted(table[name]):
            micros = table[name][size]
            row = report.add(
                f"{size:>5} per call: {name} p90 of {len(micros)} calls", p90(micros) / 1000, "ms"
            )
            row.target, row.ok = f"<= {CALL_BUDGET_MS:g} ms", row.value <= CALL_BUDGET_MS
    for bound, advised in advice.items():
        for key in ("largest_swept_within", "fitted"):
            if advised[key] is not None:
                report.add(
                    f"{bound} for <= {CALL_BUDGET_MS:g} ms per call: {key}", advised[key], "members"
                )


def print_sweep(table: dict[str, dict[int, list[int]]], advice: dict[str, dict[str, Any]]) -> None:
    """Median / p90 / max ms per script (rows) and members per call (columns)."""
    sizes = sorted({s for by in table.values() for s in by})
    print("\nscript call durations, ms: median / p90 / max")
    print(f"{'script':<24}" + "".join(f"{s:>23,}" for s in sizes))
    for name in sorted(table):
        cells = []
        for size in sizes:
            micros = table[name].get(size)
            cells.append(
                f"{statistics.median(micros) / 1000:.2f} / {p90(micros) / 1000:.2f}"
                f" / {max(micros) / 1000:.1f}"
                if micros
                else "-"
            )
        print(f"{name:<24}" + "".join(f"{c:>23}" for c in cells))
    for bound, advised in advice.items():
        fits = ", ".join(
            f"{n} {f['fixed']:.0f} + {f['per_member']:.2f}/member"
            for n, f in advised["fits_us"].items()
        )
        print(f"p90 fits (us): {fits}")
        print(
            f"{bound} (now {getattr(bounds, bound)}) within {advised['budget_ms']:g} ms "
            f"(p90): swept {advised['largest_swept_within']}, fitted {advised['fitted']} "
            f"(bound by {advised['bound_by']})"
        )


def print_summary(phases: dict[str, Phase]) -> None:
    """One line per phase: the figures side by side."""
    print(
        f"\n{'phase':<40} {'wall s':>7} {'p50':>6} {'p99':>6} {'p99.9':>6} {'max':>7}"
        f" {'longest call ms':>26} {'>10ms':>5} {'CPU s':>6} {'wait s':>6} {'steal':>6}"
        f" {'items/s':>10}"
    )
    for phase in phases.values():
        probe, slowest = phase.probe, phase.slowest
        call = f"{slowest.ms:.2f} {slowest.name}" if slowest else "-"
        rate = f"{phase.throughput:,.0f}" if phase.busy else "-"
        print(
            f"{phase.name:<40} {sum(phase.walls):7.1f} {probe['p50']:6.2f} {probe['p99']:6.2f}"
            f" {probe['p99.9']:6.2f} {probe['max']:7.2f} {call:>26} {phase.scripts_over:>5}"
            f" {phase.cpu:6.2f} {phase.waited:6.2f} {phase.stolen:6.2f}"
            f" {rate:>10}"
        )


def build_report(
    name: str,
    lab: Lab,
    memory: dict[str, float],
    park_bytes: float,
    table: dict[str, dict[int, list[int]]],
    advice: dict[str, dict[str, Any]],
    params: dict[str, Any],
) -> Report:
    """Every row, in the order of the phases."""
    report = Report(name, params=params)
    report.rounds = list(lab.rounds.values())
    idle_name = lab.phases["idle"].name
    for phase in lab.phases.values():
        phase_rows(report, phase, idle_name)
    throughput_rows(report, lab)
    if memory:
        report.add(
            f"memory: bytes per queued member ({memory['member_bytes']:.0f}-byte members)",
            memory["queued"],
            "bytes",
        )
        report.add("memory: bytes per reserved member (all reserved)", memory["reserved"], "bytes")
    report.add("memory: bytes per parked element (32-byte id)", park_bytes, "bytes")
    sweep_rows(report, table, advice)
    report.params.update(
        phases={k: p.json() for k, p in lab.phases.items()},
        memory=memory,
        sweep=table,
        recommendation=advice,
    )
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 50,000 members")
    parser.add_argument(
        "--members",
        type=int,
        default=None,
        help="members per phase (default 1,000,000; --quick 50,000)",
    )
    parser.add_argument(
        "--repeat",
        "--rounds",
        type=int,
        default=None,
        help="rounds of the phases, alternating which of raw and connector goes first "
        "(throughput: the median ratio of the rounds with its spread; default 5, --quick 1)",
    )
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=None,
        help="the idle baseline's length (default 10; --quick 3)",
    )
    parser.add_argument(
        "--probe-gap-us",
        type=float,
        default=100.0,
        help="pause of the probe between GETs (0: back to back)",
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=-20,
        help="nice value of every thread of our redis-server and probe (0: leave them be)",
    )
    parser.add_argument(
        "--own-core",
        action="store_true",
        help="redis-server on a CPU of its own, the probe and Spark on the "
        "others (a production layout; SLOWLOG then counts no "
        "preemption by Spark)",
    )
    parser.add_argument(
        "--slowlog-us",
        type=int,
        default=100,
        help="SLOWLOG threshold during the phases, in microseconds",
    )
    parser.add_argument(
        "--sizes", default=None, help="members per call to sweep (default 500,1000,2000,4000,8000)"
    )
    parser.add_argument("--calls", type=int, default=20, help="sweep calls per script and size")
    parser.add_argument(
        "--phases", default=",".join(PHASES), help=f"some of {','.join(PHASES)} (default: all)"
    )
    args = parser.parse_args(argv)
    args.phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    if not args.phases <= set(PHASES):
        parser.error(f"--phases: not phases: {sorted(args.phases - set(PHASES))}")
    args.members = args.members or (50_000 if args.quick else 1_000_000)
    args.repeat = args.repeat or (1 if args.quick else pairs.MIN_ROUNDS)
    args.idle_seconds = args.idle_seconds or (3.0 if args.quick else 10.0)
    args.sizes = [
        int(s)
        for s in (
            args.sizes or ("1000,2000,4000" if args.quick else "500,1000,2000,4000,8000")
        ).split(",")
    ]
    return args


@contextmanager
def laboratory(args: argparse.Namespace, params: dict[str, Any]) -> Iterator[Lab]:
    """Our redis-server (a free 127.0.0.1 port), the probe process and the SparkSession;
    all stopped at the end."""
    with ExitStack() as stack:
        server = start_binary()
        stack.callback(server.stop)
        params["cpus"] = pairs.layout(server.process.pid if server.process else None, args.own_core)
        probe = Probe(server, args.probe_gap_us)
        stack.callback(probe.close)
        params["nice"] = prioritize(
            {
                "redis-server": server.process.pid if server.process else None,
                "probe": probe.process.pid,
            },
            args.nice,
        )
        spark = spark_session("bench-neighbour", **{"spark.ui.showConsoleProgress": "false"})
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        lab = Lab(server, spark, probe, args.slowlog_us)
        lab.cpus = params["cpus"]
        yield lab


def run_all(
    lab: Lab, args: argparse.Namespace
) -> tuple[dict[str, float], float, dict[str, dict[int, list[int]]]]:
    """Warm-up, the idle baseline, the phases, memory, the sweep; returns (memory figures,
    bytes per parked element, sweep table)."""
    n = args.members
    lab.admin.set(PROBE_KEY, "ok")
    warm_up(lab, min(n, 20_000))
    lab.admin.set(PROBE_KEY, "ok")
    lab.log_slow_calls()
    idle(lab, args.idle_seconds)
    extra = run_phases(lab, n, args.repeat, args.phases)
    print("  phases done; memory and per-call sweep", flush=True)
    memory = bench_memory(lab, n) if "memory" in args.phases else {}
    table = bench_sweep(lab, n, args.sizes, args.calls) if "sweep" in args.phases else {}
    return memory, extra["park_bytes"] / n, table


def main(argv: list[str] | None = None) -> int:
    """Run everything, print the tables, write the JSON; 1 when a target is missed."""
    args = parse_args(argv)
    params: dict[str, Any] = {
        "members": args.members,
        "repeat": args.repeat,
        "probe_gap_us": args.probe_gap_us,
        "slowlog_us": args.slowlog_us,
        "items_per_call": bounds.ITEMS_PER_CALL,
        "moves_per_call": bounds.MOVES_PER_CALL,
        "master": "local[2]",
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
    }
    print(f"load average at start: {params['loadavg_start']}", flush=True)
    started = time.perf_counter()
    with laboratory(args, params) as lab:
        memory, park_bytes, table = run_all(lab, args)
    advice = advise(table)
    params.update(loadavg_end=os.getloadavg(), seconds=time.perf_counter() - started)
    report = build_report(
        "bench_neighbour_quick" if args.quick else "bench_neighbour",
        lab,
        memory,
        park_bytes,
        table,
        advice,
        params,
    )
    print_summary(lab.phases)
    print_sweep(table, advice)
    report.show()
    print(
        f"load average: start {params['loadavg_start']}, end {params['loadavg_end']}; "
        f"{params['seconds']:.0f} s in all"
    )
    return 0 if all(r.ok is not False for r in report.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
