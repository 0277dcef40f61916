"""A Spark standalone cluster (a master and workers) and spark-submit, from pyspark's own
bin/ (``spark-class``, ``spark-submit``), for tests/test_deploy_standalone.py.

Every process binds 127.0.0.1 on free ports and runs in a process group of its own, which
``StandaloneCluster.stop()`` ends (SIGTERM, then SIGKILL); logs go to files under a
directory of the caller's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from pyspark_ick.testing import HOST, free_port, wait_until

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"


def spark_env(conf_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a Spark process here: loopback only, an empty conf dir of ours
    (no spark-defaults.conf or spark-env.sh of the machine's), small daemon heaps."""
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_MEMORY": "512m",
        **extra,
    }
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    return env


def kill_group(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process group of ``process`` (started with start_new_session=True), then
    SIGKILL whatever is left after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` and ``memory`` each)."""

    directory: Path
    workers: int = 1
    cores: int = 2
    memory: str = "1g"
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    ui_port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def worker_dir(self, i: int) -> Path:
        return self.directory / f"worker-{i}"

    def _daemon(self, name: str, *args: str) -> None:
        log = (self.directory / f"{name}.log").open("wb")
        with log:
            self.processes.append(
                subprocess.Popen(
                    [str(SPARK_CLASS), *args],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=spark_env(self.directory / "conf", **self.env),
                    start_new_session=True,
                    cwd=self.directory,
                )
            )

    def start(self, timeout: float = 60.0) -> StandaloneCluster:
        (self.directory / "conf").mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port = free_port(), free_port()
        self._daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        wait_until(
            lambda: self.state().get("status") == "ALIVE",
            timeout=timeout,
            interval=0.5,
            what=f"the Spark master on {self.url}",
        )
        for i in range(self.workers):
            self.worker_dir(i).mkdir(parents=True, exist_ok=True)
            self._daemon(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                HOST,
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(self.worker_dir(i)),
                self.url,
            )
        wait_until(
            lambda: len(self.alive_workers()) == self.workers,
            timeout=timeout,
            interval=0.5,
            what=f"{self.workers} workers registered with {self.url}",
        )
        return self

    def state(self) -> dict[str, Any]:
        """The master's JSON status page (workers, applications)."""
        with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=5) as r:
            return dict(json.load(r))

    def alive_workers(self) -> list[dict[str, Any]]:
        for process in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"a Spark daemon exited: {self.logs()[-3000:]}")
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def logs(self) -> str:
        return "".join(
            f"--- {p.name}\n{p.read_text(errors='replace')}"
            for p in sorted(self.directory.glob("*.log"))
        )

    def executor_logs(self) -> str:
        """The stderr of every executor the workers ran (work-dir/app-*/N/stderr)."""
        return "".join(
            p.read_text(errors="replace")
            for i in range(self.workers)
            for p in sorted(self.worker_dir(i).glob("app-*/*/stderr"))
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            kill_group(process)
        self.processes.clear()


def submit(
    script: Path,
    *args: str,
    master: str,
    env: dict[str, str],
    conf_dir: Path,
    conf: dict[str, str] | None = None,
    timeout: float = 180.0,
    log: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master MASTER --deploy-mode client SCRIPT ARGS`` in a process group of
    its own (killed on timeout); stdout and stderr together in ``.stdout``."""
    settings = {
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.ui.enabled": "false",
        **(conf or {}),
    }
    command = [
        str(SPARK_SUBMIT),
        "--master",
        master,
        "--deploy-mode",
        "client",
        *[a for k, v in settings.items() for a in ("--conf", f"{k}={v}")],
        str(script),
        *args,
    ]
    out = (log or conf_dir / "submit.log").open("w+b")
    with out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=spark_env(conf_dir, **env),
            start_new_session=True,
        )
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            code = -9
        finally:
            kill_group(process, grace=5)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return subprocess.CompletedProcess(command, code, text, "")


@dataclass
class ConnectServer:
    """A local Spark Connect server (pyspark's sbin/start-connect-server.sh --wait, in the
    foreground and a process group of its own) on a free 127.0.0.1 port; its Python workers
    (the data sources, foreachBatch functions) run ``python``."""

    directory: Path
    python: str
    master: str = "local[2]"
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "connect-server.log"

    def start(self, timeout: float = 90.0) -> ConnectServer:
        conf_dir = self.directory / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        settings = {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
        }
        env = spark_env(
            conf_dir,
            PYSPARK_PYTHON=self.python,
            PYSPARK_DRIVER_PYTHON=self.python,
            SPARK_PID_DIR=str(self.directory),
            SPARK_LOG_DIR=str(self.directory),
        )
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    str(SPARK_HOME / "sbin" / "start-connect-server.sh"),
                    "--wait",
                    "--master",
                    self.master,
                    *[a for k, v in settings.items() for a in ("--conf", f"{k}={v}")],
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=self.directory,
            )
        wait_until(
            self._listening,
            timeout=timeout,
            interval=0.5,
            what=f"the Spark Connect server on port {self.port}",
        )
        return self

    def _listening(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"the Connect server exited: {self.log.read_text()[-3000:]}")
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex((HOST, self.port)) == 0

    def stop(self) -> None:
        if self.process is not None:
            kill_group(self.process)
            self.process = None
