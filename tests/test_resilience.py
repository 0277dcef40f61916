"""What a network, a restarting Redis and a stopped query do to the connector (issue 23).

- A load balancer or TCP proxy in front of a restarting Redis *resets* new connections
  instead of refusing them: a new client rides that out (tests/fault_proxy.py), and so
  does a stream query whose Redis restarts behind such a proxy.
- Scripts that Redis forgot in a restart: ``ensure_loaded`` rides the restart out, and a
  user's own pipeline (``queue_add``) keeps working.
- A stopped query releases its leases: its successor does not wait to take them over
  (Spark's SIGTERM lets the runner finish its call and stop on EOF).
- Trigger.AvailableNow delivers what a gem consumer left reserved when it died.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from faults_support import drained, wait_running
from redis_faults import kill, restart
from support import Sink, drain, stream

from pyspark_ick import Dehydrator, Ick, IckConnectionError, ShardedIck, connect, lua, scripts
from pyspark_ick.ick import queue_add
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.testing import RedisServer, wait_until

pytestmark = pytest.mark.slow  # servers restarted behind resetting proxies


def restart_after(server: RedisServer, seconds: float) -> threading.Thread:
    """kill -9 ``server`` now and start it again after ``seconds``, in a thread."""
    kill(server)
    thread = threading.Thread(target=lambda: (time.sleep(seconds), restart(server)))
    thread.start()
    return thread


def test_new_client_rides_out_a_proxy_that_resets_connections(proxy):
    proxy.reset_new(2)
    started = time.monotonic()
    client = connect(proxy.url, retry_timeout=20)
    assert client.ping() and time.monotonic() - started >= 1.5
    assert proxy.resets > 0  # the first attempts were reset, not refused


def test_a_redis_down_behind_a_resetting_proxy_past_retry_timeout_is_not_called_tls(proxy):
    """The resets of a load balancer whose Redis stays down are no TLS mismatch: past
    redis.retryTimeout the error says Redis did not answer, not "Use rediss://"."""
    proxy.reset_new(60)
    with pytest.raises(IckConnectionError) as failed:
        connect(proxy.url, retry_timeout=1.5)
    message = str(failed.value)
    assert "did not answer within redis.retryTimeout (1.5 s)" in message, message
    assert "TLS" not in message and "rediss" not in message, message
    assert proxy.resets > 1  # retried, not given up at the first reset


def test_a_call_that_never_reached_redis_is_retried_even_if_not_replay_safe(proxy):
    client = connect(proxy.url, retry_timeout=20)
    dehydrator = Dehydrator(client, "parked")
    dehydrator.push("a", "element", 0)
    proxy.reset_all()
    proxy.reset_new(1.5)  # poll's connection is reset while it connects: nothing was sent
    assert dehydrator.poll() == ["element"]


def test_restart_behind_a_resetting_proxy_is_ridden_out(durable, proxy):
    client = connect(proxy.url, retry_timeout=30)
    ick = Ick(client, "q")
    ick.add({"a": 1.0})
    back = restart_after(durable, 1.5)
    try:
        new = connect(proxy.url, retry_timeout=30)  # while Redis is down
        assert Ick(new, "q").add({"b": 2.0}) == (1, 0)
    finally:
        back.join()
    assert [m for m, _ in ick.reserve(5)] == ["a", "b"]


def test_stream_query_rides_out_restarts_behind_a_resetting_proxy(spark, durable, proxy, tmp_path):
    client = connect(durable.url, retry_timeout=30)
    ick = ShardedIck(client, "behind", 2)
    first = {f"a{i}": float(i) for i in range(40)}
    ick.add(first)
    options = {"redis.url": proxy.url, "ick": "behind", "shards": 2, "maxMembersPerTrigger": 10}
    sink = Sink()
    back = restart_after(durable, 6.0)  # the query starts while Redis restarts
    query = stream(spark, "ick", options, sink, str(tmp_path / "ckpt"))
    try:
        back.join()
        wait_running(query, lambda: set(first) <= sink.values(), 90, "the first members")
        restart_after(durable, 1.0).join()  # and again while it runs
        second = {f"b{i}": float(i) for i in range(40)}
        ick.add(second)
        wait_running(
            query,
            lambda: set(second) <= sink.values() and drained(client, "behind", 2),
            90,
            "the drain after the restart",
        )
        assert query.exception() is None
    finally:
        query.stop()


def test_ensure_loaded_rides_out_a_restart(durable):
    client = connect(durable.url, retry_timeout=30)
    back = restart_after(durable, 1.0)
    try:
        scripts.ensure_loaded(client, "ickadd", force=True)
    finally:
        back.join()
    assert client.script_exists(lua.sha("ickadd")) == [True]


def test_own_pipeline_with_queue_add_works_after_a_restart(durable):
    client = connect(durable.url, retry_timeout=30)
    keys = IckKeys("piped")

    def add(member: str) -> None:
        pipe = client.pipeline(transaction=True)
        queue_add(pipe, keys, [member], [1.0])
        pipe.hget(keys.rlog, "reserved")
        pipe.execute()

    scripts.ensure_loaded(client, "ickadd")
    add("before")
    restart_after(durable, 0.2).join()  # Redis forgot its scripts
    wait_until(client.ping, what="Redis back")
    add("after")
    assert Ick(client, "piped").stats()["pset_size"] == 2


def lease_owners(client: Any, ick: str, shards: int) -> list[Any]:
    return [client.hget(IckKeys(key).lease, "owner") for key in shard_names(ick, shards)]


def test_a_stopped_query_releases_its_leases(spark, client, redis_url, tmp_path):
    ShardedIck(client, "stopped", 2).add({"a": 1.0, "b": 2.0, "c": 3.0})
    options = {"redis.url": redis_url, "ick": "stopped", "shards": 2}
    sink = Sink()
    query = stream(spark, "ick", options, sink, str(tmp_path / "ckpt"))
    wait_running(query, lambda: drained(client, "stopped", 2), 60, "the drain")
    assert all(lease_owners(client, "stopped", 2))
    query.stop()
    # released at once, not left to expire (60 s) or to a successor's takeover (~4 s)
    wait_until(
        lambda: not any(lease_owners(client, "stopped", 2)),
        timeout=3,
        what="the leases released by query.stop()",
    )


# Spark's stream runner as stop_on_sigterm sees it: blocked reading its socket (stdin
# here), it stops on EOF and then releases (prints) in its finally.
RUNNER_STUB = """
import sys, time, types
from pyspark_ick.spark import leases
sys.modules["__main__"].__spec__ = types.SimpleNamespace(name=leases.RUNNER)
leases.GRACE_S = float(sys.argv[1])
leases.stop_on_sigterm()
print("waiting", flush=True)
try:
    while sys.stdin.buffer.read(4):
        pass
