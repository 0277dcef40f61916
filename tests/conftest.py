"""Shared fixtures: one Redis server, one 3-master cluster and one SparkSession per run.

The servers and the session come from pyspark_ick.testing (the helpers users get too).
Each test gets clients on a flushed database, so tests never see each other's keys. A test
that kills or restarts Redis gets a server of its own (``durable``, behind ``proxy``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fault_proxy import FaultProxy
from redis_faults import start_durable
from support import ACL_NAMES, ACL_PASSWORD

from pyspark_ick import connect
from pyspark_ick.acl import acl_rules
from pyspark_ick.testing import RedisClusterServers, RedisServer

pytest_plugins = ["pyspark_ick.testing"]


@pytest.fixture
def redis_url(redis_standalone: RedisServer) -> str:
    """URL of the standalone server, flushed for this test."""
    with redis_standalone.client() as c:
        c.flushall()
    return redis_standalone.url


@pytest.fixture
def cluster_url(redis_cluster_nodes: RedisClusterServers) -> str:
    """URL of a node of the cluster, flushed (every primary) for this test."""
    for node in redis_cluster_nodes.nodes:
        with node.client() as c:
            c.flushall()
    return redis_cluster_nodes.url


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    """A pyspark_ick client of the standalone server."""
    c = connect(redis_url)
    yield c
    c.close()


@pytest.fixture
def cluster_client(cluster_url: str) -> Iterator[Any]:
    """A pyspark_ick client of the cluster."""
    c = connect(cluster_url)
    yield c
    c.close()


@pytest.fixture(params=["standalone", "cluster"])
def any_client(request: pytest.FixtureRequest) -> Any:
    """Each test that takes it runs on the standalone server and on the cluster."""
    name = "client" if request.param == "standalone" else "cluster_client"
    return request.getfixturevalue(name)


@pytest.fixture
def durable() -> Iterator[RedisServer]:
    """A Redis of this test only: appendonly yes, appendfsync always (redis_faults.kill
    and restart lose no acknowledged write)."""
    server = start_durable()
    yield server
    server.stop()


@pytest.fixture
def proxy(durable: RedisServer) -> Iterator[FaultProxy]:
    """A FaultProxy (tests/fault_proxy.py) in front of ``durable``."""
    with FaultProxy(durable.port) as fronted:
        yield fronted


@pytest.fixture
def acl_url(redis_url: str, redis_standalone: RedisServer) -> Iterator[str]:
    """The standalone server's URL as user ``ick`` (password ACL_PASSWORD), allowed only
    the keys of ACL_NAMES (support.py)."""
    with redis_standalone.client() as admin:
        admin.execute_command("ACL", "SETUSER", "ick", *acl_rules(ACL_PASSWORD, *ACL_NAMES))
    yield redis_url.replace("redis://", f"redis://ick:{ACL_PASSWORD}@")
    with redis_standalone.client() as admin:
        admin.execute_command("ACL", "DELUSER", "ick")
