"""Shared fixtures: one Redis server, one 3-master cluster and one SparkSession per run
(per worker under pytest-xdist: each worker is a process with its own).

The servers and the session come from pyspark_ick.testing (the helpers users get too).
Each test gets clients on a flushed database, so tests never see each other's keys. A test
that kills or restarts Redis gets a server of its own (``durable``, behind ``proxy``).

The hooks at the end: files holding ``slow`` tests run first (so that under
``--dist loadfile`` the long files start early and the short ones fill in around them),
and the terminal summary adds the seconds each file took and the tests over
``FAST_LIMIT_S`` seconds that lack the ``slow`` marker (CONTRIBUTING.md, test tiers).
"""

from __future__ import annotations

import os
from collections import defaultdict
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

# Every JVM the tests start through spark-submit (the shared sessions; the crash, soak and
# example children; the Connect server; spark-pipelines) and the standalone cluster's
# daemons compile with C1 only and collect with the serial collector: a test JVM lives
# seconds to minutes on little data, where C2's compiling costs more CPU than it saves
# (CONTRIBUTING.md, "Setting up and running the tests").
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
for _var in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_var, JVM_OPTIONS)


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


FAST_LIMIT_S = 3.0
"""A test over this many seconds at rest (setup, call and teardown) belongs in the slow tier
(the first test to use a session fixture pays for its start: a SparkSession takes 4-8 s)."""

_file_seconds: defaultdict[str, float] = defaultdict(float)
_test_seconds: defaultdict[str, float] = defaultdict(float)
_slow_ids: set[str] = set()  # by the reports' keywords: xdist's controller collects nothing


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a ``slow`` test first, in their order, then the rest (a stable sort:
    the tests of a file keep theirs)."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add each phase's seconds to its test and its file (under xdist: on the controller,
    which gets every worker's reports)."""
    _file_seconds[report.nodeid.split("::")[0]] += report.duration
    _test_seconds[report.nodeid] += report.duration
    if "slow" in report.keywords:
        _slow_ids.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Seconds per file, slowest first, and the unmarked tests over FAST_LIMIT_S."""
    if not _file_seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.write_sep("=", "seconds per file (setup + call + teardown)")
    for path, seconds in sorted(_file_seconds.items(), key=lambda kv: -kv[1]):
        write(f"{seconds:8.1f}s {path}")
    write(f"{sum(_file_seconds.values()):8.1f}s in all ({len(_file_seconds)} files)")
    unmarked = {
        nodeid: seconds
        for nodeid, seconds in _test_seconds.items()
        if seconds > FAST_LIMIT_S and nodeid not in _slow_ids
    }
    if unmarked:
        terminalreporter.write_sep(
            "=", f"over {FAST_LIMIT_S:.0f} s without @pytest.mark.slow (the fast tier runs them)"
        )
        for nodeid, seconds in sorted(unmarked.items(), key=lambda kv: -kv[1])[:20]:
            write(f"{seconds:8.1f}s {nodeid}")