finally:
    time.sleep(0.3)  # stop() waits for the job ahead, then releases
    print("released", flush=True)
"""


def runner_stub(grace_s: float) -> subprocess.Popen[str]:
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER_STUB, str(grace_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert runner.stdout is not None and runner.stdout.readline() == "waiting\n"
    return runner


def test_sigterm_lets_the_runner_release_on_the_eof_that_follows():
    # query.stop(): SIGTERM, the socket closed, SIGTERM again, a few ms apart. A SystemExit
    # raised by the handler could land in the finally before the release (a CI flake)
    runner = runner_stub(30)
    runner.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=30)  # closes stdin: EOF
    assert (out, runner.returncode) == ("released\n", 0)


def test_a_runner_that_gets_no_eof_exits_after_the_grace_period():
    runner = runner_stub(0.5)
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=30) == -signal.SIGALRM  # its leases expire by themselves
    assert runner.stdout is not None and runner.stdout.read() == ""
    assert runner.stdin is not None
    runner.stdin.close()


def test_available_now_delivers_what_a_gem_consumer_left_reserved(
    spark, client, redis_url, tmp_path
):
    gem = Ick(client, "handed")
    gem.add({"a": 1.0, "b": 2.0, "c": 3.0})
    assert [m for m, _ in gem.reserve(1)] == ["a"]  # a gem consumer reserved a, then died
    options = {"redis.url": redis_url, "ick": "handed"}
    query, sink = drain(spark, "ick", options, str(tmp_path / "ckpt"))
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(sink.values()) == ["a", "b", "c"]
    assert gem.stats()["total_size"] == 0
