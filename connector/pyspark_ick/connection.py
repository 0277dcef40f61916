"""connect(): a Redis URL to a redis-py client, with cluster detection, retry, redaction."""

from __future__ import annotations

import re
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from .errors import IckConfigError, IckConnectionError

DEFAULT_URL = "redis://localhost:6379/0"
SCHEMES = ("redis", "rediss", "unix")
TRANSIENT = (redis.ConnectionError, redis.TimeoutError)
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


class FailFastRetry(Retry):
    """Retries transient errors, but not a refused password or certificate (fail at once)."""

    def call_with_retry(self, do: Any, fail: Any, is_retryable: Any = None,
                        with_failure_count: bool = False) -> Any:
        def retryable(error: Exception) -> bool:
            if permanent(error):
                return False
            return is_retryable is None or bool(is_retryable(error))

        return super().call_with_retry(do, fail, retryable, with_failure_count)


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
    try:
        port = parts.port or 6379
    except ValueError:
        port = "?"
    return f"{parts.scheme}://{parts.hostname}:{port}"


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


def connection_error(exc: Exception, url: str | None = None) -> IckConnectionError:
    """An IckConnectionError for ``exc`` that names no credentials."""
    target = f" at {where(url)}" if url else ""
    if refused(exc):
        return IckConnectionError(
            f"Redis{target} refused the username or password "
            "(check redis.username / redis.password or the URL)"
        )
    return IckConnectionError(f"cannot reach Redis{target}: {type(exc).__name__}: {exc}")


def connect(
    url: str = DEFAULT_URL,
    *,
    cluster: Any = "auto",
    username: str | None = None,
    password: str | None = None,
    timeout: float | None = 10.0,
    retries: int = 5,
    **kw: Any,
) -> redis.Redis | redis.RedisCluster:
    """A redis-py client for ``url`` (``redis://``, ``rediss://`` for TLS, ``unix://``).

    ``cluster``: ``"auto"`` asks the server whether it is a cluster node; true/false force
    it. Connection errors and timeouts are retried ``retries`` times with jittered backoff.
    Extra keyword arguments go to redis-py (``ssl_ca_certs=...``, ``decode_responses``).
    """
    if urlsplit(url).scheme not in SCHEMES:
        raise IckConfigError(
            f"redis.url must start with redis://, rediss:// or unix://, got {redact(url)!r}"
        )
    mode = parse_cluster(cluster)
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": FailFastRetry(ExponentialWithJitterBackoff(base=0.05, cap=2.0), retries,
                               TRANSIENT),
        **kw,
    }
    if username is not None:
        options["username"] = username
    if password is not None:
        options["password"] = password
    try:
        if mode == "auto":
            probe = redis.Redis.from_url(url, **options)
            try:
                mode = "yes" if probe.info("cluster").get("cluster_enabled") else "no"
            finally:
                probe.close()
        if mode == "yes":
            options.pop("retry")  # RedisCluster retries by itself, node by node
            return redis.RedisCluster.from_url(url, **options)
        client = redis.Redis.from_url(url, **options)
        client.ping()
        return client
    except (redis.RedisError, RedisClusterException) as exc:
        raise connection_error(exc, url) from exc
    except ValueError as exc:  # redis-py's URL parser: a bad port or query value
        raise IckConfigError(f"redis.url {redact(url)!r} is not a valid Redis URL: {exc}"
                             ) from None


@dataclass(frozen=True)
class ConnectionSpec:
    """How to reach Redis: picklable (Spark ships it to executors), redacted in repr."""

    url: str = DEFAULT_URL
    cluster: str = "auto"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 10.0

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
