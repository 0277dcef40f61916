"""What a Redis error means, in one place: whether a retry may help, whether the command
can have run, and the IckError a user sees.

The retry rule (retry.py applies it): an error is *transient* when a later attempt may
not meet it (an outage, a failover, a migrating slot); a transient error is retried for
any call if it proves the command never ran (*not_run*: a refusal such as LOADING,
TRYAGAIN or READONLY, a connection refused, or any error while redis-py was still opening
the connection), and only for a *replay-safe* call otherwise (a timeout or a reset
mid-call: the command may have run, its reply was lost). Credentials, certificates and
ACL permissions are never retried.

A Sentinel failover is transient like the others: redis-py's Sentinel client asks the
sentinels for the primary on each new connection (a sentinel that does not answer is
skipped for the next); no primary up yet (MasterNotFoundError) and a READONLY from a
demoted primary (which redis-py turns into "The previous master is now a slave") prove
the command never ran. A node that refuses as a replica (``failed_over``: READONLY, WAIT
refused on a replica, MOVED) was failed over: a write that waits for replicas runs again
on the new primary (replication.py).
"""

from __future__ import annotations

import os
import re
import ssl
from urllib.parse import urlsplit

import redis
from redis.exceptions import RedisClusterException
from redis.sentinel import MasterNotFoundError

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

REFUSALS = (
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MASTERDOWN",
    "READONLY",
    "MOVED",
    "ASK",
    "TTL exhausted",
    "WAIT cannot be used with replica",
)
"""Replies that refuse a command before it runs: the command did nothing."""

FAILED_OVER = (
    "READONLY",
    "You can't write against a read only replica",
    "MOVED",
    "UNBLOCKED force unblock from blocking operation, instance state changed",
)
"""Replies of a node that is a replica now, or no longer owns the slot: a failover (with
"WAIT cannot be used with replica" and redis-py's ``DEMOTED``). A WAIT that was blocked
when its primary turned into a replica is UNBLOCKED."""

NOT_RUN_TYPES = (
    redis.exceptions.BusyLoadingError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.AskError,
    redis.exceptions.SlotNotCoveredError,
)

CONNECTING = frozenset(
    {
        "connect",
        "_connect",
        "connect_check_health",
        "on_connect",
        "on_connect_check_health",
        "_connect_retry",
        "connect_to",
    }
)
"""redis-py's functions that open a connection (its modules connection.py and, for a
Sentinel's primary, sentinel.py): an error raised inside one of them came before the
command was sent."""
CONNECTING_FILES = tuple(os.path.join("redis", f) for f in ("connection.py", "sentinel.py"))

DEMOTED = "The previous master is now a slave"
"""redis-py's Sentinel client's ConnectionError for a READONLY reply of the primary it was
connected to: the command was refused (it did not run) and the next connection asks the
sentinels for the new primary."""

_SENTINEL_ERROR = re.compile(
    r"<redis\.client\.Redis\(.*?host=([^,>]+),port=(\d+).*? - (.*?)(?=, <redis\.client\.|$)",
    re.DOTALL,
)
SENTINEL_REFUSALS = (
    "AuthenticationError",
    "AuthenticationRequiredError",
    "WRONGPASS",
    "invalid username-password pair",
)


def chain(error: BaseException) -> list[BaseException]:
    """``error`` and its causes and contexts, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def refused(error: BaseException) -> bool:
    """True when Redis refused the credentials (also when wrapped, as RedisCluster does)."""
    return any(
        isinstance(e, redis.AuthenticationError)
        or "WRONGPASS" in str(e)
        or "invalid username-password pair" in str(e)
        for e in chain(error)
    )


NO_HELLO = "HELLO must be called with the client already authenticated"


def asked_for_password(error: BaseException) -> bool:
    """True when Redis wants a password and none was given (NOAUTH: to a command, or to
    the HELLO that redis-py opens a connection with)."""
    return any(
        "NOAUTH" in str(e) or "Authentication required" in str(e) or NO_HELLO in str(e)
        for e in chain(error)
    )


def sentinel_refused(error: BaseException) -> bool:
    """True when sentinels refused the credentials (``sentinel_username``,
    ``sentinel_password``): redis-py's MasterNotFoundError holds each sentinel's error as
    text only."""
    return any(
        isinstance(e, MasterNotFoundError) and any(r in str(e) for r in SENTINEL_REFUSALS)
        for e in chain(error)
    )


def permanent(error: BaseException) -> bool:
    """True for a connection error that no retry can cure: credentials or certificates."""
    return (
        refused(error)
        or sentinel_refused(error)
        or any(isinstance(e, ssl.SSLCertVerificationError) for e in chain(error))
    )


NOT_A_CLUSTER = "Cluster mode is not enabled"
"""redis-py's words when redis.cluster is true and the server has no cluster mode."""


