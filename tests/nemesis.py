"""The nemesis soak: hours (or minutes) of mixed faults against a stream of a sharded Ick,
then a check that nothing acknowledged was lost (tests/nemesis_check.py).

    python3 tests/nemesis.py --minutes 30 --seed 1 --out DIR [--dehydrator]

- A durable redis-server (AOF, ``appendfsync always``) on a free loopback port, reached by
  producers and consumer through a FaultProxy (tests/fault_proxy.py), as through a load
  balancer. A second, plain redis-server that no fault touches holds the records.
- Producers (threads) add members with scores = time, ~``--rate`` adds/s, recording each
  add Redis acknowledged with the shard's last reservation number read in the same MULTI
  (``DIR/adds.jsonl``).
- A consumer: a child process (its own process group) running
  ``readStream.format("ick") -> foreachBatch`` from a checkpoint on ``local[2,4]`` (a
  killed Python worker is a task retry); the sink records each call (batch id, rows,
  start, end) in the record Redis before it returns. A failed query is restarted in the
  same JVM; a dead child is restarted from the same checkpoint by a supervisor; both
  record the cause (``DIR/restarts.jsonl``).
- A nemesis (seeded) draws a fault every ``--every`` seconds: Redis kill -9 and restart,
  Redis SIGSTOP, proxy reset of every connection, proxy blackhole (half-open), kill -9 of
  the consumer's driver, of its JVM, of a Python worker mid-read, of its stream-source
  runner, and SIGSTOP of the whole consumer (``DIR/faults.jsonl``).
- ``--sentinel``: the Ick lives on a Sentinel set instead (pyspark_ick.testing.start_sentinels:
  a primary, 2 replicas, 3 sentinels, with that function's server settings: nothing
  persisted) and producers and consumer use its ``redis+sentinel://`` URL. Acknowledged
  means replicated there: each add's MULTI/EXEC and a WAIT 1 go on one connection of the
  producer's client (pyspark_ick.replication.write), and the record says whether a replica
  confirmed it (``kept``; the checker counts lost only among kept adds). Its faults: kill -9
  of the primary (restarted a few seconds after Sentinel promoted a replica: it rejoins as a
  replica), SENTINEL FAILOVER, SIGSTOP of the primary 0.5-8 s (a failover when longer than
  the sentinels' 1 s down-after), and the consumer's kinds; each failover records how long
  until the primary the sentinels name answered a write again.
- ``--dehydrator``: a parker parks elements with delays of 0-2 s; the consumer's second
  query, ``readStream.format("dehydrator")``, writes each released element into the Ick
  (``df.write.format("ick")``) before recording it; checked: every acknowledged park is
  released after its ack and its element reaches the Ick's deliveries.
- At the end: the nemesis stops, every fault heals, producers stop, the consumer drains
  (deadline), stops, and the checker runs; a summary table is printed and written with
  every check to ``DIR/summary.json``.

Bounded (every loop has a deadline), seeded (the fault schedule and the members), loopback
only, never port 6379 or 26379, and it signals only processes it started, by PID (the
consumer's process group is its own). Not implemented: a Redis Cluster with failover and slot
migration (``--cluster``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from redis_faults import kill, restart, wait_promoted

HERE = Path(__file__).resolve().parent
ICK = "soak"
DEHYDRATOR = "soakdh"
ARM_ENV = "NEMESIS_WORKER_ARM"


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


# --- settings and records -----------------------------------------------------------------


@dataclass
class Settings:
    """What one soak does; ``minutes`` is the faulty phase, the drain comes after."""

    minutes: float = 30.0
    seed: int = 1
    out: str = "nemesis-out"
    shards: int = 4
    rate: float = 30.0  # acknowledged adds per second, all producers together
    producers: int = 2
    members: int = 400
    every: tuple[float, float] = (5.0, 15.0)  # seconds between faults
    drain_timeout: float = 180.0
    max_per_trigger: int = 300
    trigger: str = "500 milliseconds"
    retry_timeout: str = "60s"
    consumer_id: str = ""  # "" = a random one per query start (takeovers after each crash)
    dehydrator: bool = False
    sentinel: bool = False  # the Ick on a Sentinel set (failovers), not behind the proxy
    wait_timeout: float = 2.0  # --sentinel: seconds each add waits for a replica (WAIT)
    wait_replicas: int = 1  # --sentinel: replicas each add waits for (2: every replica)
    durable: bool = False  # --sentinel: data nodes with appendonly (a killed one keeps data)
    kinds: tuple[str, ...] = ()  # faults to draw from (default: every kind of the mode)
    grace: float = 20.0  # seconds after a fault still excused from the progress check
    restart_grace: float = 45.0  # the same after a fault that restarts the consumer


class Journal:
    """Appends JSON lines to a file, flushed at once and fsynced, from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("a")
        self._lock = threading.Lock()
        self.records: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any], sync: bool = True) -> None:
        line = json.dumps(record) + "\n"
        with self._lock:
            self.records.append(record)
            self._file.write(line)
            self._file.flush()
            if sync:
                os.fsync(self._file.fileno())

    def sync(self) -> None:
        with self._lock:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path``'s content at once (a reader never sees it half written)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def die_if_armed(arm: Path) -> None:
    """In the consumer's foreachBatch, after the batch was recorded: when the nemesis
    armed ``arm`` with a pid (the driver's own, or its JVM's), kill -9 it here."""
    try:
        target = int(arm.read_text())
        os.unlink(arm)  # the one who removes it acts; a nemesis that gave up removed it
    except (OSError, ValueError):
        return
    os.kill(target, signal.SIGKILL)


def stamp() -> dict[str, float]:
    """Monotonic and wall time now."""
    return {"mono": time.monotonic(), "wall": time.time()}


# --- processes (only ours, by PID) --------------------------------------------------------


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


