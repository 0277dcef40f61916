"""The supervisor: runs the consumer child, restarts it from the same checkpoint whenever
it dies, and records why."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from nemesis.processes import signal_group
from nemesis.records import Journal, write_atomically
from nemesis.settings import Settings

PACKAGE = Path(__file__).resolve().parent  # python3 PACKAGE --child CFG: the consumer


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
            [sys.executable, str(PACKAGE), "--child", json.dumps(self.cfg)],
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
