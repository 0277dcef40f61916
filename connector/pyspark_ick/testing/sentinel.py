"""A throwaway Redis Sentinel set: a primary, its replicas and the sentinels watching it
(``redis_sentinels()``), reached by a ``redis+sentinel://`` URL."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from ..errors import IckError
from .servers import (
    HOST,
    RedisServer,
    free_port,
    role,
    running,
    server_binary,
    start_binary,
    started,
    wait_until,
)


@dataclass
class SentinelSet:
    """A primary, its replicas and the sentinels (``redis-server --sentinel``) that watch
    it as ``service``; ``url`` is the connector's ``redis+sentinel://`` URL of the set.

    ``servers`` are the data nodes (the first was the primary at start); ``password`` is
    theirs (requirepass and masterauth), ``sentinel_password`` the sentinels'. ``primary()``
    asks the sentinels.
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
        if role(self.by_port(primary)) != "master":
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
    return started(node, "redis-server --sentinel", Path(directory) / "sentinel.log")


def redis_sentinels(
    replicas: int = 2, sentinels: int = 3, **kw: Any
) -> contextlib.AbstractContextManager[SentinelSet]:
    """A throwaway Sentinel set (``start_sentinels``) for the duration of the block."""
    return running(lambda: start_sentinels(replicas, sentinels, **kw))
