"""The retry rule (error_kinds.py) and the error translation (redis_errors.py),
table-driven: which errors a retry may cure (transient), which prove the command never ran
(not_run), and so which calls retry.call repeats, replay-safe or not. The errors that only
a real connection gives (their redis-py frames tell a reset while connecting from one
mid-call) come from real sockets: a closed port, a proxy that resets, a proxy that
swallows the reply."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

import pytest
import redis
from fault_proxy import FaultProxy
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

from pyspark_ick import (
    IckConnectionError,
    IckScriptError,
    LeaseBusy,
    LeaseLost,
    RedisFullError,
    retry,
)
from pyspark_ick import error_kinds as kinds
from pyspark_ick import redis_errors as rules
from pyspark_ick.testing import free_port


def raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the error is the result
        return exc
    raise AssertionError("no error")


def bare(port: int, timeout: float = 1.0) -> redis.Redis:
    """A redis-py client without retries of its own."""
    return redis.Redis(
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def refused_port() -> BaseException:
    return raised(bare(free_port()).ping)


def reset_while_connecting(proxy: FaultProxy) -> BaseException:
    proxy.reset_new(5)
    return raised(bare(proxy.port).ping)


def reply_lost(proxy: FaultProxy) -> BaseException:
    client = bare(proxy.port, timeout=0.3)
    client.ping()  # connected: the next command is sent, its reply never comes
    proxy.blackhole(1)
    return raised(client.ping)


def reset_mid_call(proxy: FaultProxy) -> BaseException:
    """A reset while redis-py waits for a reply: the command went out, then the proxy
    swallows its reply and resets the connection (the end of a half-open spell)."""
    client = bare(proxy.port, timeout=5)
    client.ping()
    proxy.blackhole(0.3)
    return raised(client.ping)


def no_sentinel_answers() -> BaseException:
    """redis-py's error when every sentinel refuses the connection (closed ports)."""
    sentinels = Sentinel(
        [("127.0.0.1", free_port()), ("127.0.0.1", free_port())],
        sentinel_kwargs={"retry": Retry(NoBackoff(), 0)},
    )
    return raised(lambda: sentinels.discover_master("svc"))


def cert_refused() -> BaseException:
    cause = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error = redis.ConnectionError("Error connecting: certificate verify failed")
    error.__cause__ = cause
    return error


#: name, the error, transient, not_run
WAIT_ON_REPLICA = (
    "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a "
    "replica is configured to be writable (which is not the default) writes to replicas are "
    "just local and are not propagated."
)


UNBLOCKED = (
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
)
RULES: list[tuple[str, Callable[[Any], BaseException], bool, bool]] = [
    ("LOADING", lambda p: redis.exceptions.BusyLoadingError("Redis is loading"), True, True),
    ("TRYAGAIN", lambda p: redis.exceptions.TryAgainError("TRYAGAIN slot"), True, True),
    ("READONLY", lambda p: redis.exceptions.ReadOnlyError("You can't write"), True, True),
    ("CLUSTERDOWN", lambda p: redis.exceptions.ClusterDownError("CLUSTERDOWN"), True, True),
    (
        "MASTERDOWN",
        lambda p: redis.ResponseError("MASTERDOWN Link with MASTER is down"),
        True,
        True,
    ),
    (
        "BUSY script",
        lambda p: redis.ResponseError("BUSY Redis is busy running a script"),
        True,
        True,
    ),
    (
        "no reachable cluster node",
        lambda p: RedisClusterException(
            "Redis Cluster cannot be connected. Please provide at least one reachable node"
        ),
        True,
        True,
    ),
    ("connection refused", lambda p: refused_port(), True, True),
    # a Sentinel failover: no sentinel answers (each is skipped for the next by redis-py),
    # the sentinels answer but no primary is up yet, a primary that was demoted answered
    # READONLY (redis-py's Sentinel connection turns it into this ConnectionError)
    ("Sentinel: no sentinel answers", lambda p: no_sentinel_answers(), True, True),
    (
        "Sentinel: no primary up yet",
        lambda p: MasterNotFoundError("No master found for 'svc'"),
        True,
        True,
    ),
    (
        "Sentinel: demoted primary",
        lambda p: redis.ConnectionError("The previous master is now a slave"),
        True,
        True,
    ),
    (  # a primary paused past the failover, continued as a replica: WAIT did not run
        "WAIT refused by a replica",
        lambda p: redis.ResponseError(WAIT_ON_REPLICA),
        True,
        True,
    ),
    ("reset while connecting", reset_while_connecting, True, True),
    ("reply lost (timeout mid-call)", reply_lost, True, False),
    ("reset mid-call", reset_mid_call, True, False),
    ("wrong password", lambda p: redis.AuthenticationError("invalid password"), False, False),
    (
        "WRONGPASS",
        lambda p: redis.ResponseError("WRONGPASS invalid username-password pair"),
        False,
        False,
    ),
    ("NOPERM", lambda p: redis.exceptions.NoPermissionError("NOPERM no permissions"), False, False),
    ("certificate", lambda p: cert_refused(), False, False),
    (
        "Sentinel: sentinel password refused",
        lambda p: MasterNotFoundError(
            "No master found for 'svc' : <redis.client.Redis(<redis.connection.ConnectionPool("
            "<redis.connection.Connection(host=127.0.0.1,port=5,db=0)>)>)> - AuthenticationError("
            "'invalid username-password pair or user is disabled.')"
        ),
        False,
        False,
    ),
    ("script error", lambda p: redis.ResponseError("ERR wrong number of arguments"), False, False),
    ("OOM", lambda p: redis.exceptions.OutOfMemoryError("OOM command not allowed"), False, False),
]


