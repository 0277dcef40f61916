"""Acknowledged means replicated, when asked (``redis.waitReplicas``): a producer's write,
a stream reader's reservation (claim) and commit return only once that many replicas have
them.

Redis replicates asynchronously: a primary that dies right after it acknowledged a write
may take the write with it when a replica is promoted. WAIT n t blocks until n replicas
have acknowledged every write made *on the same connection* so far, or t ms pass. So
``write`` runs the calls of one write and then WAIT on pinned connections (pinned.py): one
connection of the client's pool, or on Redis Cluster one per node the write touched (every
call of a shard goes to the node that owns its slot); kept for the next write. If such a
connection was opened again in between (the primary failed over, a reset, a MOVED slot),
the WAIT would not cover the calls sent on the old one: a replay-safe write runs again on
the new connection, any other fails. So does a replay-safe write that a primary Sentinel
has replaced took (it gets no replica: WAIT times out, the sentinels name another primary),
and one whose node refuses as a replica (READONLY, "WAIT cannot be used with replica
instances", MOVED: a primary paused past the failover and continued, issue 40): that is a
failover, so the write goes to the new primary (the sentinels asked again, a cluster's
slots read again) and runs there; its last error says a failover happened. Through
Sentinel a confirmed write counts only if the sentinels still name its node: a paused
primary that continues after the promotion is confirmed by the replica not yet turned
over to the new one, and both drop the write when it is (issue 40's storm); such a write
runs again on the new primary.
Fewer replicas than asked within ``redis.waitTimeout``: a replay-safe write WAITs again,
like any transient error, until ``redis.retryTimeout``; then (at once for the others) it is
ReplicationError: the write is on the primary and may or may not survive a failover;
writing it again is safe for the same writes that a retry is safe for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from . import retry
from .clients import DEFAULT_WAIT_TIMEOUT, settings
from .error_kinds import failed_over, retryable
from .errors import IckConfigError, IckConnectionError, ReplicationError
from .pinned import Pinned, PinnedCluster, pin
from .redis_errors import brief, translate

logger = logging.getLogger("pyspark_ick.replication")

T = TypeVar("T")

AGAIN = 0.1
"""Seconds between runs of a write that a node refused as a replica (a failover)."""


def check(replicas: Any, timeout: Any) -> None:
    """IckConfigError unless ``replicas`` is an integer >= 0 and ``timeout`` > 0 seconds."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise IckConfigError(f"redis.waitReplicas must be an integer >= 0, got {replicas!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise IckConfigError(f"redis.waitTimeout must be more than 0 seconds, got {timeout!r}")


def configure(client: Any, replicas: int, timeout: float = DEFAULT_WAIT_TIMEOUT) -> None:
    """Make the writes through ``client`` (``write``) wait for ``replicas`` replicas (0: do
    not wait), ``timeout`` seconds at most."""
    check(replicas, timeout)
    found = settings(client)
    found.wait_replicas, found.wait_timeout = replicas, float(timeout)


def waits(client: Any) -> bool:
    """Whether writes through ``client`` wait for replicas (and so may run again)."""
    return settings(client).wait_replicas > 0


def _take(client: Any) -> Pinned | PinnedCluster:
    found = settings(client)
    with found.lock:
        if found.spare:
            return found.spare.pop()  # type: ignore[no-any-return]
    return retry.call(lambda: pin(client), found.retry_timeout, what="Redis")


def _give_back(client: Any, pinned: Pinned | PinnedCluster) -> None:
    found = settings(client)
    with found.lock:
        found.spare.append(pinned)


def write(client: Any, calls: Callable[[Any], T], *, what: str, replay_safe: bool = True) -> T:
    """``calls(c)``: the calls of one write on client ``c``; with redis.waitReplicas > 0,
    ``c`` is pinned (pinned.py) and ``write`` returns once WAIT saw that many replicas
    confirm them (see the module docstring); with 0, ``c`` is ``client`` and nothing more
    is sent. ``replay_safe``: whether running the write again is harmless (it is after a
    connection was opened again mid-write)."""
    found = settings(client)
    replicas, timeout = found.wait_replicas, found.wait_timeout
    if not replicas:
        return calls(client)
    try:
        pinned = _take(client)
    except redis.RedisError as exc:
        raise translate(exc, what) from exc
    deadline = time.monotonic() + found.retry_timeout
    run, warned = True, False
    failover: BaseException | None = None  # the last refusal of a node now a replica
    confirmed: int | None = None  # what the last WAIT that answered counted
    try:
        while True:
            if run:
                pinned.start()
                try:
                    result = calls(pinned)
                except (redis.RedisError, IckConnectionError) as exc:
                    if not (replay_safe and failed_over(exc)):
                        raise
                    failover = exc  # refused as a replica all along: to the new primary
                    pinned.stale()
                    if time.monotonic() > deadline:
                        raise _unconfirmed(what, replicas, exc, failover, confirmed) from exc
                    time.sleep(AGAIN)
                    continue
            try:
                if pinned.lost():  # part went on a connection now gone
                    raise redis.ConnectionError("the connection was opened again mid-write")
                confirmed = pinned.confirm(replicas, timeout)
            except redis.RedisError as exc:
                if failed_over(exc):  # the node is a replica now: go to the new primary
                    failover = exc
                    pinned.stale()
                if not (replay_safe and retryable(exc, True)) or time.monotonic() > deadline:
                    raise _unconfirmed(
                        what, replicas, exc, failover, confirmed, replay_safe
                    ) from exc
                run = True  # run the write again on the new connection, then WAIT
                continue
            if confirmed >= replicas:
                if not pinned.demoted():
                    return result
                # the sentinels name another primary: the replicas that confirmed follow
                # the old one and drop the write when Sentinel turns them over (issue 40)
                failover = redis.ConnectionError("the sentinels name another primary now")
                if not replay_safe or time.monotonic() > deadline:
                    raise _unconfirmed(what, replicas, failover, failover, confirmed, replay_safe)
                run = True
                continue
            if not replay_safe or time.monotonic() > deadline:
                raise ReplicationError(
                    f"{what}: only {confirmed} of the {replicas} replica(s) asked for "
                    f"(redis.waitReplicas) confirmed the write within {timeout:g} s "
                    "(redis.waitTimeout)"
                    + (" and again until redis.retryTimeout" * warned)
                    + "; it is on the primary but may not survive a failover. Are the "
                    "replicas up and connected (INFO replication)? Lower redis.waitReplicas "
                    "to the replicas there are, or raise redis.waitTimeout"
                )
            run = pinned.demoted()  # a primary Sentinel replaced took it: run it again
            if not warned:
                logger.warning(
                    "%s: only %d of the %d replica(s) asked for (redis.waitReplicas) "
                    "confirmed within %g s; waiting for up to %.0f s more (redis.retryTimeout)",
                    what,
                    confirmed,
                    replicas,
                    timeout,
                    deadline - time.monotonic(),
                )
                warned = True
    finally:
        _give_back(client, pinned)


def _unconfirmed(
    what: str,
    replicas: int,
    exc: BaseException,
    failover: BaseException | None,
    confirmed: int | None,
    replay_safe: bool = True,
) -> IckConnectionError:
    """The error of a write whose WAIT could not be had: after a failover (a node that
    refused as a replica, or one the sentinels no longer name), or a connection lost
    mid-write. A write that is not ``replay_safe`` was not run again."""
    said = "no WAIT answered" if confirmed is None else f"the last WAIT counted {confirmed}"
    if failover is not None:
        again, advice = (
            (
                f"it ran again on the new primary until redis.retryTimeout, but {said}",
                "writing it again is safe",
            )
            if replay_safe
            else (
                f"{said}, and it was not run again (it cannot tell its own write from another's)",
                "see whether it is there before writing it again",
            )
        )
        return IckConnectionError(
            f"{what}: a failover happened while the write waited for {replicas} replica(s) "
            f"(redis.waitReplicas): the node it ran on is a replica now, or not the primary "
            f"the sentinels name ({brief(str(failover))}); {again} "
            f"({type(exc).__name__}: {brief(str(exc))}). It may not survive the failover; "
            f"{advice}. Is a new primary up (Sentinel, CLUSTER NODES)?"
        )
    return IckConnectionError(
        f"{what}: the write ran, but the connection to the primary was lost before "
        f"{replicas} replica(s) confirmed it (redis.waitReplicas; {said}): it may not "
        f"survive a failover ({type(exc).__name__}: {exc})"
    )
