"""The project's own fault tools, on top of pyspark_ick.testing's servers: kill -9 and
restart of a server (``kill``, ``restart``), a durable server (its AOF keeps every
acknowledged write through both), Sentinel failovers (``kill_primary``, ``failover``,
``wait_promoted``) and writes that only a Sentinel set's primary has (``replicas_behind``).
Redis Cluster's are in tests/cluster_faults.py."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark_ick import IckError
from pyspark_ick.testing import RedisServer, SentinelSet, ready, role, start_binary, wait_until


def kill(server: RedisServer) -> None:
    """``kill -9`` the server (no shutdown, no last fsync); its directory stays, so
    ``restart()`` finds its AOF or RDB file as a crashed server would."""
    if server.process is None:
        raise IckError("kill() needs a redis-server process of ours, not a container")
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait(10)


def restart(server: RedisServer, timeout: float = 30.0) -> None:
    """Start the killed (or stopped) server again: the same command line, so the same
    port, directory and settings (``--appendonly yes`` loads its AOF); returns once it
    answers PING, i.e. once it has loaded its data."""
    if server.process is None or server.process.poll() is None:
        raise IckError("restart() needs a server of ours that is not running")
    server.process = subprocess.Popen(
        server.process.args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(
        lambda: ready(server), timeout=timeout, what=f"redis-server restarted on port {server.port}"
    )


def start_durable(binary: str | None = None, *args: str) -> RedisServer:
    """A server that loses no acknowledged write to ``kill()`` (``appendonly yes``,
    ``appendfsync always``): ``restart()`` reloads its AOF. ``args`` add settings."""
    return start_binary(binary, "--appendonly", "yes", "--appendfsync", "always", *args)


# --- Sentinel ----------------------------------------------------------------------------


def wait_replicated(sentinels: SentinelSet, timeout: float = 15.0) -> None:
    """Until every live replica has every write the primary made before the call (the
    replication offset it acknowledges, about once a second)."""
    with sentinels.primary().client(socket_timeout=2) as c:
        target = int(c.info("replication")["master_repl_offset"])

    def caught_up() -> bool:
        with sentinels.primary().client(socket_timeout=2) as c:
            info = c.info("replication")
        offsets = [
            int(v["offset"])
            for k, v in info.items()
            if k.startswith("slave") and isinstance(v, dict)
        ]
        return len(offsets) >= len(sentinels.replicas()) and all(o >= target for o in offsets)

    wait_until(caught_up, timeout=timeout, interval=0.05, what="the replicas caught up")


def wait_promoted(sentinels: SentinelSet, old: RedisServer, timeout: float = 60.0) -> RedisServer:
    """The replica promoted in place of ``old``, once it serves as primary and every live
    sentinel names it."""

    def promoted() -> RedisServer | None:
        ports = set()
        for sentinel in (s for s in sentinels.sentinels if s.alive):
            with sentinel.client(socket_timeout=2) as c:
                ports.add(int(c.sentinel_get_master_addr_by_name(sentinels.service)[1]))
        if len(ports) != 1 or old.port in ports:
            return None
        node = sentinels.by_port(ports.pop())
        return node if role(node) == "master" else None

    found: RedisServer = wait_until(
        promoted, timeout=timeout, interval=0.05, what=f"a replica promoted in place of {old.port}"
    )
    return found


def kill_primary(sentinels: SentinelSet, timeout: float = 60.0) -> RedisServer:
    """kill -9 the primary and return the replica that Sentinel promotes (once it serves as
    primary and every live sentinel names it)."""
    old = sentinels.primary()
    kill(old)
    return wait_promoted(sentinels, old, timeout)


def failover(sentinels: SentinelSet, timeout: float = 60.0) -> RedisServer:
    """SENTINEL FAILOVER: a replica is promoted, then the old primary is turned into its
    replica; returns the new primary once every live sentinel names it and the old primary
    replicates it. (Until then the old primary still takes writes, which its demotion
    discards: Sentinel's own window, docs/operations.md.)"""
    old = sentinels.primary()
    sentinel = next(s for s in sentinels.sentinels if s.alive)
    with sentinel.client(socket_timeout=5) as c:
        c.execute_command("SENTINEL", "FAILOVER", sentinels.service)
    new = wait_promoted(sentinels, old, timeout)

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


@contextmanager
def replicas_behind(sentinels: SentinelSet, filler_mb: int = 24) -> Iterator[RedisServer]:
    """Writes that reach only the primary, for the block (which kills it, say): the
    replicas are stopped (SIGSTOP) and ``filler_mb`` MB written to the primary first fill
    the sockets to them, so what the primary takes next stays in its own output buffers
    and dies with it. The replicas go on (SIGCONT) at the end; keep the block under the
    sentinels' down-after-milliseconds. Yields the primary."""
    primary, replicas = sentinels.primary(), sentinels.replicas()
    for replica in replicas:
        assert replica.process is not None
        os.kill(replica.process.pid, signal.SIGSTOP)
    try:
        with primary.client(socket_timeout=10) as c:
            block = b"x" * (1 << 20)
            pipe = c.pipeline(transaction=False)
            for i in range(filler_mb):
                pipe.set(f"filler:{i}", block)
            pipe.execute()
        yield primary
    finally:
        for replica in replicas:
            assert replica.process is not None
            os.kill(replica.process.pid, signal.SIGCONT)
