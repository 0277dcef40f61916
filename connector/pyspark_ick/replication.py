"""Acknowledged means replicated, when asked (``redis.waitReplicas``): a producer's write
returns only once that many replicas have it.

Redis replicates asynchronously: a primary that dies right after it acknowledged a write
may take the write with it when a replica is promoted. WAIT n t blocks until n replicas
have acknowledged every write made *on the same connection* so far, or t ms pass. So
``write`` runs the calls of one write and then WAIT on one connection of the client's pool
(a single-connection client, kept for the next write); if that connection was opened
again in between (the primary failed over, a reset), the WAIT would not cover the calls
sent on the old one: a replay-safe write runs again on the new connection, any other
fails. So does a replay-safe write that a primary Sentinel has replaced took (it gets no
replica: WAIT times out, the sentinels name another primary). Otherwise fewer replicas
than asked within ``redis.waitTimeout`` is ReplicationError: the
write is on the primary and may or may not survive a failover; writing it again is safe
for the same writes that a retry is safe for.

Redis Cluster is refused (NOT_ON_CLUSTER): its client spreads one write over a pool of
connections per node, and WAIT would have to run on each of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from . import retry
from .clients import DEFAULT_WAIT_TIMEOUT, settings, share
from .errors import IckConfigError, IckConnectionError, ReplicationError
from .redis_errors import retryable, translate

T = TypeVar("T")

NOT_ON_CLUSTER = (
    "redis.waitReplicas is for a primary with replicas (a standalone Redis or a Sentinel "
    "URL), not for Redis Cluster: WAIT confirms only the writes of its own connection to "
    "one node, and a cluster write spreads over a connection per node; leave it at 0 there"
)


def check(replicas: Any, timeout: Any) -> None:
    """IckConfigError unless ``replicas`` is an integer >= 0 and ``timeout`` > 0 seconds."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise IckConfigError(f"redis.waitReplicas must be an integer >= 0, got {replicas!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise IckConfigError(f"redis.waitTimeout must be more than 0 seconds, got {timeout!r}")


def configure(client: Any, replicas: int, timeout: float = DEFAULT_WAIT_TIMEOUT) -> None:
    """Make the producers' writes through ``client`` wait for ``replicas`` replicas (0: do
    not wait), ``timeout`` seconds at most."""
    check(replicas, timeout)
    if replicas and isinstance(client, redis.RedisCluster):
        raise IckConfigError(NOT_ON_CLUSTER)
    found = settings(client)
    found.wait_replicas, found.wait_timeout = replicas, float(timeout)


def waits(client: Any) -> bool:
    """Whether writes through ``client`` wait for replicas (and so may run again)."""
    return settings(client).wait_replicas > 0


class Pinned(redis.Redis):
    """A client of one connection of another client's pool that counts the times that
    connection was opened and notes, for each reply, the opening it came through."""

    def __init__(self, parent: redis.Redis) -> None:
        self.opened = 0
        self.used: set[int] = set()
        super().__init__(connection_pool=parent.connection_pool, single_connection_client=True)
        assert self.connection is not None
        self.connection.register_connect_callback(self._opened)
        self.opened = 1

    def _opened(self, connection: Any) -> None:
        self.opened += 1

    def _reconnect(self) -> None:
        """Open the connection again through the pool's own ``connect`` if it was closed:
        redis-py reopens a single connection at the address it had, and a Sentinel
        connection must ask the sentinels for the primary."""
        connection = self.connection
        if connection is not None and not connection.is_connected:
            connection.connect()

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self._reconnect()
        reply = super().execute_command(*args, **options)
        self.used.add(self.opened)
        return reply

    def wait(self, replicas: int, timeout: float) -> int:  # type: ignore[override]
        """WAIT on this connection; the socket waits ``timeout`` beyond its own timeout."""
        self._reconnect()
        connection = self.connection
        assert connection is not None
        before = self.opened
        connection.send_command("WAIT", replicas, max(1, round(timeout * 1000)))
        own = connection.socket_timeout
        reply = connection.read_response(timeout=None if own is None else own + timeout)
        if self.opened != before:  # sent on a new connection: it covers nothing of ours
            raise redis.ConnectionError("the connection was opened again before WAIT")
        return int(reply)


def _take(client: Any) -> Pinned:
    found = settings(client)
    with found.lock:
        if found.spare:
            return found.spare.pop()  # type: ignore[no-any-return]
    pinned = retry.call(lambda: Pinned(client), found.retry_timeout, what="Redis")
    share(pinned, client)
    return pinned


def _give_back(client: Any, pinned: Pinned) -> None:
    found = settings(client)
    with found.lock:
        found.spare.append(pinned)


def _demoted(pinned: Pinned) -> bool:
    """True when ``pinned`` talks to a primary that the sentinels no longer name (after a
    SENTINEL FAILOVER the old primary takes writes until Sentinel turns it into a replica,
    about 8 s later, and those writes are then lost); its connection is closed, so the
    next call asks the sentinels again. False for a client without sentinels."""
    pool, connection = pinned.connection_pool, pinned.connection
    if not hasattr(pool, "get_master_address") or connection is None:
        return False
    try:
        address = pool.get_master_address()
    except redis.RedisError:
        return False
    if (str(address[0]), int(address[1])) == (str(connection.host), int(connection.port)):
        return False
    connection.disconnect()
    return True


def write(client: Any, calls: Callable[[Any], T], *, what: str, replay_safe: bool = True) -> T:
    """``calls(c)``: the calls of one write on client ``c``; with redis.waitReplicas > 0,
    ``c`` is one connection of ``client`` and ``write`` returns once WAIT saw that many
    replicas confirm them (see the module docstring). ``replay_safe``: whether running
    the write again is harmless (it is after a connection was opened again mid-write)."""
    found = settings(client)
    replicas, timeout = found.wait_replicas, found.wait_timeout
    if not replicas:
        return calls(client)
    try:
        pinned = _take(client)
    except redis.RedisError as exc:
        raise translate(exc, what) from exc
    deadline = time.monotonic() + found.retry_timeout
    try:
        while True:
            pinned.used.clear()
            result = calls(pinned)
            try:
                if pinned.used - {pinned.opened}:  # part went on a connection now gone
                    raise redis.ConnectionError("the connection was opened again mid-write")
                confirmed = pinned.wait(replicas, timeout)
            except redis.RedisError as exc:
                if not (replay_safe and retryable(exc, True)) or time.monotonic() > deadline:
                    raise IckConnectionError(
                        f"{what}: the write ran, but the connection to the primary was lost "
                        f"before {replicas} replica(s) confirmed it (redis.waitReplicas): "
                        f"it may not survive a failover ({type(exc).__name__}: {exc})"
                    ) from exc
                continue  # run the write again on the new connection, then WAIT
            if (
                confirmed < replicas
                and replay_safe
                and time.monotonic() < deadline
                and _demoted(pinned)
            ):  # a primary Sentinel replaced still took the write
                continue
            if confirmed < replicas:
                raise ReplicationError(
                    f"{what}: only {confirmed} of the {replicas} replica(s) asked for "
                    f"(redis.waitReplicas) confirmed the write within {timeout:g} s "
                    "(redis.waitTimeout); it is on the primary but may not survive a "
                    "failover. Are the replicas up and connected (INFO replication)?"
                )
            return result
    finally:
        _give_back(client, pinned)
