"""Shared fixtures: one Redis server, one 3-master cluster and one SparkSession per run.

The servers and the session come from pyspark_ick.testing (the helpers users get too).
Each test gets clients on a flushed database, so tests never see each other's keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_ick import connect
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
