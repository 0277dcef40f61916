"""The nemesis: draws a fault every few seconds (seeded) and records it; the faults of
Redis behind the proxy and of the consumer's processes (failovers: nemesis.failovers)."""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis_faults import kill, restart
from support import descendants

from nemesis.cluster_failovers import ClusterFailovers
from nemesis.failovers import Failovers
from nemesis.processes import signal_group, signal_pid
from nemesis.records import Journal, stamp, write_atomically
from nemesis.settings import ICK, Settings, kinds_of
from nemesis.supervisor import Supervisor
from pyspark_ick import connect
from pyspark_ick.errors import LeaseBusy
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.lease import Lease


def live_holders(client: Any, keys: list[str]) -> int:
    """How many of the lease hashes ``keys`` a live consumer held a moment ago (renewed
    within 2.5 s: it renews every second)."""
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    renewed = [client.hget(k, "renewed") for k in keys]
    return sum(r is not None and now_ms - int(r) < 2500 for r in renewed)


def duration_s(text: str) -> float:
    """Seconds of a duration as the soak's settings write them ("60s", "500ms")."""
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.rstrip("s"))


class Nemesis(Failovers, ClusterFailovers):
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
        cluster: Any = None,
    ) -> None:
        self.settings, self.server, self.proxy = settings, server, proxy
        self.sentinels = sentinels  # --sentinel: a testing.SentinelSet (server, proxy None)
        self.cluster = cluster  # --cluster: a testing.RedisClusterServers (the same)
        self.supervisor, self.journal, self.arm_file = supervisor, journal, arm_file
        self.sink_arm = arm_file.with_name("sink.arm")
        self.schedule = random.Random(settings.seed)  # which fault, when: hits aside
        self.rng = random.Random(settings.seed + 1)  # how long each lasts
        self.kinds = kinds_of(settings)
        self.redis_stopped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="nemesis")
        self.errors: list[str] = []
        self.sink_calls: Callable[[], int] = lambda: 0  # the soak's count of sink calls

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

    def zombie_consumer(self) -> dict[str, Any]:
        """SIGSTOP the consumer until its Ick leases are a gone holder's (idle 3 heartbeats
        and a second) and a rival has taken each over and given it back, as a consumer that
        took over and stopped would; then SIGCONT: its fencing tokens are stale, so the
        heartbeat and every reserve or commit are refused, its query fails with "lost its
        lease", and the child starts it again (new tokens). Nothing may be lost."""
        pid = self.supervisor.pid()
        if pid is None:
            return {"hit": False}
        self.supervisor.paused_until = time.monotonic() + 120
        signal_group(pid, signal.SIGSTOP)
        taken = held = 0
        try:
            client = connect(self.url_of_ick(), timeout=5.0, retry_timeout=5.0)
            names = shard_names(ICK, self.settings.shards)
            left = [Lease(client, IckKeys(n).lease, n) for n in names]
            held = live_holders(client, [lease.key for lease in left])
            deadline = time.monotonic() + 30
            while left and time.monotonic() < deadline and not self._stop.is_set():
                for lease in list(left):
                    with contextlib.suppress(LeaseBusy):
                        lease.release(lease.acquire("nemesis-rival", 20_000, 1000))
                        left.remove(lease)
                        taken += 1
                self._hold(0.5)
            self._hold(self.rng.uniform(0, 5))
            client.close()
        finally:
            signal_group(pid, signal.SIGCONT)
        return {"hit": held > 0 and taken == len(names), "pid": pid, "held": held, "taken": taken}

    def url_of_ick(self) -> str:
        """A URL of the Ick's Redis that no fault touches (not through the proxy)."""
        if self.cluster is not None:
            return str(self.cluster.seed_url())
        if self.sentinels is not None:
            return str(self.sentinels.url)
        return f"redis://127.0.0.1:{self.server.port}"

    def outage(self) -> dict[str, Any]:
        """Redis down 5-15 s longer than the consumer's redis.retryTimeout: its queries fail
        with the error that says so; the child (or the supervisor) starts them again once
        Redis is back. Killed on the proxy topology; --sentinel, --cluster: every data node
        SIGSTOPped (a partition: nothing to fail over to), then continued and settled.
        Hit when queries ran and it lasted its full length (the soak's end cuts it)."""
        seconds = duration_s(self.settings.retry_timeout) + self.rng.uniform(5, 15)
        running = self._batches_flowing(90)  # else no query is there to fail
        began = time.monotonic()
        if self.cluster is None and self.sentinels is None:
            kill(self.server)
            self._hold(seconds)
            down = time.monotonic() - began
            restart(self.server, timeout=60)
        else:
            nodes = self.cluster.nodes if self.cluster is not None else self.sentinels.servers
            pids = [n.process.pid for n in nodes if n.alive and n.process is not None]
            for pid in pids:
                signal_pid(pid, signal.SIGSTOP)
            try:
                self._hold(seconds)
            finally:
                down = time.monotonic() - began
                for pid in pids:
                    signal_pid(pid, signal.SIGCONT)
            if self.cluster is not None:
                self._settled()
            else:
                self.sentinels.wait_healthy(120)
        return {"hit": running and down >= seconds, "down": round(down, 2)}

    def _batches_flowing(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until the consumer's sink was called twice more:
        its queries run (not a JVM starting). True when they did."""
        first = self.sink_calls()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stop.is_set():
            if self.sink_calls() >= first + 2:
                return True
            self._hold(0.5)
        return False

    def heal(self) -> None:
        """End every fault: Redis running and continued, proxy healed (--sentinel: every
        data node running and continued, the set healthy; --cluster: heal_cluster),
        consumer continued, no worker armed."""
        if self.cluster is not None:
            self.heal_cluster()
        elif self.sentinels is not None:
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
