"""connect(): a Redis URL to a redis-py client, with cluster detection and retry (or, for a
``redis+sentinel://`` URL, redis-py's Sentinel client of the service's primary); the client
of a process for a ConnectionSpec (what Spark ships to executors)."""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

from . import replication, retry
from .bounded import HandshakeSSLConnection, bounded
from .clients import DEFAULT_RETRY_TIMEOUT, DEFAULT_WAIT_TIMEOUT, settings
from .error_kinds import cluster_disabled, permanent, transient
from .errors import IckConfigError
from .redis_errors import cluster_mismatch, connection_error, tls_hint, unknown_service
from .urls import (
    DEFAULT_URL,
    check_url,
    is_sentinel,
    parse_cluster,
    parse_sentinel,
    redact,
    seeds,
    unknown_parameter,
    where,
)


def tls_mismatch(error: BaseException, url: str, timeout: float = 2.0) -> bool:
    """True when ``error`` looks like a TLS mismatch (``tls_hint``) and the server, asked
    the other way, answers: then no retry can help. A reset alone is no proof: a load
    balancer resets new connections while the Redis behind it restarts."""
    parts = urlsplit(url)
    if tls_hint(error, parts.scheme) is None or not parts.hostname:
        return False
    address = (parts.hostname, parts.port or 6379)
    return (_speaks_plain if parts.scheme == "rediss" else _speaks_tls)(address, timeout)


