"""Answers that no retry can change fail at once, naming the cause and what to do (issue
40 item 3), at the defaults (redis.timeout 10 s, redis.retryTimeout 60 s): redis.cluster
forced on a server of the other kind, TLS to a plain port (within the handshake deadline),
a wrong password, an unknown user, no password where one is needed, a missing ACL
permission, a command that this Redis does not know (one older than 6.2). Each test
prints the time it took."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from pyspark_ick import IckConfigError, IckConnectionError, IckError, ShardedIck, connect
from pyspark_ick.bounded import HANDSHAKE_TIMEOUT
from pyspark_ick.snapshots import scores_of
from pyspark_ick.testing import RedisServer, start_binary

PROMISE = 2.0  # seconds


def timed(what: str, fail: Callable[[], Any], error: type[Exception], limit: float) -> str:
    """The message of ``error`` that ``fail()`` raised, asserting it came within ``limit``."""
    started = time.monotonic()
    with pytest.raises(error) as info:
        fail()
    took = time.monotonic() - started
    print(f"{what}: failed in {took:.2f} s: {info.value}")
    assert took < limit, (what, took)
    return str(info.value)


@pytest.fixture
def own_server(request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    """A server of this test only, started with ``request.param``'s arguments."""
    server = start_binary(None, *getattr(request, "param", ()))
    yield server
    server.stop()


def test_cluster_forced_on_a_standalone_server(redis_url):
    said = timed(
        "redis.cluster=true on a standalone server",
        lambda: connect(redis_url, cluster=True),
        IckConfigError,
        PROMISE,
    )
    assert "redis.cluster is true" in said and "no cluster mode" in said
    assert "set redis.cluster to auto" in said


def test_no_cluster_forced_on_a_cluster_node(cluster_url):
    said = timed(
        "redis.cluster=false on a cluster node",
        lambda: connect(cluster_url, cluster=False),
        IckConfigError,
        PROMISE,
    )
    assert "redis.cluster is false" in said and "is a Redis Cluster node" in said
    assert "set redis.cluster to auto" in said


def test_tls_to_a_plain_port_fails_within_the_handshake_deadline(redis_url):
    plain = f"rediss://127.0.0.1:{urlsplit(redis_url).port}/0"
    said = timed(
        "rediss:// to a plain port",
        lambda: connect(plain),  # redis.timeout 10 s: the handshake has its own deadline
        IckConnectionError,
        HANDSHAKE_TIMEOUT + 1.5,
    )
    assert "TLS handshake failed" in said and "Use redis://" in said


@pytest.mark.parametrize(
    "how, words",
    [
        ("wrong password", "refused the username or password"),
        ("unknown user", "refused the username or password"),
        ("no password", "needs a password (NOAUTH)"),
    ],
)
def test_credentials_refused(own_server, how, words):
    with own_server.client() as admin:
        admin.config_set("requirepass", "right")
    user = {"wrong password": ":wrong@", "unknown user": "nobody:right@", "no password": ""}
    url = own_server.url.replace("redis://", f"redis://{user[how]}")
    said = timed(how, lambda: connect(url), IckConnectionError, PROMISE)
    assert words in said and "right" not in said.replace("redis://", "")


def test_a_missing_acl_permission(acl_url):
    client = connect(acl_url)
    said = timed(
        "an ACL user writing a key it may not",
        lambda: ShardedIck(client, "not_allowed").add({"a": 1.0}),
        IckError,
        PROMISE,
    )
    assert "the ACL user may not do this" in said and "docs/security.md" in said
    client.close()


@pytest.mark.parametrize("own_server", [("--rename-command", "ZMSCORE", "")], indirect=True)
def test_a_command_this_redis_does_not_know(own_server):
    client = connect(own_server.url)  # ZMSCORE came with Redis 6.2; here it is unknown
    said = timed(
        "a command the server does not know",
        lambda: scores_of(client, "q/ick/{q}/pset", [b"a"], "Ick 'q'"),
        IckError,
        PROMISE,
    )
    assert "Ick 'q'" in said and "does not know a command" in said
    assert "Redis 6.2 or later" in said and "rename-command" in said
    client.close()
