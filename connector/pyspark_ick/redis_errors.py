"""How a Redis error is said to a user: the IckError for an error raised by redis-py,
naming the Ick, the server (without credentials) and what to do. What an error means (may
a retry help, can the command have run): error_kinds.py.
"""

from __future__ import annotations

import re
import ssl
from urllib.parse import urlsplit

import redis
from redis.exceptions import RedisClusterException
from redis.sentinel import MasterNotFoundError

from .error_kinds import (
    NOT_A_CLUSTER,
    asked_for_password,
    chain,
    no_permission,
    permanent,
    refused,
    sentinel_refused,
    transient,
    unknown_command,
    unverified,
)
from .errors import (
    IckConfigError,
    IckConnectionError,
    IckError,
    IckScriptError,
    LeaseBusy,
    LeaseError,
    LeaseLost,
    RedisFullError,
)
from .urls import is_sentinel, parse_sentinel, where

_SENTINEL_ERROR = re.compile(
    r"<redis\.client\.Redis\(.*?host=([^,>]+),port=(\d+).*? - (.*?)(?=, <redis\.client\.|$)",
    re.DOTALL,
)


def cluster_mismatch(url: str, forced: bool) -> IckConfigError:
    """The error for redis.cluster ``forced`` (true or false) against a server of the
    other kind."""
    if forced:
        said = f"true, but Redis at {where(url)} has no cluster mode ({NOT_A_CLUSTER})"
        fix = "false"
    else:
        said = f"false, but Redis at {where(url)} is a Redis Cluster node (cluster_enabled:1)"
        fix = "true"
    return IckConfigError(
        f"redis.cluster is {said}: set redis.cluster to auto (it detects the mode) or {fix}"
    )


CA_HINT = (
    "the server's TLS certificate did not verify: give the CA that signed it with "
    "?ssl_ca_certs=/path/ca.crt in the URL (a private CA), and check that the URL's host "
    "is a name the certificate holds"
)


def tls_hint(error: BaseException, scheme: str) -> str | None:
    """A hint when the first contact failed the way a TLS mismatch does, else None: a TLS
    handshake with a plain server times out or fails; a plain client is reset by a server
    that speaks only TLS (and by a load balancer whose Redis is restarting). A certificate
    that does not verify is no mismatch (``unverified``)."""
    errors = chain(error)
    if unverified(error):
        return None
    if scheme == "rediss" and any(
        isinstance(e, ssl.SSLError) or "handshake" in str(e) for e in errors
    ):
        return (
            "the TLS handshake failed: is this a plain (non-TLS) Redis? Use redis:// "
            "for it, rediss:// only for a TLS port"
        )
    if scheme == "redis" and any(isinstance(e, ConnectionResetError) for e in errors):
        return (
            "the server reset the connection: does it speak only TLS? Use rediss:// "
            "(with ?ssl_ca_certs=/path/ca.crt for a private CA)"
        )
    return None


def connection_error(
    exc: Exception, url: str | None = None, *, mismatch: bool = False, waited: float | None = None
) -> IckConnectionError:
    """An IckConnectionError for ``exc`` that names no credentials. ``mismatch``: the server
    answered the other way (TLS against plain), so the TLS hint applies; ``waited``: the
    seconds of redis.retryTimeout a transient error was retried for (a reset from a load
    balancer whose Redis is down is no TLS mismatch)."""
    if url and is_sentinel(url):
        return sentinel_connection_error(exc, url)
    target = f" at {where(url)}" if url else ""
    if refused(exc) and asked_for_password(exc):
        return IckConnectionError(
            f"Redis{target} needs a password (NOAUTH): give redis.password (and "
            "redis.username for an ACL user), or user:password@ in the URL"
        )
    if refused(exc):
        return IckConnectionError(
            f"Redis{target} refused the username or password "
            "(check redis.username / redis.password or the URL)"
        )
    hint = None
    if unverified(exc):
        hint = CA_HINT
    elif mismatch and url:
        hint = tls_hint(exc, urlsplit(url).scheme)
    elif waited is not None and transient(exc):
        hint = (
            f"it did not answer within redis.retryTimeout ({waited:g} s): is it up (restarting, "
            "failing over?) and is the address right? Raise redis.retryTimeout to wait longer"
        )
    return IckConnectionError(
        f"cannot reach Redis{target}: "
        + (f"{hint} ({type(exc).__name__}: {exc})" if hint else f"{type(exc).__name__}: {exc}")
    )


def brief(message: str) -> str:
    """redis-py's MasterNotFoundError text without its client reprs (hundreds of
    characters each): ``"host:port: cause; ..."``, each cause cut to a line."""
    if "<redis.client." not in message:
        return message
    found = _SENTINEL_ERROR.findall(message)
    said = [f"{host}:{port}: {cause.strip()[:120]}" for host, port, cause in found]
    head = message.split(" : ", 1)[0]
    return f"{head}: {'; '.join(said)}" if said else head