def _speaks_tls(address: tuple[str, int], timeout: float) -> bool:
    """Whether ``address`` completes (or answers with an alert) a TLS handshake."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection(address, timeout=timeout) as raw, context.wrap_socket(raw):
            return True
    except ssl.SSLError as exc:  # an alert (e.g. a client certificate required): TLS
        return "ALERT" in str(exc.reason or "")
    except OSError:
        return False


def _speaks_plain(address: tuple[str, int], timeout: float) -> bool:
    """Whether ``address`` answers a plain inline PING as Redis does (+PONG, -NOAUTH)."""
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(1) in (b"+", b"-")
    except OSError:
        return False


def connect(
    url: str = DEFAULT_URL,
    *,
    cluster: Any = "auto",
    username: str | None = None,
    password: str | None = None,
    timeout: float | None = 10.0,
    retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
    wait_replicas: int = 0,
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT,
    **kw: Any,
) -> redis.Redis | redis.RedisCluster:
    """A redis-py client for ``url`` (``redis://``, ``rediss://`` for TLS, ``unix://``,
    ``redis+sentinel://h1:26379,h2:26379/SERVICE[/DB]`` and ``rediss+sentinel://``).

    ``url`` may list several seed nodes of a cluster: ``redis://h1:7000,h2:7000/0``.
    ``cluster``: ``"auto"`` asks the server whether it is a cluster node; true/false force
    it (a Sentinel URL is never a cluster). Transient errors (Redis restarting, loading,
    failing over) are retried with backoff for ``retry_timeout`` seconds, here and by every
    call of the connector that uses the client (pyspark_ick.retry); a refused password or
    certificate fails at once. ``wait_replicas`` > 0: the writes through this client (adds,
    parks, a stream reader's reservations and commits) return once that many replicas have
    them (pyspark_ick.replication; on a cluster, the replicas of each primary written).
    Extra keyword arguments go to redis-py (``ssl_ca_certs=...``, ``decode_responses``).
    """
    check_url(url)
    mode = parse_cluster(cluster)
    replication.check(wait_replicas, wait_timeout)
    nodes = seeds(url)
    if len(nodes) > 1 and mode == "no":
        raise IckConfigError(
            f"redis.url {redact(url)!r} lists several nodes: that is for "
            "a Redis Cluster, but redis.cluster is false"
        )
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),  # pyspark_ick.retry retries, knowing what is safe
        **kw,
    }
    if username is not None:
        options["username"] = username
    if password is not None:
        options["password"] = password
    if is_sentinel(url):
        if mode == "yes":
            raise IckConfigError(
                f"redis.url {redact(url)!r} is a Sentinel URL: its service "
                "is a primary with replicas, not a Redis Cluster, but "
                "redis.cluster is true"
            )
        primary = _connect_sentinel(url, options, timeout, retry_timeout)
        settings(primary).retry_timeout = retry_timeout
        replication.configure(primary, wait_replicas, wait_timeout)
        return primary

    def attempt() -> redis.Redis | redis.RedisCluster:
        found = _detect(nodes, options) if mode == "auto" else mode
        if found == "yes":
            others = [
                ClusterNode(urlsplit(n).hostname, urlsplit(n).port or 6379) for n in nodes[1:]
            ]
            seed, tls = nodes[0], nodes[0].startswith("rediss://")
            if tls:  # else the scheme's SSLConnection would replace the bounded class
                seed = "redis://" + seed.removeprefix("rediss://")
            return redis.RedisCluster.from_url(
                seed, startup_nodes=others, connection_class=bounded(tls), **options
            )
        client = _node_client(nodes[0], options)
        if mode == "no":
            _check_not_cluster(client, url)
        else:
            client.ping()
        return client

    mismatched: list[Exception] = []

    def mismatch(exc: Exception) -> bool:  # the server speaks the other way: no retry helps
        if tls_mismatch(exc, nodes[0], min(timeout or 2, 2)):
            mismatched.append(exc)
        return bool(mismatched)

    try:
        client = retry.call(attempt, retry_timeout, what=f"Redis at {where(url)}", final=mismatch)
    except (redis.RedisError, RedisClusterException) as exc:
        if cluster_disabled(exc):
            raise cluster_mismatch(url, forced=True) from None
        raise connection_error(exc, url, mismatch=bool(mismatched), waited=retry_timeout) from exc
    except IckConfigError:
        raise
    except ValueError as exc:  # redis-py's URL parser: a bad port or query value
        raise IckConfigError(f"redis.url {redact(url)!r} is not a valid Redis URL: {exc}") from None
    except TypeError as exc:  # redis-py hands a query parameter it does not know on
        refused = unknown_parameter(exc, url)
        if refused is None:
            raise
        raise refused from None
    settings(client).retry_timeout = retry_timeout
    replication.configure(client, wait_replicas, wait_timeout)
    return client


def _node_client(node: str, options: dict[str, Any]) -> redis.Redis:
    """A client of one node (not a cluster); over TLS, its handshake has a short deadline."""
    if node.startswith("rediss:"):
        options = {"connection_class": HandshakeSSLConnection, **options}
    return redis.Redis.from_url(node, **options)


def _check_not_cluster(client: redis.Redis, url: str) -> None:
    """With redis.cluster false: refuse a Redis Cluster node (every key of another node's
    slots would answer MOVED), asking its INFO instead of a PING; a user whose ACL
    forbids INFO gets the PING."""
    try:
        enabled = client.info("cluster").get("cluster_enabled")
    except redis.exceptions.NoPermissionError:
        client.ping()
        return
    if enabled:
        client.close()
        raise cluster_mismatch(url, forced=False)


def _connect_sentinel(
    url: str, options: dict[str, Any], timeout: float | None, retry_timeout: float
) -> redis.Redis:
    """The client of the primary of a Sentinel URL's service (redis-py's ``master_for``:
    each new connection asks the sentinels, first to answer first, for the primary; a
    READONLY from a demoted primary becomes a ConnectionError that sends it back to them).
    A sentinel that does not answer is skipped for the next; errors that no retry cures
    (an unknown service, a refused sentinel password) fail at once."""
    target = parse_sentinel(url)
    primary = redis.connection.parse_url(target.primary_url)
    for key in ("host", "port", "connection_class"):
        primary.pop(key, None)
    if target.tls:
        primary["ssl"] = True
    server = {**primary, **options}
    quick = min(timeout or 2.0, 2.0)  # a sentinel that does not answer is skipped quickly
    to_sentinels = {
        "socket_timeout": min(timeout or 5.0, 5.0),
        "socket_connect_timeout": quick,
        "retry": Retry(NoBackoff(), 0),
        **{k: v for k, v in server.items() if k.startswith("ssl")},
        "username": target.sentinel_username,
        "password": target.sentinel_password,
    }
    manager = Sentinel(list(target.sentinels), sentinel_kwargs=to_sentinels, **server)
    client = manager.master_for(target.service)
    unknown: list[Exception] = []

    def final(exc: Exception) -> bool:  # the sentinels answer, and know no such service
        if isinstance(exc, MasterNotFoundError) and not permanent(exc):
            known = _services(manager)
            if known and not any(target.service in names for names in known.values()):
                unknown.append(unknown_service(url, target.service, known))
                return True
        return False

    try:
        retry.call(client.ping, retry_timeout, what=f"Redis at {where(url)}", final=final)
    except redis.RedisError as exc:
        client.close()
        raise (unknown[-1] if unknown else connection_error(exc, url)) from exc
    return client


def _services(manager: Sentinel) -> dict[str, list[str]]:
    """``{"host:port": [service names]}`` of the sentinels that answer SENTINEL MASTERS."""
    known = {}
    for sentinel in manager.sentinels:
        kwargs = sentinel.connection_pool.connection_kwargs
        try:
            names = sentinel.sentinel_masters()
        except redis.RedisError:
            continue
        known[f"{kwargs['host']}:{kwargs['port']}"] = sorted(map(str, names))
    return known


def _detect(nodes: list[str], options: dict[str, Any]) -> str:
    """``"yes"`` when the first seed node that answers is a cluster node, else ``"no"``."""
    error: Exception | None = None
    for node in nodes:
        probe = _node_client(node, options)
        try:
            return "yes" if probe.info("cluster").get("cluster_enabled") else "no"
        except redis.RedisError as exc:
            if transient(exc) and node != nodes[-1]:
                error = exc
                continue
            raise
        finally:
            probe.close()
    raise error or IckConfigError("redis.url names no node")


@dataclass(frozen=True)
class ConnectionSpec:
    """How to reach Redis: picklable (Spark ships it to executors), redacted in repr."""

    url: str = DEFAULT_URL
    cluster: str = "auto"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 10.0
    retry_timeout: float = DEFAULT_RETRY_TIMEOUT
    wait_replicas: int = 0
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT

    def __repr__(self) -> str:
        return f"ConnectionSpec({redact(self.url)}, cluster={self.cluster})"

    def connect(self) -> redis.Redis | redis.RedisCluster:
        """A new client."""
        return connect(
            self.url,
            cluster=self.cluster,
            username=self.username,
            password=self.password,
            timeout=self.timeout,
            retry_timeout=self.retry_timeout,
            wait_replicas=self.wait_replicas,
            wait_timeout=self.wait_timeout,
        )

    def client(self) -> redis.Redis | redis.RedisCluster:
        """The client of this process for this spec (created once, shared by tasks)."""
        with _clients_lock:
            found = _clients.get(self)
            if found is None:
                found = _clients[self] = self.connect()
            return found


_clients: dict[ConnectionSpec, Any] = {}
_clients_lock = threading.Lock()