def signal_pid(pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False when it is gone."""
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid`` (a consumer child's own); False if gone."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


# --- producers ----------------------------------------------------------------------------


class _Queued:
    """Stands for a redis-py pipeline: collects the commands ``queue_add`` puts on it."""

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any, **_: Any) -> None:
        self.commands.append(args)


def add_replicated(client: Any, ick: str, shards: int, member: str, score: float) -> Any:
    """``faults_support.add_recorded`` that waits for a replica: its MULTI (the add and the
    read of the shard's last reservation number) and then WAIT run on one connection of
    ``client`` (``pyspark_ick.replication.write``; ``client`` configured for 1 replica).
    Returns the Add, ``kept`` False when EXEC answered but no replica confirmed it (WAIT
    timed out, or the connection was lost before WAIT); raises when the add was not
    acknowledged. A write the connector ran again (a new connection, a demoted primary)
    is recorded as its last run."""
    from faults_support import Add

    from pyspark_ick import IckConnectionError, replication
    from pyspark_ick.ick import queue_add
    from pyspark_ick.keys import IckKeys, shard_names, shard_of

    shard = shard_of(member, shards)
    keys = IckKeys(shard_names(ick, shards)[shard])
    queued = _Queued()
    queue_add(queued, keys, [member], [score])
    done: list[Add] = []

    def transaction(c: Any) -> Add:
        done.clear()
        try:
            c.execute_command("MULTI")
            for command in queued.commands:
                c.execute_command(*command)
            c.execute_command("HGET", keys.rlog, "reserved")
            replies = c.execute_command("EXEC")
        except BaseException:
            with contextlib.suppress(Exception):  # a MULTI left open would nest the next
                c.connection.disconnect()
            raise
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        done.append(Add(member, score, shard, int(replies[-1] or 0), time.monotonic()))
        return done[-1]

    try:
        return replication.write(client, transaction, what="nemesis add")
    except IckConnectionError:  # ReplicationError, or lost before WAIT: ran, not kept
        if not done:
            raise
        return done[-1]._replace(kept=False)


def make_producer(client: Any, journal: Journal, settings: Settings, index: int) -> Any:
    """A faults_support.Loop adding one member a tick (``hot`` one time in ten, else one
    of ``m0..``), recording each acknowledged add in ``journal`` (``--sentinel``: with
    ``kept``, add_replicated)."""
    from faults_support import Loop, add_recorded

    from pyspark_ick import scripts

    class Producer(Loop):
        def __init__(self) -> None:
            super().__init__(f"producer-{index}", settings.producers / settings.rate)
            self.rng = random.Random(settings.seed * 1000 + index)
            self.last = 0.0
            self.acked = 0

        def tick(self) -> None:
            n = self.rng.randrange(settings.members)
            member = "hot" if self.rng.random() < 0.1 else f"m{n}"
            self.last = score = max(time.time(), self.last + 1e-6)
            adder = add_replicated if settings.sentinel else add_recorded
            add = adder(client, ICK, settings.shards, member, score)
            journal.write(add._asdict(), sync=False)
            self.acked += 1

        def recover(self) -> None:
            """The server may be new (restarted): load ickadd again, or pause."""
            try:
                client.script_load(scripts.source("ickadd"))
            except Exception:  # noqa: BLE001 - still away: the next tick tries again
                time.sleep(0.2)

    return Producer()


def make_parker(dehydrator: Any, journal: Journal, settings: Settings) -> Any:
    """A Loop parking one new id ``d<n>`` a tick (delay 0-2 s), ~rate/6 a second,
    recording each acknowledged park (id, delay, ack time)."""
    from faults_support import Loop

    class Parker(Loop):
        def __init__(self) -> None:
            super().__init__("parker", 6.0 / settings.rate)
            self.rng = random.Random(settings.seed * 1000 + 999)
            self.next = 0

        def tick(self) -> None:
            ident, delay = f"d{self.next}", self.rng.randrange(0, 2000)
            self.next += 1
            sent = time.monotonic()
            dehydrator.park([ident], [f"dh:{ident}"], [delay])
            journal.write(
                {"id": ident, "delay_ms": delay, "sent": sent, "at": time.monotonic()}, sync=False
            )

    return Parker()


# --- the consumer child -------------------------------------------------------------------


def child_main(cfg: dict[str, Any]) -> int:
    """The consumer: stream query (or two) into the recording sink until the stop file
    appears; a failed query restarts in this JVM (at most 5 times without a batch in
    between), anything else ends the process (the supervisor restarts it)."""
    import redis

    from pyspark_ick.testing import spark_session

    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p
    )
    os.environ["PYSPARK_ICK_HOOK"] = "nemesis:worker_hook"
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
    progress = [0]

    def ick_sink(df: Any, batch_id: int) -> None:
        start = time.monotonic()
        rows = sorted([r.member, r.score, r.shard, r.reservation] for r in df.collect())
        record.rpush(
            "deliveries",
            json.dumps(
                {
                    "batch": batch_id,
                    "rows": rows,
                    "start": start,
                    "end": time.monotonic(),
                    "pid": os.getpid(),
                }
            ),
        )
        progress[0] += 1
        die_if_armed(Path(cfg["sink_arm"]))

    def dh_sink(df: Any, batch_id: int) -> None:
        start = time.monotonic()
        rows = df.collect()
        if rows:  # rehydrate: each released element becomes a member of the Ick
            (
                df.sparkSession.createDataFrame(
                    [(r.element, r.due.timestamp()) for r in rows], "member string, score double"
                )
                .write.format("ick")
                .mode("append")
                .option("redis.url", cfg["url"])
                .option("ick", ICK)
                .option("shards", cfg["shards"])
                .option("redis.retryTimeout", cfg["retry_timeout"])
                .save()
            )
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
        streams = [
            ("ick", {"ick": ICK, "maxMembersPerTrigger": cfg["max_per_trigger"]}, ick_sink, "ick")
        ]
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
        return queries

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
    failures = 0
    while True:
        queries = start()
        event("started")
        seen = progress[0]
        while True:
            write_atomically(beat, str(time.monotonic()))
            if progress[0] != seen:
                failures, seen = 0, progress[0]
            if stop_file.exists():
                for q in queries:
                    q.stop()
                event("stopped")
                return 0
            dead = [q for q in queries if not q.isActive]
            if dead:
                break
            time.sleep(0.25)
        exc = dead[0].exception()
        cause = str(exc) if exc is not None else "stopped without an exception"
        event("query_failed", cause=cause[:4000])
        print(f"NEMESIS-QUERY-FAILED: {cause.splitlines()[0] if cause else ''}", flush=True)
        for q in queries:
            with contextlib.suppress(Exception):
                q.stop()
        failures += 1
        if failures > 5:
            print("NEMESIS-EXIT: 6 query failures in a row without a batch", flush=True)
            return 3


# --- supervisor ---------------------------------------------------------------------------


class Supervisor:
    """Runs the consumer child; restarts it (same checkpoint) whenever it dies, recording
    the cause; kills a child that stopped beating for ``hung_after`` seconds."""

    def __init__(
        self,
        settings: Settings,
        cfg: dict[str, Any],
        out: Path,
        restarts: Journal,
        hung_after: float = 120.0,
    ) -> None:
        self.settings, self.cfg, self.out = settings, cfg, out
        self.restarts, self.hung_after = restarts, hung_after
        self.child: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.lock = threading.Lock()
        self.paused_until = 0.0  # the nemesis SIGSTOPped the consumer: not hung
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="supervisor")

    def start(self) -> Supervisor:
        self._thread.start()
        return self

    def pid(self) -> int | None:
        """The live child's pid (also its process group id), or None."""
        with self.lock:
            child = self.child
        return child.pid if child is not None and child.poll() is None else None

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.starts += 1
        log = (self.out / f"child-{self.starts}.log").open("wb")
        write_atomically(Path(self.cfg["heartbeat"]), str(time.monotonic()))
        env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        child = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(self.cfg)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        return child

    def _run(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                self.child = child = self._spawn()
            started = time.monotonic()
            hung = False
            while child.poll() is None and not self._stop.wait(0.5):
                if self._beat_age() > self.hung_after and time.monotonic() > self.paused_until:
                    hung = True
                    signal_group(child.pid, signal.SIGKILL)
                    break
            if self._stop.is_set() and child.poll() is None:
                return  # finish() stops it
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(30)
            self.reap(child.pid)
            self.restarts.write(
                {
                    "level": "process",
                    "pid": child.pid,
                    "code": child.returncode,
                    "cause": "hung (no heartbeat)" if hung else self.cause(child),
                    "ran": round(time.monotonic() - started, 1),
                    "at": time.monotonic(),
                    "wall": time.time(),
                }
            )
            self._stop.wait(1.0)

    def _beat_age(self) -> float:
        """Seconds since the child's last heartbeat (0 when the file cannot be read)."""
        try:
            return time.monotonic() - float(Path(self.cfg["heartbeat"]).read_text())
        except (OSError, ValueError):
            return 0.0

    def cause(self, child: subprocess.Popen[bytes]) -> str:
        """Why the child ended: its signal, else its last NEMESIS-EXIT or error line."""
        code = child.returncode
        if code is not None and code < 0:
            return f"killed by {signal.Signals(-code).name}"
        try:
            lines = (self.out / f"child-{self.starts}.log").read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        for line in reversed(lines):
            if line.startswith("NEMESIS-EXIT"):
                return line.split(":", 1)[1].strip()[:300]
        errors = [x for x in lines if "Error" in x or "Exception" in x]
        return f"exit {code}: " + (errors[-1].strip()[:300] if errors else "no error line")

    def reap(self, pgid: int) -> None:
        """Kill what is left of a child's process group (a JVM whose driver died)."""
        signal_group(pgid, signal.SIGCONT)
        signal_group(pgid, signal.SIGKILL)

    def finish(self, timeout: float = 60.0) -> None:
        """Ask the child to stop its queries and exit, then kill what is left."""
        self._stop.set()
        Path(self.cfg["stop_file"]).write_text("stop")
        self._thread.join(timeout)
        with self.lock:
            child = self.child
        if child is not None:
            signal_group(child.pid, signal.SIGCONT)
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            self.reap(child.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(10)


# --- the nemesis --------------------------------------------------------------------------

CONSUMER_KINDS = ("kill_driver", "kill_jvm", "kill_worker", "kill_source_runner", "stop_consumer")
KINDS = ("redis_kill", "redis_stop", "proxy_reset", "proxy_blackhole", *CONSUMER_KINDS)
FAILOVERS = ("sentinel_kill", "sentinel_failover", "sentinel_stop")
SENTINEL_KINDS = (*FAILOVERS, *CONSUMER_KINDS)  # --sentinel (no proxy: Sentinel hands
# out the primary's own address)
ALL_KINDS = (*KINDS, *FAILOVERS)
RESTARTING = {
    "redis_kill",
    "kill_driver",
    "kill_jvm",
    "kill_worker",
    "kill_source_runner",
    "stop_consumer",
}  # the consumer needs a restart (or a takeover) to go on
LONG_GRACE = RESTARTING | set(FAILOVERS)  # a failover: the readers ride it out, slowly


class Nemesis:
    """Draws a fault every ``settings.every`` seconds (seeded) until ``stop()``; records
    each with its start and end (monotonic and wall) in ``journal``."""

    def __init__(
        self,
        settings: Settings,
        server: Any,
        proxy: Any,
        supervisor: Supervisor,
        journal: Journal,
        arm_file: Path,
        sentinels: Any = None,
    ) -> None:
        self.settings, self.server, self.proxy = settings, server, proxy
        self.sentinels = sentinels  # --sentinel: a testing.SentinelSet (server, proxy None)
        self.supervisor, self.journal, self.arm_file = supervisor, journal, arm_file
        self.sink_arm = arm_file.with_name("sink.arm")
        self.schedule = random.Random(settings.seed)  # which fault, when: hits aside
        self.rng = random.Random(settings.seed + 1)  # how long each lasts
        self.kinds = settings.kinds or (SENTINEL_KINDS if sentinels is not None else KINDS)
        self.redis_stopped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="nemesis")
        self.errors: list[str] = []

    def start(self) -> Nemesis:
        self._thread.start()
        return self

    def stop(self, timeout: float = 90.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.schedule.uniform(*self.settings.every)):
            kind = self.schedule.choice(self.kinds)
            began = stamp()
            try:
                detail = getattr(self, kind)()
            except Exception as exc:  # noqa: BLE001 - recorded; the soak goes on
                detail = {"hit": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
                self.errors.append(detail["error"])
            ended = stamp()
            self.journal.write(
                {
                    "kind": kind,
                    "start": began["mono"],
                    "end": ended["mono"],
                    "wall_start": began["wall"],
                    "wall_end": ended["wall"],
                    **detail,
                }
            )

    def _hold(self, seconds: float) -> None:
        """Wait ``seconds``, less when the soak ends."""
        self._stop.wait(seconds)

    # Each fault returns a dict of details; "hit" False: there was nothing to hit.

    def redis_kill(self) -> dict[str, Any]:
        kill(self.server)
        down = self.rng.uniform(0.5, 3.0)
        self._hold(down)
        restart(self.server, timeout=60)
        return {"hit": True, "down": round(down, 2)}

    def redis_stop(self) -> dict[str, Any]:
        seconds = self.rng.uniform(2, 20)
        self.redis_stopped = signal_pid(self.server.process.pid, signal.SIGSTOP)
        try:
            self._hold(seconds)
        finally:
            signal_pid(self.server.process.pid, signal.SIGCONT)
            self.redis_stopped = False
        return {"hit": True, "seconds": round(seconds, 2)}

    def proxy_reset(self) -> dict[str, Any]:
        return {"hit": True, "connections": self.proxy.reset_all()}

    def proxy_blackhole(self) -> dict[str, Any]:
        seconds = self.rng.uniform(5, 25)
        self.proxy.blackhole(seconds)
        self._hold(seconds)
        self.proxy.heal()
        return {"hit": True, "seconds": round(seconds, 2)}

    def _consumer(self, marker: str) -> tuple[int | None, int | None]:
        """(child pid, pid of its first descendant whose command line has ``marker``)."""
        pid = self.supervisor.pid()
        if pid is None:
            return None, None
        found = [p for p, cmd in descendants(pid).items() if marker in cmd]
        return pid, min(found, default=None)

    def _kill(self, pid: int | None) -> dict[str, Any]:
        """kill -9 ``pid`` of the consumer: half the time inside foreachBatch, once a batch
        is recorded (so the restart replays it), else at once."""
        if pid is None:
            return {"hit": False}
        if self.rng.random() < 0.5:
            write_atomically(self.sink_arm, str(pid))
            deadline = time.monotonic() + 20
            while (
                self.sink_arm.exists() and time.monotonic() < deadline and not self._stop.is_set()
            ):
                time.sleep(0.05)
            try:
                self.sink_arm.unlink()  # no batch came: kill it here and now
            except FileNotFoundError:
                return {"hit": True, "pid": pid, "in_sink": True}
        return {"hit": signal_pid(pid, signal.SIGKILL), "pid": pid, "in_sink": False}

    def kill_driver(self) -> dict[str, Any]:
        return self._kill(self.supervisor.pid())

    def kill_jvm(self) -> dict[str, Any]:
        return self._kill(self._consumer("java")[1])

    def kill_source_runner(self) -> dict[str, Any]:
        _, runner = self._consumer("python_streaming_source_runner")
        return {"hit": runner is not None and signal_pid(runner, signal.SIGKILL), "pid": runner}

    def kill_worker(self) -> dict[str, Any]:
        """Arm worker_hook: the next Python worker at ``during_read`` kills itself (-9);
        disarmed when no read comes within 20 s."""
        if self.supervisor.pid() is None:
            return {"hit": False}
        self.arm_file.write_text("armed")
        deadline = time.monotonic() + 20
        while self.arm_file.exists() and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(0.05)
        try:
            self.arm_file.unlink()
            return {"hit": False}
        except FileNotFoundError:
            return {"hit": True}

    def stop_consumer(self) -> dict[str, Any]:
        pid = self.supervisor.pid()
        if pid is None:
            return {"hit": False}
        seconds = self.rng.uniform(5, 20)
        self.supervisor.paused_until = time.monotonic() + seconds + 60
        signal_group(pid, signal.SIGSTOP)
        try:
            self._hold(seconds)
        finally:
            signal_group(pid, signal.SIGCONT)
        return {"hit": True, "seconds": round(seconds, 2), "pid": pid}

    # --sentinel: failovers. Each records ``answered_after``: seconds from the fault until
    # the primary the sentinels name answered a write; ``promoted``: another node is primary.

    def _answered(self, began: float, old: int | None = None, timeout: float = 90.0) -> float:
        """Seconds from ``began`` until the primary the sentinels name (another than port
        ``old`` if given) takes a write (SET nemesis:probe)."""
        import redis

        from pyspark_ick import IckError

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError, IckError, StopIteration, OSError):
                port = self.sentinels.primary_port()
                if port != old:
                    node = self.sentinels.by_port(port)
                    with node.client(socket_timeout=0.5, socket_connect_timeout=0.5) as c:
                        c.set("nemesis:probe", time.time())
                    return round(time.monotonic() - began, 2)
            time.sleep(0.02)
        raise TimeoutError(f"no primary took a write within {timeout:.0f} s")

    def _revive(self, node: Any) -> None:
        """Restart a killed data node once the sentinels name another primary: it has no
        data (nothing persisted), so it must come back as a replica, never as the primary;
        then until the set is healthy (it replicates the primary)."""
        from pyspark_ick.testing import wait_until

        wait_until(
            lambda: self.sentinels.primary_port() != node.port,
            timeout=90,
            interval=0.1,
            what=f"a primary other than the dead {node.port}",
        )
        restart(node, timeout=60)
        self.sentinels.wait_healthy(90)

    def sentinel_kill(self) -> dict[str, Any]:
        """kill -9 of the primary; Sentinel promotes a replica; the old one restarted
        2-6 s after the promotion rejoins as a replica."""
        old = self.sentinels.primary()
        began = time.monotonic()
        kill(old)
        answered = self._answered(began, old.port)
        new = wait_promoted(self.sentinels, old, 60)
        down = self.rng.uniform(2, 6)
        self._hold(down)
        self._revive(old)
        return {
            "hit": True,
            "promoted": True,
            "old": old.port,
            "new": new.port,
            "answered_after": answered,
            "down_after_promotion": round(down, 2),
        }

    def sentinel_failover(self) -> dict[str, Any]:
        """SENTINEL FAILOVER (graceful): a replica is promoted, the old primary demoted."""
        old = self.sentinels.primary()
        sentinel = next(x for x in self.sentinels.sentinels if x.alive)
        began = time.monotonic()
        with sentinel.client(socket_timeout=5) as c:
            c.execute_command("SENTINEL", "FAILOVER", self.sentinels.service)
        answered = self._answered(began, old.port)
        new = wait_promoted(self.sentinels, old, 60)
        self.sentinels.wait_healthy(90)  # the old primary replicates the new one
        return {
            "hit": True,
            "promoted": True,
            "old": old.port,
            "new": new.port,
            "answered_after": answered,
        }

    def sentinel_stop(self) -> dict[str, Any]:
        """SIGSTOP of the primary for 0.5-8 s: Sentinel fails over when it is down longer
        than down-after (1 s), and turns the old primary into a replica once it is back."""
        old = self.sentinels.primary()
        assert old.process is not None
        seconds = self.rng.uniform(0.5, 8)
        began = time.monotonic()
        signal_pid(old.process.pid, signal.SIGSTOP)
        try:
            self._hold(seconds)
        finally:
            signal_pid(old.process.pid, signal.SIGCONT)
        answered = self._answered(began)
        self.sentinels.wait_healthy(90)
        new = self.sentinels.primary_port()
        return {
            "hit": True,
            "promoted": new != old.port,
            "old": old.port,
            "new": new,
            "seconds": round(seconds, 2),
            "answered_after": answered,
        }

    def heal(self) -> None:
        """End every fault: Redis running and continued, proxy healed (--sentinel: every
        data node running and continued, the set healthy), consumer continued, no worker
        armed."""
        if self.sentinels is not None:
            for node in self.sentinels.servers:
                if node.alive:
                    signal_pid(node.process.pid, signal.SIGCONT)
            for node in self.sentinels.servers:
                if not node.alive:
                    self._revive(node)
            self.sentinels.wait_healthy(120)
        else:
            if self.server.process is not None and self.server.process.poll() is None:
                signal_pid(self.server.process.pid, signal.SIGCONT)
            if not self.server.alive:
                restart(self.server, timeout=60)
            self.proxy.heal()
        pid = self.supervisor.pid()
        if pid is not None:
            signal_group(pid, signal.SIGCONT)
        for arm in (self.arm_file, self.sink_arm):
            with contextlib.suppress(FileNotFoundError):
                arm.unlink()


# --- the soak -----------------------------------------------------------------------------


@dataclass
class Run:
    """What a soak started, for cleanup: every stop function, latest first."""

    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def on_exit(self, fn: Callable[[], None]) -> None:
        self.cleanups.append(fn)

    def close(self) -> None:
        while self.cleanups:
            fn = self.cleanups.pop()
            with contextlib.suppress(Exception):
                fn()


def classify(cause: str) -> str:
    """A short name for a restart cause (the raw text stays in restarts.jsonl)."""
    rules = [
        ("does it speak only TLS", "reset taken for TLS (connect)"),
        ("did not answer within redis.retryTimeout", "retryTimeout exceeded"),
        ("lost its lease", "lease lost"),
        ("is consumed by another query", "lease busy"),
        ("EOFException", "EOFException (worker died)"),
        ("XXKST", "XXKST (no cause message: the source runner died)"),
        ("killed by SIGKILL", "killed -9"),
        ("hung", "hung"),
        ("Py4J", "py4j (JVM gone)"),
        ("Connection refused", "py4j (JVM gone)"),
        ("Answer from Java side is empty", "py4j (JVM gone)"),
        ("JAVA_GATEWAY_EXITED", "JVM died while starting"),
    ]
    for needle, name in rules:
        if needle in cause:
            return name
    return cause.splitlines()[0][:100] if cause else "unknown"


def soak(settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run one soak; returns the summary (also in ``out/summary.json``)."""
    import redis
    from faults_support import drained

    from pyspark_ick import Dehydrator
    from pyspark_ick.testing import start_binary, wait_until

    out = Path(settings.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.jsonl"):
        old.unlink()
    run = Run()
    atexit.register(run.close)
    origin = time.monotonic()
    try:
        record_server = start_binary()
        run.on_exit(record_server.stop)
        assert record_server.port not in (6379, 26379)
        target = start_target(settings, run)
        server, proxy, sentinels, direct = (
            target.server,
            target.proxy,
            target.sentinels,
            target.direct,
        )
        record = record_server.client()
        journals = {
            name: Journal(out / f"{name}.jsonl") for name in ("adds", "faults", "restarts", "parks")
        }
        for j in journals.values():
            run.on_exit(j.close)
        arm_file = out / "worker.arm"
        cfg = {
            "url": target.url,
            "shards": settings.shards,
            "record_port": record_server.port,
            "checkpoint": str(out / "checkpoint"),
            "arm_file": str(arm_file),
            "sink_arm": str(out / "sink.arm"),
            "stop_file": str(out / "stop"),
            "heartbeat": str(out / "heartbeat"),
            "max_per_trigger": settings.max_per_trigger,
            "trigger": settings.trigger,
            "retry_timeout": settings.retry_timeout,
            "consumer_id": settings.consumer_id,
            "dehydrator": settings.dehydrator,
        }
        for stale in ("stop", "heartbeat", "worker.arm", "sink.arm"):
            with contextlib.suppress(FileNotFoundError):
                (out / stale).unlink()
        import shutil

        for name in ("checkpoint-ick", "checkpoint-dh"):
            shutil.rmtree(out / name, ignore_errors=True)

        clients = [target.client() for _ in range(settings.producers + 1)]
        for c in clients:
            run.on_exit(c.close)
        producers = [
            make_producer(clients[i], journals["adds"], settings, i)
            for i in range(settings.producers)
        ]
        loops = list(producers)
        dehydrator = None
        if settings.dehydrator:
            dehydrator = Dehydrator(clients[-1], DEHYDRATOR, settings.shards)
            loops.append(make_parker(dehydrator, journals["parks"], settings))
        supervisor = Supervisor(settings, cfg, out, journals["restarts"])
        run.on_exit(lambda: supervisor.finish(timeout=20))
        nemesis = Nemesis(
            settings, server, proxy, supervisor, journals["faults"], arm_file, sentinels
        )
        run.on_exit(nemesis.heal)
        run.on_exit(lambda: nemesis.stop(timeout=30))

        log(
            f"soak: {target.where}, records on {record_server.port}, "
            f"{settings.minutes} min, seed {settings.seed}, out {out}"
        )
        supervisor.start()
        for loop in loops:
            loop.start()
            run.on_exit(lambda loop=loop: loop.stop())
        # Faults start once the consumer delivered its first batch (a cold JVM start).
        wait_until(
            lambda: record.llen("deliveries") > 0,
            timeout=180,
            interval=0.5,
            what="the consumer's first batch",
        )
        started = time.monotonic()
        log(f"soak: first batch after {started - origin:.1f} s; faults for {settings.minutes} min")
        nemesis.start()
        end = started + settings.minutes * 60
        while time.monotonic() < end:
            time.sleep(min(10.0, max(0.0, end - time.monotonic())))
            log(
                f"  t+{time.monotonic() - started:6.0f}s adds {len(journals['adds'].records)}"
                f" batches {record.llen('deliveries')} faults "
                f"{len(journals['faults'].records)} restarts "
                f"{len(journals['restarts'].records)}"
            )
        nemesis.stop()
        nemesis.heal()
        for loop in loops:
            loop.stop()
        faults_end = time.monotonic()
        log(f"soak: faults over; draining (at most {settings.drain_timeout:.0f} s)")

        def is_drained() -> bool:
            if not drained(direct, ICK, settings.shards):
                return False
            return dehydrator is None or not any(dehydrator_left(direct, settings))

        drain_deadline = time.monotonic() + settings.drain_timeout
        emptied = False
        while time.monotonic() < drain_deadline:
            try:
                if is_drained():
                    emptied = True
                    break
            except redis.RedisError:
                pass
            time.sleep(0.5)
        # The dehydrator's last rehydrated members may land in the Ick just before the
        # dehydrator empties: one more look at the Ick.
        if emptied and dehydrator is not None:
            with contextlib.suppress(TimeoutError):
                wait_until(
                    lambda: drained(direct, ICK, settings.shards),
                    timeout=60,
                    interval=0.5,
                    what="the Ick drained",
                )
        drain_seconds = time.monotonic() - faults_end
        supervisor.finish()
        until = time.monotonic()
        stuck = stuck_state(direct, settings, dehydrator is not None)
        for j in journals.values():
            j.sync()
        events = [json.loads(x) for x in record.lrange("events", 0, -1)]
        deliveries = [json.loads(x) for x in record.lrange("deliveries", 0, -1)]
        dh = [json.loads(x) for x in record.lrange("dh_deliveries", 0, -1)]
        write_jsonl(out / "deliveries.jsonl", deliveries)
        write_jsonl(out / "dh_deliveries.jsonl", dh)
        write_jsonl(out / "events.jsonl", events)
        summary = summarize(
            settings,
            journals,
            deliveries,
            dh,
            events,
            stuck,
            origin=started,
            until=until,
            drain_seconds=drain_seconds,
            drained=emptied,
            proxy_resets=proxy.resets if proxy is not None else 0,
            nemesis_errors=nemesis.errors,
            servers=target.servers,
            producer_errors=sum(len(p.errors) for p in loops),
            producer_error_examples=sorted({e[:200] for p in loops for e in p.errors})[:5],
        )
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        log(table(summary))
        return summary
    finally:
        run.close()
        atexit.unregister(run.close)


@dataclass
class Target:
    """Where the soak's Ick lives: a durable server behind the fault proxy, or (--sentinel)
    a Sentinel set; ``client()`` makes a producer's client."""

    url: str
    direct: Any  # a client that no fault touches (the proxy's server; the set's primary)
    client: Callable[[], Any]
    where: str
    servers: str  # the data nodes' settings, for the summary
    server: Any = None
    proxy: Any = None
    sentinels: Any = None


def start_target(settings: Settings, run: Run) -> Target:
    """Start what the Ick lives on (stopped by ``run``'s cleanups)."""
    import redis

    if settings.sentinel:
        from pyspark_ick import connect, replication
        from pyspark_ick.testing import start_sentinels

        sentinels = start_sentinels(
            replicas=2,
            sentinels=3,
            args=(("--appendonly", "yes", "--appendfsync", "always") if settings.durable else ()),
        )
        run.on_exit(sentinels.stop)
        run.on_exit(lambda: keep_logs(sentinels, Path(settings.out).resolve() / "logs"))
        run.on_exit(
            lambda: [
                signal_pid(n.process.pid, signal.SIGCONT) for n in sentinels.servers if n.alive
            ]
        )
        ports = {n.port for n in [*sentinels.servers, *sentinels.sentinels]}
        assert not ports & {6379, 26379}, ports

        def producer_client() -> Any:
            """A client that follows failovers and waits for a replica after each add."""
            client = connect(sentinels.url, timeout=2.0, retry_timeout=20.0)
            replication.configure(client, settings.wait_replicas, settings.wait_timeout)
            return client

        nodes = ", ".join(str(n.port) for n in sentinels.servers)
        watchers = ", ".join(str(n.port) for n in sentinels.sentinels)
        return Target(
            sentinels.url,
            connect(sentinels.url, timeout=10.0),
            producer_client,
            f"Sentinel set: redis {nodes} (primary {sentinels.primary_port()}), "
            f"sentinels {watchers}",
            "start_sentinels: a primary, 2 replicas, 3 sentinels (down-after 1 s, "
            "failover-timeout 2 s); "
            + (
                "appendonly yes, appendfsync always"
                if settings.durable
                else "nothing persisted (no AOF, no RDB: --durable for appendonly)"
            ),
            sentinels=sentinels,
        )
    from fault_proxy import FaultProxy
    from redis_faults import start_durable

    server = start_durable()
    run.on_exit(server.stop)
    run.on_exit(
        lambda: server.process is not None and signal_pid(server.process.pid, signal.SIGCONT)
    )
    assert server.port not in (6379, 26379)
    proxy = FaultProxy(server.port)
    run.on_exit(proxy.close)
    return Target(
        proxy.url,
        redis.Redis(port=server.port, socket_timeout=10),
        lambda: redis.Redis(port=proxy.port, socket_timeout=2, socket_connect_timeout=2),
        f"redis {server.port} behind proxy {proxy.port}",
        "one durable redis-server (appendonly, appendfsync always)",
        server=server,
        proxy=proxy,
    )


def keep_logs(sentinels: Any, into: Path) -> None:
    """Copy the log of every data node and sentinel (its +switch-master, +failover-state,
    +convert-to-slave events) into ``into`` before stop() removes their directories."""
    import shutil

    into.mkdir(parents=True, exist_ok=True)
    for node in [*sentinels.servers, *sentinels.sentinels]:
        for log in Path(node.directory or "/nonexistent").glob("*.log"):
            shutil.copy(log, into / f"{node.port}-{log.name}")


def stuck_state(client: Any, settings: Settings, with_dehydrator: bool) -> dict[str, Any]:
    """What is left in Redis after the drain: members queued or reserved, open
    reservations per shard (and the dehydrator's size)."""
    from pyspark_ick import ShardedIck
    from pyspark_ick.keys import shard_names
    from pyspark_ick.reservations import describe

    stats = ShardedIck(client, ICK, settings.shards).stats()
    state = {
        "members": int(stats["total_size"]),
        "open_reservations": sum(
            describe(client, k)["open_reservations"] for k in shard_names(ICK, settings.shards)
        ),
    }
    if with_dehydrator:
        state["dehydrator"], state["open_claims"] = dehydrator_left(client, settings)
    return state


def dehydrator_left(client: Any, settings: Settings) -> tuple[int, int]:
    """(elements parked, claims not committed) of the soak's dehydrator."""
    from pyspark_ick import Dehydrator

    dh = Dehydrator(client, DEHYDRATOR, settings.shards)
    claims = 0
    for i in range(settings.shards):
        head, committed = dh.claim_log(i).counters()
        claims += head - committed
    return dh.size(), claims


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        f.flush()
        os.fsync(f.fileno())


def check_parks(
    parks: list[dict[str, Any]], dh: list[dict[str, Any]], deliveries: list[dict[str, Any]]
) -> dict[str, Any]:
    """Each acknowledged park released by a dehydrator sink call that ended after the park
    was acknowledged, none begun before the park was sent plus its delay (less 0.1 s of
    clock slack), and its element delivered by the Ick stream."""
    calls: dict[str, list[tuple[float, float]]] = {}
    for d in dh:
        for ident, _element, _shard in d["rows"]:
            calls.setdefault(ident, []).append((d["start"], d["end"]))
    members = {row[0] for d in deliveries for row in d["rows"]}
    lost = [p["id"] for p in parks if not any(end > p["at"] for _, end in calls.get(p["id"], []))]
    early = [
        p["id"]
        for p in parks
        if any(
            start < p["sent"] + p["delay_ms"] / 1000 - 0.1 for start, _ in calls.get(p["id"], [])
        )
    ]
    unrehydrated = [p["id"] for p in parks if f"dh:{p['id']}" not in members]
    return {
        "parks": len(parks),
        "lost": len(lost),
        "lost_examples": lost[:5],
        "early": len(early),
        "early_examples": early[:5],
        "not_in_ick": len(unrehydrated),
        "not_in_ick_examples": unrehydrated[:5],
        "dh_sink_calls": len(dh),
    }


def summarize(
    settings: Settings,
    journals: dict[str, Journal],
    deliveries: list[Any],
    dh: list[Any],
    events: list[Any],
    stuck: dict[str, Any],
    *,
    origin: float,
    until: float,
    **more: Any,
) -> dict[str, Any]:
    """Every check of the run and the counts of the summary table."""
    import nemesis_check as nc

    adds = [nc.add_of(r) for r in journals["adds"].records]
    faults = journals["faults"].records
    grace = {k: settings.restart_grace if k in LONG_GRACE else settings.grace for k in ALL_KINDS}
    windows = nc.windows_of(faults, grace, settings.grace)
    result = nc.check(
        adds,
        [nc.delivery_of(d) for d in deliveries],
        windows,
        until,
        origin,
        failovers=settings.sentinel,
    )
    restarts: Counter[str] = Counter()
    for r in journals["restarts"].records:
        restarts[f"process: {classify(r['cause'])}"] += 1
    for e in events:
        if e["kind"] == "query_failed":
            restarts[f"query: {classify(e['cause'])}"] += 1
    by_kind: dict[str, dict[str, int]] = {}
    for f in faults:
        entry = by_kind.setdefault(f["kind"], {"drawn": 0, "hit": 0})
        entry["drawn"] += 1
        entry["hit"] += bool(f.get("hit"))
        if f.get("in_sink"):
            entry["in_sink"] = entry.get("in_sink", 0) + 1
    summary = {
        "mode": "sentinel" if settings.sentinel else "proxy",
        "wait_replicas": settings.wait_replicas if settings.sentinel else None,
        "settings": {**asdict(settings), "every": list(settings.every)},
        **result,
        "stuck": stuck,
        "ok": result["ok"] and not any(stuck.values()) and more.get("drained", False),
        "faults": len(faults),
        "faults_by_kind": by_kind,
        "restarts_by_cause": dict(restarts.most_common()),
        "origin": origin,
        "until": until,
        "faulty_minutes": round((faults[-1]["end"] - origin) / 60, 2) if faults else 0.0,
        "windows": [list(w) for w in windows],
        **more,
    }
    if settings.sentinel:
        summary["failovers"] = failovers(faults)
    if settings.dehydrator:
        summary["dehydrator"] = check_parks(journals["parks"].records, dh, deliveries)
        d = summary["dehydrator"]
        summary["ok"] = summary["ok"] and not (d["lost"] or d["early"] or d["not_in_ick"])
    return summary


def failovers(faults: list[dict[str, Any]]) -> dict[str, Any]:
    """--sentinel: per failover kind, how many were drawn, how many promoted a replica, and
    the seconds until the primary the sentinels name took a write again (each, and the
    median and max)."""
    found: dict[str, Any] = {}
    for kind in FAILOVERS:
        mine = [f for f in faults if f["kind"] == kind]
        times = sorted(f["answered_after"] for f in mine if "answered_after" in f)
        found[kind] = {
            "drawn": len(mine),
            "hit": sum(bool(f.get("hit")) for f in mine),
            "promoted": sum(bool(f.get("promoted")) for f in mine),
            "answered_after": [f.get("answered_after") for f in mine],
            "median": round(statistics.median(times), 2) if times else None,
            "max": times[-1] if times else None,
        }
    return found


def table(s: dict[str, Any]) -> str:
    """The summary as a plain-text table."""
    stall, out = s["longest_stall"], s["longest_stall_outside_faults"]
    rows = [
        ("result", "OK" if s["ok"] else "FAILED"),
        (
            "mode",
            s.get("mode", "proxy")
            + (
                f", adds wait for {s['wait_replicas']} replica(s)" if s.get("wait_replicas") else ""
            ),
        ),
        ("faults", f"{s['faults']} in {s['faulty_minutes']} min"),
        *[
            (
                f"  {k}",
                f"{v['drawn']} ({v['hit']} hit"
                + (f", {v['in_sink']} inside foreachBatch)" if "in_sink" in v else ")"),
            )
            for k, v in sorted(s["faults_by_kind"].items())
        ],
        ("acknowledged adds", s["adds"]),
        *(
            [
                ("  kept (a replica confirmed)", s["kept"]),
                ("  unkept (delivered anyway)", f"{s['unkept']} ({s['unkept_delivered']})"),
            ]
            if s.get("mode") == "sentinel"
            else []
        ),
        ("lost (I1)" + (", kept adds" if s.get("mode") == "sentinel" else ""), s["lost"]),
        ("sink calls / batches", f"{s['sink_calls']} / {s['batches']}"),
        ("replays (differing: I3)", f"{s['replays']} ({len(s['replays_differing'])})"),
        ("empty batches", len(s["empty_batches"])),
        (
            "duplicate rows",
            f"{s['duplicate_rows']} of {s['rows']} ({100 * s['duplicate_ratio']:.2f}%)",
        ),
        ("stuck after drain", ", ".join(f"{k} {v}" for k, v in s["stuck"].items())),
        ("drain", f"{s['drain_seconds']:.1f} s" + ("" if s["drained"] else " (NOT drained)")),
        ("longest stall", "-" if not stall else f"{stall['seconds']} s at t+{stall['from']}"),
        ("  outside faults", "-" if not out else f"{out['seconds']} s at t+{out['from']}"),
        ("restarts", sum(s["restarts_by_cause"].values())),
        *[(f"  {k}", v) for k, v in s["restarts_by_cause"].items()],
    ]
    if "failovers" in s:
        rows.append(("failovers (promoted of drawn; s to a write: median, max)", ""))
        rows += [
            (
                f"  {kind}",
                f"{f['promoted']} of {f['drawn']}"
                + (f"; {f['median']}, {f['max']}" if f["max"] is not None else ""),
            )
            for kind, f in s["failovers"].items()
        ]
    if "dehydrator" in s:
        d = s["dehydrator"]
        rows += [
            ("parks", d["parks"]),
            ("  lost", d["lost"]),
            ("  released early", d["early"]),
            ("  not in Ick", d["not_in_ick"]),
        ]
    rows = [(str(k) if len(str(k)) <= 60 else str(k)[:57] + "...", v) for k, v in rows]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def parse(argv: list[str]) -> Settings:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="nemesis-out")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--rate", type=float, default=30.0, help="adds per second")
    p.add_argument(
        "--every", type=float, nargs=2, default=(5.0, 15.0), help="seconds between faults (min max)"
    )
    p.add_argument("--drain-timeout", type=float, default=180.0)
    p.add_argument("--consumer-id", default="", help="fixed consumerId (default: random)")
    p.add_argument(
        "--kinds",
        default="",
        help=f"comma-separated subset of {','.join(KINDS)}"
        f" (--sentinel: of {','.join(SENTINEL_KINDS)})",
    )
    p.add_argument("--dehydrator", action="store_true", help="add the dehydrator loop")
    p.add_argument(
        "--sentinel",
        action="store_true",
        help="the Ick on a Sentinel set (primary, 2 replicas, 3 sentinels)",
    )
    p.add_argument(
        "--wait-timeout",
        type=float,
        default=2.0,
        help="--sentinel: seconds an add waits for a replica",
    )
    p.add_argument(
        "--wait-replicas",
        type=int,
        default=1,
        choices=(1, 2),
        help="--sentinel: replicas an add waits for (2: both)",
    )
    p.add_argument(
        "--durable",
        action="store_true",
        help="--sentinel: data nodes with appendonly yes, appendfsync always",
    )
    p.add_argument("--cluster", action="store_true", help="not implemented")
    a = p.parse_args(argv)
    if a.cluster:
        p.error("--cluster is not implemented yet")
    if a.sentinel and a.dehydrator:
        p.error("--sentinel with --dehydrator is not implemented yet")
    kinds = tuple(k for k in a.kinds.split(",") if k)
    allowed = SENTINEL_KINDS if a.sentinel else KINDS
    if set(kinds) - set(allowed):
        p.error(f"unknown fault kinds {sorted(set(kinds) - set(allowed))}")
    return Settings(
        minutes=a.minutes,
        seed=a.seed,
        out=a.out,
        shards=a.shards,
        rate=a.rate,
        every=tuple(a.every),
        drain_timeout=a.drain_timeout,
        consumer_id=a.consumer_id,
        kinds=kinds,
        dehydrator=a.dehydrator,
        sentinel=a.sentinel,
        wait_timeout=a.wait_timeout,
        wait_replicas=a.wait_replicas,
        durable=a.durable,
    )


@contextlib.contextmanager
def on_path() -> Iterator[None]:
    """tests/ on sys.path (fault_proxy, faults_support, nemesis_check)."""
    added = str(HERE) not in sys.path
    if added:
        sys.path.insert(0, str(HERE))
    try:
        yield
    finally:
        if added:
            sys.path.remove(str(HERE))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        return child_main(json.loads(argv[1]))
    settings = parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally: clean up
    with on_path():
        summary = soak(settings)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
