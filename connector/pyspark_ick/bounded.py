"""Redis Cluster connections whose waits end at the deadline of the retried call, and TLS
connections whose handshake has a short deadline of its own.

One attempt of redis-py's cluster client can outlast ``redis.retryTimeout`` by far: a call
that times out refreshes the slots from every node in turn, each wait up to
``redis.timeout``. Against a cluster that does not answer (every node paused, a network
partition) a call would fail nodes x ``redis.timeout`` after its deadline, or ride out an
outage longer than ``redis.retryTimeout``. These connections cap each connect and each
read by ``retry.time_left()``, so a retried call ends at its deadline.

A plain Redis answers nothing to a TLS ClientHello: the handshake waited the whole
``redis.timeout`` before connect() could tell that the port speaks plain Redis. The
handshake ends after ``HANDSHAKE_TIMEOUT`` instead (a real TLS handshake takes a few round
trips); one that times out is retried like any connect, unless the port answers plain.
"""

from __future__ import annotations

import math
import socket
from typing import Any

import redis
from redis.connection import SENTINEL, Connection, SSLConnection

from . import retry


class _Bounded:
    """What makes a redis-py connection class bounded (mixed in before it)."""

    host: str
    port: int
    socket_timeout: float | None
    socket_connect_timeout: float | None

    def _left(self) -> float | None:
        """The time left, or TimeoutError (the connection dropped) when there is none."""
        left = retry.time_left()
        if left is not None and left <= 0:
            self.disconnect()  # type: ignore[attr-defined]  # a reply may be unread
            raise redis.TimeoutError(
                f"{self.host}:{self.port} did not answer before redis.retryTimeout passed"
            )
        return left

    def _connect(self) -> socket.socket:
        left = self._left()
        given = self.socket_connect_timeout
        if left is not None:
            self.socket_connect_timeout = min(given or math.inf, left)
        try:
            return super()._connect()  # type: ignore[misc,no-any-return]
        finally:
            self.socket_connect_timeout = given

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        left = self._left()
        if left is not None:
            timeout = kwargs.get("timeout", SENTINEL)
            limit = self.socket_timeout if timeout is SENTINEL else timeout
            kwargs["timeout"] = left if limit is None else min(limit, left)  # type: ignore[type-var]
        return super().read_response(*args, **kwargs)  # type: ignore[misc]


HANDSHAKE_TIMEOUT = 2.0
"""Seconds a TLS handshake may take (at most redis.timeout)."""


class _ShortHandshake:
    """What gives an SSL connection class the handshake deadline (mixed in before it)."""

    def _wrap_socket_with_ssl(self, sock: socket.socket) -> Any:
        given = sock.gettimeout()
        sock.settimeout(min(given or math.inf, HANDSHAKE_TIMEOUT))
        wrapped = super()._wrap_socket_with_ssl(sock)  # type: ignore[misc]
        wrapped.settimeout(given)
        return wrapped


class HandshakeSSLConnection(_ShortHandshake, SSLConnection):
    """A TLS connection whose handshake ends after HANDSHAKE_TIMEOUT."""


class BoundedConnection(_Bounded, Connection):
    """A TCP connection whose waits end at the retried call's deadline."""


class BoundedSSLConnection(_Bounded, _ShortHandshake, SSLConnection):
    """A TLS connection whose waits end at the retried call's deadline, and whose
    handshake ends after HANDSHAKE_TIMEOUT."""


def bounded(tls: bool) -> type[Connection]:
    """The bounded connection class, for TLS or plain TCP."""
    return BoundedSSLConnection if tls else BoundedConnection