@pytest.mark.parametrize(
    ("error", "failed_over"),
    [
        (redis.ResponseError(WAIT_ON_REPLICA), True),
        (redis.exceptions.ReadOnlyError("You can't write against a read only replica."), True),
        (redis.exceptions.MovedError("3999 127.0.0.1:7001"), True),
        (redis.ConnectionError("The previous master is now a slave"), True),
        (redis.ResponseError(UNBLOCKED), True),
        (redis.exceptions.BusyLoadingError("LOADING Redis is loading"), False),
        (redis.ConnectionError("Connection reset by peer"), False),
        (redis.ResponseError("ERR wrong number of arguments"), False),
    ],
    ids=str,
)
def test_a_refusal_as_a_replica_is_a_failover(error, failed_over):
    """What replication.write treats as a failover (the write goes to the new primary)."""
    assert kinds.failed_over(error) is failed_over
    wrapped = IckConnectionError("Ick 'q': Redis did not answer")
    wrapped.__cause__ = error
    assert kinds.failed_over(wrapped) is failed_over  # as scripts.run raises it


@pytest.mark.parametrize(("name", "make", "transient", "not_run"), RULES, ids=[r[0] for r in RULES])
def test_retry_rule(proxy, name, make, transient, not_run):
    error = make(proxy)
    assert kinds.transient(error) is transient, name
    assert kinds.not_run(error) is not_run, name
    assert kinds.retryable(error, replay_safe=True) is transient
    assert kinds.retryable(error, replay_safe=False) is not_run


@pytest.mark.parametrize(("name", "make", "transient", "not_run"), RULES, ids=[r[0] for r in RULES])
def test_retry_call_repeats_exactly_what_the_rule_allows(proxy, name, make, transient, not_run):
    error = make(proxy)
    for replay_safe, repeats in ((True, transient), (False, not_run)):
        calls = []

        def once(calls: list[int] = calls) -> str:
            calls.append(1)
            if len(calls) == 1:
                raise error
            return "ok"

        if repeats:
            assert retry.call(once, 5, replay_safe=replay_safe) == "ok" and len(calls) == 2
        else:
            with pytest.raises(type(error)):
                retry.call(once, 5, replay_safe=replay_safe)
            assert len(calls) == 1, (name, replay_safe)


def test_translate_names_what_to_do():
    full = rules.translate(
        redis.exceptions.OutOfMemoryError(
            "OOM command not allowed when used memory > 'maxmemory'."
        ),
        "Ick 'q'",
    )
    assert isinstance(full, RedisFullError) and "Ick 'q': Redis is full" in str(full)
    away = rules.translate(redis.ConnectionError("Error 111 connecting"), "Ick 'q'")
    assert isinstance(away, IckConnectionError) and "redis.retryTimeout" in str(away)
    wrong = rules.translate(redis.AuthenticationError("invalid password"))
    assert isinstance(wrong, IckConnectionError) and "refused the username" in str(wrong)
    script = rules.translate(
        redis.ResponseError("ICK no version flag at 'q' script: abc123, on @user_script:12.")
    )
    assert type(script) is IckScriptError and str(script) == "no version flag at 'q'"


def test_lease_refusals_are_busy_or_lost():
    busy = rules.translate(
        redis.ResponseError("ICK LEASE busy 5000 1000 77 4000 alpha"), "Ick 'q' shard 0"
    )
    assert isinstance(busy, LeaseBusy) and busy.owner == "alpha" and busy.idle_ms == 1000
    assert "'alpha' holds the lease" in str(busy)
    lost = rules.translate(redis.ResponseError("ICK LEASE lost 0 0 0 0 beta"), "Ick 'q'")
    assert isinstance(lost, LeaseLost) and not isinstance(lost, LeaseBusy)
    assert lost.owner == "beta" and "lost its lease ('beta' holds it now" in str(lost)


def test_a_certificate_that_does_not_verify_asks_for_the_ca_not_plain_redis():
    message = str(rules.connection_error(cert_refused(), "rediss://redis.internal:6379/0"))
    assert "ssl_ca_certs=/path/ca.crt" in message and "certificate did not verify" in message
    assert "plain (non-TLS)" not in message and "redis://" not in message.split("(")[0]
    assert rules.tls_hint(cert_refused(), "rediss") is None  # TLS works: no mismatch


def test_no_sentinel_answering_names_each_briefly():
    url = "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/svc"
    error = no_sentinel_answers()
    assert "<redis.client.Redis(" in str(error) and len(str(error)) > 500  # redis-py's text
    message = str(rules.connection_error(error, url))
    assert message.startswith("no sentinel answered within redis.retryTimeout; asked ")
    assert len(message) < 400 and "<redis" not in message and "REDACTED" not in message
    asked = [f"{host}:{port}: " for host, port, _ in rules._SENTINEL_ERROR.findall(str(error))]
    assert len(asked) == 2 and all(each in message for each in asked)
    assert "<redis" not in str(rules.translate(error))
