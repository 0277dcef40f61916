"""connect(): a Redis URL to a redis-py client, with cluster detection, retry, redaction."""

from __future__ import annotations

import re
import socket
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from . import retry
from .errors import IckConfigError, IckConnectionError
from .retry import DEFAULT_RETRY_TIMEOUT

Client: TypeAlias = Any
"""A redis-py client: ``redis.Redis`` or ``redis.RedisCluster`` (not a pipeline). Typed as
Any: redis-py types its replies as unions with Awaitable, which every caller would cast."""

DEFAULT_URL = "redis://localhost:6379/0"
SCHEMES = ("redis", "rediss", "unix")
_SECRET_QUERY = re.compile(r"(?i)((?:^|&)password=)[^&]*")


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def refused(error: BaseException) -> bool:
    """True when Redis refused the credentials (also when wrapped, as RedisCluster does)."""
    return any(isinstance(e, redis.AuthenticationError) or "WRONGPASS" in str(e)
               or "invalid username-password pair" in str(e) for e in _chain(error))


def permanent(error: BaseException) -> bool:
    """True for a connection error that no retry can cure: credentials or certificates."""
    return refused(error) or any(isinstance(e, ssl.SSLCertVerificationError)
                                 for e in _chain(error))


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe to log).

    Covers the password of the userinfo (``redis://user:secret@host``) and of the query
    string (``?password=secret``, which redis-py accepts too); never raises, even on a
    malformed port.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    out = url
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        out = out.replace(parts.netloc, f"{userinfo.partition(':')[0]}:***@{hostport}", 1)
    if parts.query:
        out = out.replace("?" + parts.query, "?" + _SECRET_QUERY.sub(r"\1***", parts.query), 1)
    return out


def where(url: str) -> str:
    """Scheme, host and port (or socket path) of ``url``, without credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    return f"{parts.scheme}://" + ",".join(_host_port(seed) for seed in seeds(url))


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = str(parts.port or 6379)
    except ValueError:
        port = "?"
    return f"{parts.hostname}:{port}"


def seeds(url: str) -> list[str]:
    """One URL per seed node of ``url``: ``redis://user:pw@h1:1,h2:2/0`` lists two nodes
    of a cluster (each URL keeps the scheme, credentials, path and query)."""
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if "," not in hosts:
        return [url]
    rest = url[len(f"{parts.scheme}://{parts.netloc}"):]
    return [f"{parts.scheme}://{userinfo}{at}{host.strip()}{rest}"
            for host in hosts.split(",") if host.strip()]


def parse_cluster(value: Any) -> str:
    """``auto``, ``yes`` or ``no`` from an option value."""
    text = str(value).strip().lower()
    if text in ("auto", ""):
        return "auto"
    if text in ("true", "yes", "1", "on"):
        return "yes"
    if text in ("false", "no", "0", "off"):
        return "no"
    raise IckConfigError(f"redis.cluster must be auto, true or false, got {value!r}")


def check_url(url: str) -> str:
    """``url`` if its scheme is one of SCHEMES, else IckConfigError (password hidden)."""
    if urlsplit(url).scheme not in SCHEMES:
        raise IckConfigError(
            f"redis.url must start with redis://, rediss:// or unix://, got {redact(url)!r}")
    return url


def tls_hint(error: BaseException, scheme: str) -> str | None:
    """A hint when the first contact failed the way a TLS mismatch does, else None: a TLS
    handshake with a plain server times out or fails; a plain client is reset by a server
    that speaks only TLS (and by a load balancer whose Redis is restarting)."""
    chain = _chain(error)
    if scheme == "rediss" and any(isinstance(e, ssl.SSLError) or "handshake" in str(e)
                                  for e in chain):
        return ("the TLS handshake failed: is this a plain (non-TLS) Redis? Use redis:// "
                "for it, rediss:// only for a TLS port")
    if scheme == "redis" and any(isinstance(e, ConnectionResetError) for e in chain):
        return ("the server reset the connection: does it speak only TLS? Use rediss:// "
                "(with ?ssl_ca_certs=/path/ca.crt for a private CA)")
    return None


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
        with socket.create_connection(address, timeout=timeout) as raw, \
                context.wrap_socket(raw):
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


def connection_error(exc: Exception, url: str | None = None) -> IckConnectionError:
    """An IckConnectionError for ``exc`` that names no credentials."""
    target = f" at {where(url)}" if url else ""
    if refused(exc):
        return IckConnectionError(
            f"Redis{target} refused the username or password "
            "(check redis.username / redis.password or the URL)"
        )
    hint = tls_hint(exc, urlsplit(url).scheme) if url else None
    return IckConnectionError(f"cannot reach Redis{target}: "
                              + (f"{hint} ({type(exc).__name__}: {exc})" if hint else
                                 f"{type(exc).__name__}: {exc}"))


def connect(
    url: str = DEFAULT_URL,
    *,
    cluster: Any = "auto",
    username: str | None = None,
    password: str | None = None,
    timeout: float | None = 10.0,
    retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
    **kw: Any,
) -> redis.Redis | redis.RedisCluster:
    """A redis-py client for ``url`` (``redis://``, ``rediss://`` for TLS, ``unix://``).

    ``url`` may list several seed nodes of a cluster: ``redis://h1:7000,h2:7000/0``.
    ``cluster``: ``"auto"`` asks the server whether it is a cluster node; true/false force
    it. Transient errors (Redis restarting, loading, failing over) are retried with backoff
    for ``retry_timeout`` seconds, here and by every call of the connector that uses the
    client (pyspark_ick.retry); a refused password or certificate fails at once.
    Extra keyword arguments go to redis-py (``ssl_ca_certs=...``, ``decode_responses``).
    """
    check_url(url)
    mode = parse_cluster(cluster)
    nodes = seeds(url)
    if len(nodes) > 1 and mode == "no":
        raise IckConfigError(f"redis.url {redact(url)!r} lists several nodes: that is for "
                             "a Redis Cluster, but redis.cluster is false")
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

    def attempt() -> redis.Redis | redis.RedisCluster:
        found = _detect(nodes, options) if mode == "auto" else mode
        if found == "yes":
            others = [ClusterNode(urlsplit(n).hostname, urlsplit(n).port or 6379)
                      for n in nodes[1:]]
            return redis.RedisCluster.from_url(nodes[0], startup_nodes=others, **options)
        client = redis.Redis.from_url(nodes[0], **options)
        client.ping()
        return client

    try:
        client = retry.call(attempt, retry_timeout, what=f"Redis at {where(url)}",
                            final=lambda exc: tls_mismatch(exc, nodes[0], min(timeout or 2, 2)))
    except (redis.RedisError, RedisClusterException) as exc:
        raise connection_error(exc, url) from exc
    except ValueError as exc:  # redis-py's URL parser: a bad port or query value
        raise IckConfigError(f"redis.url {redact(url)!r} is not a valid Redis URL: {exc}"
                             ) from None
    retry.configure(client, retry_timeout)
    return client


def _detect(nodes: list[str], options: dict[str, Any]) -> str:
    """``"yes"`` when the first seed node that answers is a cluster node, else ``"no"``."""
    error: Exception | None = None
    for node in nodes:
        probe = redis.Redis.from_url(node, **options)
        try:
            return "yes" if probe.info("cluster").get("cluster_enabled") else "no"
        except redis.RedisError as exc:
            if retry.transient(exc) and node != nodes[-1]:
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