def cluster_disabled(error: BaseException) -> bool:
    """True when a cluster client met a server without cluster mode: no retry helps."""
    return any(NOT_A_CLUSTER in str(e) for e in chain(error))


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


def no_permission(error: BaseException) -> bool:
    """True when the ACL user may not run a command or touch a key (NOPERM; inside a
    script Redis says "can't run this command")."""
    return any(
        isinstance(e, redis.exceptions.NoPermissionError)
        or "NOPERM" in str(e)
        or "can't run this command" in str(e)
        for e in chain(error)
    )


def unknown_command(error: BaseException) -> bool:
    """True when Redis does not know a command sent (a Redis older than 6.2, or a command
    renamed or disabled with rename-command)."""
    return any(
        "unknown command" in str(e) or "Unknown Redis command" in str(e) for e in chain(error)
    )


def _never_retried(error: BaseException) -> bool:
    return (
        permanent(error)
        or isinstance(error, redis.exceptions.AuthorizationError)
        or cluster_disabled(error)
    )


def while_connecting(error: BaseException) -> bool:
    """True when ``error`` was raised while redis-py opened the connection for the command
    (a refusal, a reset or a timeout of the handshake): the command was never sent.
    redis-py raises the same ConnectionError for a reset then and while reading a reply;
    only the frames tell them apart."""
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in CONNECTING and code.co_filename.endswith(CONNECTING_FILES):
            return True
        tb = tb.tb_next
    return False


def failed_over(error: BaseException) -> bool:
    """True when a node refused because it is no longer the primary of the key (a replica
    now, or its slot moved): a failover, after which the write goes to the new primary
    (ask Sentinel, read the slots again) and runs there again when it is replay-safe. A
    primary paused past the node timeout and replaced refuses WAIT this way once it runs
    again (issue 40)."""
    return any(
        isinstance(e, (redis.exceptions.ReadOnlyError, redis.exceptions.MovedError))
        or (isinstance(e, redis.ConnectionError) and str(e).startswith(DEMOTED))
        or str(e).lstrip("-").startswith((*FAILED_OVER, "WAIT cannot be used with replica"))
        for e in chain(error)
    )


def not_run(error: BaseException) -> bool:
    """True when Redis (or the network) refused the command before it ran."""
    if _never_retried(error):
        return False
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError)) and while_connecting(error):
        return True
    if isinstance(error, (*NOT_RUN_TYPES, MasterNotFoundError)):
        return True
    if isinstance(error, redis.ConnectionError) and str(error).startswith(DEMOTED):
        return True
    if isinstance(error, redis.ConnectionError) and (
        "Connection refused" in str(error) or "Error 111 " in str(error)
    ):
        return True
    if isinstance(error, RedisClusterException) and "at least one reachable node" in str(error):
        return True
    return str(error).lstrip("-").startswith(REFUSALS)


def transient(error: BaseException) -> bool:
    """True for an error that a later attempt may not meet (an outage, a failover)."""
    if _never_retried(error):
        return False
    if isinstance(
        error, (redis.ConnectionError, redis.TimeoutError, ConnectionError, TimeoutError)
    ):
        return True
    return not_run(error) or failed_over(error)


def retryable(error: BaseException, replay_safe: bool) -> bool:
    """Whether a call that raised ``error`` may be made again (see the module docstring)."""
    return transient(error) if replay_safe else not_run(error)


def unverified(error: BaseException) -> bool:
    """True when a TLS server's certificate did not verify (an unknown CA, another host
    name): TLS works, the client does not trust the server."""
    return any(
        isinstance(e, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(e)
        for e in chain(error)
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