def sentinel_connection_error(exc: Exception, url: str) -> IckConnectionError:
    """connection_error for a Sentinel URL: which credentials were refused (the sentinels'
    or the primary's), or that no sentinel answered (naming them all), or that they know
    the service but report no primary up."""
    service, asked = parse_sentinel(url).service, where(url)
    if sentinel_refused(exc):
        return IckConnectionError(
            f"the sentinels of {asked} refused the sentinel username or password (check the "
            "sentinel_username / sentinel_password query parameters of redis.url; the URL's "
            "user:password@ and redis.username / redis.password are the primary's)"
        )
    if refused(exc):
        return IckConnectionError(
            f"the primary of service {service!r} ({asked}) refused the username or password "
            "(check redis.username / redis.password or the URL's user:password@; the "
            "sentinels' are the sentinel_username / sentinel_password query parameters)"
        )
    found = [e for e in chain(exc) if isinstance(e, MasterNotFoundError)]
    if found and " : " in str(found[0]):
        return IckConnectionError(
            f"no sentinel answered within redis.retryTimeout; asked {asked} "
            f"({brief(str(found[0]))})"
        )
    if found:
        return IckConnectionError(
            f"the sentinels of {asked} know service {service!r} but report no primary up "
            "within redis.retryTimeout (a failover that did not finish, or no replica to "
            "promote?)"
        )
    return IckConnectionError(
        f"cannot reach the primary of service {service!r} ({asked}): {type(exc).__name__}: {exc}"
    )


def unknown_service(url: str, service: str, known: dict[str, list[str]]) -> IckConfigError:
    """The error for a service name that the sentinels that answered do not monitor."""
    listed = "; ".join(
        f"{where_} monitors {', '.join(map(repr, names)) or 'nothing'}"
        for where_, names in known.items()
    )
    return IckConfigError(
        f"the sentinels know no service {service!r}: asked {where(url)} ({listed}; "
        "SENTINEL MASTERS); check the service name in redis.url"
    )


def translate(exc: Exception, what: str | None = None) -> IckError:
    """The IckError for an error raised by redis-py; ``what`` names the Ick or dehydrator."""
    message = brief(str(exc))
    if permanent(exc):  # a refused password or certificate: not retried
        return connection_error(exc)
    if isinstance(
        exc, (redis.ConnectionError, redis.TimeoutError, RedisClusterException)
    ) or transient(exc):
        return IckConnectionError(
            f"{what or 'Redis'}: Redis did not answer within redis.retryTimeout "
            f"(restarting, failing over, migrating a slot?): {type(exc).__name__}: {message}"
        )
    if "ICK " in message:  # raised by ick_fail in lua/_prelude.lua (its error scheme)
        message = message[message.index("ICK ") + 4 :]
        if message.startswith("LEASE "):
            return lease_refusal(message.split(" script: ")[0][6:], what or "a shard")
    # Redis 7 appends the script location to errors raised inside scripts
    message = message.split(" script: ")[0].strip()
    if no_permission(exc):
        return IckScriptError(
            f"{what or 'Redis'}: the ACL user may not do this (Redis said: {message}): give "
            "it the rules of docs/security.md (pyspark_ick.acl.acl_line)"
        )
    if unknown_command(exc):
        return IckScriptError(
            f"{what or 'Redis'}: Redis does not know a command the connector sends (Redis "
            f"said: {message}): pyspark-ick needs Redis 6.2 or later (or Valkey 7.2 or "
            "later), with none of its commands renamed or disabled (rename-command)"
        )
    if isinstance(exc, redis.exceptions.OutOfMemoryError) or "OOM command not allowed" in message:
        said = (
            message[message.index("command not allowed") :]
            if "command not allowed" in message
            else message
        )  # Redis 6.2 wraps it in "Error running script ..."
        return RedisFullError(
            f"{what or 'the write'}: Redis is full (used memory > maxmemory, and the "
            "eviction policy keeps every key): nothing was added. Let the consumers drain "
            f"the queues, or raise maxmemory. Redis said: {said}"
        )
    return IckScriptError(message)  # script errors name their keys themselves


def lease_refusal(detail: str, what: str) -> LeaseError:
    """The error for ``ICK LEASE <detail>`` about ``what`` (lua/_prelude.lua): LeaseBusy
    when acquiring a lease another owner holds, LeaseLost when the caller was fenced."""
    kind, expires, idle, renewed, gone, *owner_words = detail.strip().split(" ")
    owner = " ".join(owner_words)
    if kind == "busy":
        return LeaseBusy(
            f"{what}: cannot consume: consumer {owner!r} holds the lease "
            f"(renewed {idle} ms ago, expires in {expires} ms unless renewed)",
            owner,
            int(expires),
            int(idle),
            int(renewed),
            int(gone),
        )
    holder = f"{owner!r} holds it now, with a newer token" if owner else "nobody holds it"
    return LeaseLost(
        f"{what}: this consumer lost its lease ({holder}): it may not reserve or commit any more",
        owner,
    )


def in_cli_terms(text: str) -> str:
    """A library message as the CLI and the console say it: the option they have for the
    one it names (``redis.retryTimeout`` is ``--retry-timeout`` there)."""
    return text.replace("redis.retryTimeout", "--retry-timeout")
