"""The pytest fixtures of ``pytest_plugins = ["pyspark_ick.testing"]``: one server, cluster,
TLS server and SparkSession per test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .cluster import RedisClusterServers, redis_cluster
from .servers import RedisServer, redis_server, server_binary
from .session import spark_session
from .tls import tls_redis_server, tls_supported


@pytest.fixture(scope="session")
def redis_standalone() -> Iterator[RedisServer]:
    """One throwaway Redis server for the test session."""
    with redis_server() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster_nodes() -> Iterator[RedisClusterServers]:
    """One throwaway 3-master Redis Cluster for the test session."""
    with redis_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_tls() -> Iterator[RedisServer]:
    """One throwaway TLS-only Redis (``rediss://``) for the test session; skips the test
    when ``server_binary()`` was built without TLS."""
    if not tls_supported():
        pytest.skip(f"{server_binary()} was built without TLS (no tls-port setting)")
    with tls_redis_server() as server:
        yield server


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the test session."""
    session = spark_session()
    yield session
    session.stop()
