"""TLS, a restricted ACL user, fast failure on a wrong password, no password in any output,
and the durable server configuration of conf/redis.conf."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from support import ACL_NAMES, ACL_PASSWORD, cli_command

from pyspark_ick import (
    Ick,
    IckConfigError,
    IckConnectionError,
    IckScriptError,
    ShardedIck,
    connect,
)
from pyspark_ick.acl import acl_line, acl_rules
from pyspark_ick.clients import DEFAULT_RETRY_TIMEOUT
from pyspark_ick.connection import ConnectionSpec, redact
from pyspark_ick.ick import queue_add
from pyspark_ick.keys import IckKeys
from pyspark_ick.options import Options
from pyspark_ick.testing import free_port, server_binary, wait_until

ROOT = Path(__file__).resolve().parents[1]
WRONG = "wr0ng-Pa55"


def full_text(exc: BaseException) -> str:
    """The exception with its whole chain, as a traceback would print it."""
    return "".join(traceback.format_exception(exc))


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every log record of redis-py, pyspark_ick and the rest, at DEBUG."""
    for name in ("", "redis", "pyspark_ick"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


# --- TLS ----------------------------------------------------------------------------------


def test_tls_round_trip(redis_tls):
    ca = redis_tls.extra["ssl_ca_certs"]
    assert redis_tls.url.startswith("rediss://")
    client = connect(redis_tls.url, ssl_ca_certs=ca)
    ick = Ick(client, "tls_q")
    assert ick.add({"a": 2, "b": 1}) == (2, 0)
    assert ick.reserve(5) == [("b", 1.0), ("a", 2.0)]
    assert ick.commit("a", "b") == 2
    ick.delete()
    # the CA in the URL: how the formats' redis.url, REDIS_URL and the CLI pass it
    sharded = ShardedIck(connect(f"{redis_tls.url}?ssl_ca_certs={ca}"), "tls_s", 3)
    assert sharded.add({f"m{i}": i for i in range(30)}) == (30, 0)
    assert sharded.stats()["pset_size"] == 30
    sharded.delete()


def test_tls_without_the_ca_fails_at_once(redis_tls):
    started = time.monotonic()
    with pytest.raises(IckConnectionError, match="CERTIFICATE_VERIFY_FAILED") as failed:
        connect(redis_tls.url)
    # a certificate error is not retried: not redis.retryTimeout (60 s) of attempts
    assert time.monotonic() - started < DEFAULT_RETRY_TIMEOUT / 4
    assert "?ssl_ca_certs=/path/ca.crt" in str(failed.value)  # the CA is missing, not TLS
    assert "plain (non-TLS)" not in str(failed.value)


def test_cli_over_tls(redis_tls):
    url = f"{redis_tls.url}?ssl_ca_certs={redis_tls.extra['ssl_ca_certs']}"
    env = {**os.environ, "REDIS_URL": url}
    added = subprocess.run(
        cli_command("add", "tls_cli", "x", "y", "--score", "1"),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    done = subprocess.run(
        cli_command("stats", "tls_cli", "--json"),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert json.loads(done.stdout)["totals"]["queued"] == 2
    Ick(connect(url), "tls_cli").delete()


# --- a restricted ACL user ----------------------------------------------------------------


def test_acl_user_can_reshard_release_and_inspect_a_dehydrator(acl_url, client):
    """The operators' commands need nothing the documented ACL line lacks."""
    from pyspark_ick import Dehydrator, ShardedIck
    from pyspark_ick.dehydrator_view import peek, stats
    from pyspark_ick.release import release
    from pyspark_ick.reservations import ReservationLog
    from pyspark_ick.reshard import reshard

    restricted = connect(acl_url)
    ShardedIck(restricted, "dirty_docs", 2).add({f"m{i}": float(i) for i in range(30)})
    log = ReservationLog(restricted, "dirty_docs:0")
    log.reserve(5, 0, log.lease.acquire("query-x", 100))  # expires at once
    assert sum(release(restricted, "dirty_docs").requeued) == 5
    assert reshard(restricted, "dirty_docs", 3).after == 3
    assert ShardedIck(restricted, "dirty_docs", 3).stats()["pset_size"] == 30
    Dehydrator(restricted, "parked").push("a", "x", 0)
    assert stats(restricted, "parked", 1)["totals"]["due"] == 1
    assert peek(restricted, "parked", 1, 5)[0][:1] == ("a",)


def test_acl_user_runs_the_client_operations(acl_url, client):
    restricted = connect(acl_url)
    ick = Ick(restricted, "dirty_docs")
    assert ick.add({"a": 2, "b": 1}) == (2, 0)
    assert ick.reserve(1) == [("b", 1.0)]
    assert ick.commit("b") == 1
    assert ick.stats()["pset_size"] == 1
    assert ick.unlink() >= 2
    sharded = ShardedIck(restricted, "dirty_docs", 4)
    assert sharded.add({f"doc{i}": i for i in range(50)}) == (50, 0)
    assert sharded.stats()["pset_size"] == 50
    assert sharded.shard(2).reserve(100)
    assert sharded.delete() > 4
    assert client.dbsize() == 0


def test_acl_user_runs_the_reservation_log(acl_url, client):
    from pyspark_ick.reservations import ReservationLog

    restricted = connect(acl_url)
    Ick(restricted, "dirty_docs").add({"a": 1, "b": 2})
    log = ReservationLog(restricted, "dirty_docs")
    token = log.lease.acquire("indexer", 30_000)
    last, moved, _ = log.reserve(None, 0, token)
    assert moved == 2 and [m.number for m in log.read(0, last)] == [last]
    assert log.describe()["lease_owner"] == "indexer"
    assert log.commit(last, token) == last
    assert log.describe()["open_reservations"] == 0
    assert log.lease.release(token)
    Ick(restricted, "dirty_docs").delete()
    assert client.dbsize() == 0


def test_acl_user_runs_the_dehydrator(acl_url, client):
    from pyspark_ick.dehydrator import Dehydrator

    parked = Dehydrator(connect(acl_url), "parked", 2)
    parked.push("due", "now", 0)
    parked.push("later", "in an hour", 3_600_000)
    assert parked.look("later") == "in an hour" and parked.ttn() == 0
    claims = parked.claim_log(parked.shard_of("due"))
    token = claims.lease.acquire("source", 30_000)
    last, moved, _ = claims.reserve(None, 0, token)
    assert moved == 1 and [entry[2] for entry in claims.read(0, last)] == ["now"]
    assert claims.commit(last, token) == last
    assert parked.pull("later") == "in an hour" and parked.ttn() == -1
    parked.delete()
    assert client.dbsize() == 0


def test_acl_user_is_refused_everything_else(acl_url, client):
    restricted = connect(acl_url)
    with pytest.raises(IckScriptError, match=r"(?i)no permissions"):
        Ick(restricted, "other_queue").add({"a": 1})
    with pytest.raises(redis.exceptions.NoPermissionError):
        restricted.get("dirty_docs_but_not_ours")
    for command in (
        ["KEYS", "*"],
        ["FLUSHALL"],
        ["CONFIG", "GET", "*"],
        ["EVAL", "return redis.call('GET', KEYS[1])", 1, "not_ours"],
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            restricted.execute_command(*command)
    assert client.dbsize() == 0


def test_acl_user_on_the_cluster(cluster_url, redis_cluster_nodes, cluster_client, logs):
    for node in redis_cluster_nodes.nodes:
        with node.client() as admin:
            admin.execute_command("ACL", "SETUSER", "ick", *acl_rules(ACL_PASSWORD, *ACL_NAMES))
    try:
        started = time.monotonic()
        with pytest.raises(IckConnectionError, match="refused the username or password") as info:
            connect(cluster_url, username="ick", password=WRONG, cluster="yes")
        assert time.monotonic() - started < 5
        assert WRONG not in full_text(info.value) and WRONG not in logs.text

        restricted = connect(cluster_url.replace("redis://", f"redis://ick:{ACL_PASSWORD}@"))
        assert isinstance(restricted, redis.RedisCluster)
        sharded = ShardedIck(restricted, "dirty_docs", 6)
        assert sharded.add({f"doc{i}": i for i in range(60)}) == (60, 0)
        assert sharded.stats()["pset_size"] == 60
        assert sum(len(sharded.shard(i).reserve(100)) for i in range(6)) == 60
        with pytest.raises(IckScriptError, match=r"(?i)no permissions"):
            Ick(restricted, "other_queue").add({"a": 1})
        sharded.delete()
        assert cluster_client.dbsize() == 0
    finally:
        for node in redis_cluster_nodes.nodes:
            with node.client() as admin:
                admin.execute_command("ACL", "DELUSER", "ick")


def test_docs_show_the_tested_acl_line():
    line = acl_line("ick", "CHANGE-ME", *ACL_NAMES)
    assert line.startswith("user ick on >CHANGE-ME ~dirty_docs ~dirty_docs:* ~dirty_docs/*")
    assert line in (ROOT / "docs" / "security.md").read_text()


# --- passwords ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["url", "keywords", "no cluster probe"])
def test_wrong_password_fails_fast_without_the_password(acl_url, redis_url, logs, how):
    started = time.monotonic()
    with pytest.raises(IckConnectionError) as info:
        if how == "url":
            connect(acl_url.replace(ACL_PASSWORD, WRONG))
        elif how == "keywords":
            connect(redis_url, username="ick", password=WRONG)
        else:
            connect(acl_url.replace(ACL_PASSWORD, WRONG), cluster="no")
    assert time.monotonic() - started < DEFAULT_RETRY_TIMEOUT / 4  # not retried
    assert "refused the username or password" in str(info.value)
    for text in (full_text(info.value), repr(info.value), logs.text):
        assert WRONG not in text and ACL_PASSWORD not in text


def test_no_password_in_reprs_errors_or_logs(acl_url, logs):
    # a live client: redis-py's repr hides the password itself
    client = connect(acl_url)
    assert ACL_PASSWORD not in repr(client) and ACL_PASSWORD not in repr(client.connection_pool)

    spec = ConnectionSpec(url=acl_url, password=ACL_PASSWORD)
    assert ACL_PASSWORD not in repr(spec) and ACL_PASSWORD not in str(spec)
    assert "ick:***@" in repr(spec)
    assert redact(f"redis://h:6379/0?password={ACL_PASSWORD}") == "redis://h:6379/0?password=***"
    assert ACL_PASSWORD not in redact(f"unix:///tmp/r.sock?db=0&password={ACL_PASSWORD}")

    failures = []
    for attempt in (
        # unreachable, with the password in the URL and as a keyword
        lambda: connect(f"redis://ick:{ACL_PASSWORD}@127.0.0.1:{free_port()}/0", retry_timeout=0),
        lambda: connect(
            f"redis://127.0.0.1:{free_port()}/0", password=ACL_PASSWORD, retry_timeout=0
        ),
        # malformed URLs
        lambda: connect(f"http://ick:{ACL_PASSWORD}@example.com/0"),
        lambda: connect(f"redis://ick:{ACL_PASSWORD}@example.com:port/0"),
        # option errors of the Spark formats
        lambda: Options({"redis.url": f"http://ick:{ACL_PASSWORD}@h/0"}, "ick").connection(),
        lambda: Options({"redis.url": acl_url, "redis.timeout": "soon"}, "ick").connection(),
        lambda: Options(
            {"redis.password": ACL_PASSWORD, "redis.cluster": "maybe"}, "ick"
        ).connection(),
    ):
        with pytest.raises((IckConnectionError, IckConfigError)) as info:
            attempt()
        failures.append(full_text(info.value))
    assert all(ACL_PASSWORD not in text for text in failures), failures
    assert "redis.timeout" in failures[5] and "redis.cluster" in failures[6]
    assert ACL_PASSWORD not in logs.text
    assert any(r.name.startswith("redis") for r in logs.records)  # redis-py did log


# --- conf/redis.conf ----------------------------------------------------------------------


@pytest.fixture
def durable_server() -> Iterator[tuple[redis.Redis, Path]]:
    """The server binary (server_binary()) started with conf/redis.conf on a free port and a
    fresh dir."""
    directory = Path(tempfile.mkdtemp(prefix="pyspark-ick-durable-"))
    port = free_port()
    process = subprocess.Popen(
        [
            server_binary(),
            str(ROOT / "conf" / "redis.conf"),
            "--port",
            str(port),
            "--dir",
            str(directory),
            "--logfile",
            str(directory / "redis.log"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        wait_until(client.ping, timeout=15, what="redis-server with conf/redis.conf")
        yield client, directory
    finally:
        client.close()
        process.terminate()
        process.wait(15)
        subprocess.run(["rm", "-rf", str(directory)], check=False)


def test_redis_conf_logs_every_add_and_never_evicts(durable_server):
    admin, directory = durable_server
    settings = {
        k: admin.config_get(k)[k] for k in ("appendonly", "appendfsync", "maxmemory-policy")
    }
    assert settings == {
        "appendonly": "yes",
        "appendfsync": "everysec",
        "maxmemory-policy": "noeviction",
    }

    client = connect(f"redis://127.0.0.1:{admin.connection_pool.connection_kwargs['port']}/0")
    ick = Ick(client, "durable")
    ick.add({"doc:1": 1})

    # Redis 7+ and Valkey: appendonlydir/*.incr.aof; 6.2: a single appendonly.aof
    def aof_files() -> list[Path]:
        return [
            *(directory / "appendonlydir").glob("*.incr.aof"),
            *directory.glob("appendonly.aof"),
        ]

    wait_until(
        lambda: any(b"durable/ick/{durable}/pset" in p.read_bytes() for p in aof_files()),
        timeout=10,
        what="the add in the AOF",
    )

    # memory full: the add fails loudly and nothing queued is evicted
    used = int(admin.info("memory")["used_memory"])
    admin.config_set("maxmemory", used + 256 * 1024)
    added = 1
    with pytest.raises(IckScriptError, match="maxmemory"):
        for chunk in range(1000):
            batch = {f"doc:{chunk}:{i}:{'x' * 40}": 1 for i in range(200)}
            added += ick.add(batch)[0]
    assert ick.stats()["pset_size"] == added > 1


def test_tls_on_one_side_only_says_so_at_once(redis_tls, redis_url):
    plain_port = urlsplit(redis_url).port
    started = time.monotonic()
    with pytest.raises(IckConnectionError, match=r"TLS handshake failed.*Use redis://"):
        connect(f"rediss://127.0.0.1:{plain_port}/0", timeout=2)
    with pytest.raises(IckConnectionError, match=r"does it speak only TLS\? Use rediss://"):
        connect(f"redis://127.0.0.1:{redis_tls.port}/0", timeout=2)
    assert time.monotonic() - started < 8  # not retried for redis.retryTimeout


def test_acl_user_queues_adds_on_its_own_pipeline_and_registers_its_icks(acl_url, client):
    restricted = connect(acl_url)
    pipe = restricted.pipeline(transaction=False)
    queue_add(pipe, IckKeys(ACL_NAMES[0]), ["piped"], [1.0])
    pipe.execute()
    ShardedIck(restricted, ACL_NAMES[0], 1).check_shards()
    assert client.smembers("pyspark-ick/registry/ick") == {ACL_NAMES[0].encode()}
