"""What a Redis error means: whether a retry may help, whether the command can have run.

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
on the new primary (replication.py). How each error is said to a user: redis_errors.py.
"""

from __future__ import annotations

import os
import ssl

import redis
from redis.exceptions import RedisClusterException
from redis.sentinel import MasterNotFoundError

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
