"""pyspark-ick metrics: Prometheus text for every Ick and dehydrator found in Redis."""

from __future__ import annotations

import subprocess

from support import cli_command, scrape, served

from pyspark_ick import Dehydrator, ShardedIck
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import free_port, wait_until


def test_metrics_of_every_ick_and_dehydrator(client):
    now = client.time()[0]
    docs = ShardedIck(client, "docs", 2)
    members = {f"doc:{i}": now - 100.0 - i for i in range(20)}
    docs.add(members)
    late = docs.shard_of("re:0")
    other = next(f"re:{i}" for i in range(1, 99) if docs.shard_of(f"re:{i}") == late)
    backfill = {"re:0": now - 500.0, other: now - 200.0, "doc:1": now - 900.0}
    docs.add(backfill, lane="backfill")  # doc:1 stays live
    shard = docs.shard_of("doc:0")
    log = ReservationLog(client, f"docs:{shard}")
    token = log.lease.acquire("indexer", 60_000)
    log.reserve(3, 0, token)
    parked = Dehydrator(client, "parked", 2)
    parked.park(["a", "b", "c"], ["x", "y", "z"], [0, 0, 3_600_000])

    m = served(client)
    sizes = {i: sum(1 for k in members if docs.shard_of(k) == i) for i in range(2)}
    for i in range(2):
        labels = f'{{ick="docs",shard="{i}"}}'
        live = f'{{ick="docs",lane="live",shard="{i}"}}'
        backfill = f'{{ick="docs",lane="backfill",shard="{i}"}}'
        assert m[f"pyspark_ick_queued{live}"] == sizes[i] - (3 if i == shard else 0)
        assert m[f"pyspark_ick_queued{backfill}"] == (2 if i == late else 0)
        assert m[f"pyspark_ick_reserved{labels}"] == (3 if i == shard else 0)
        assert m[f"pyspark_ick_open_reservations{labels}"] == (1 if i == shard else 0)
        assert m[f"pyspark_ick_lease_held{labels}"] == (1 if i == shard else 0)
        assert m[f"pyspark_ick_oldest_queued_age_seconds{live}"] >= 100
        if i == late:  # the backfill's first member: its own time's age, not the band's
            assert 500 <= m[f"pyspark_ick_oldest_queued_age_seconds{backfill}"] < 600

    def total(what: str) -> float:
        return sum(
            m[f'pyspark_ick_dehydrator_{what}{{dehydrator="parked",shard="{i}"}}'] for i in range(2)
        )

    assert (total("parked"), total("due")) == (3, 2)
    assert m['pyspark_ick_dehydrator_next_release_seconds{dehydrator="parked"}'] == 0


def test_the_cli_serves_metrics(redis_url, client):
    ShardedIck(client, "cli_docs", 1).add({"a": 1.0})
    port = free_port()
    process = subprocess.Popen(
        cli_command("metrics", "--port", str(port), url=redis_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        m = wait_until(lambda: scrape(port), timeout=30, what="the metrics endpoint")
        assert m['pyspark_ick_queued{ick="cli_docs",lane="live",shard="0"}'] == 1
    finally:
        process.terminate()
        process.wait(10)


def test_the_exporter_reads_the_registry_not_the_keyspace(client):
    ShardedIck(client, "kept", 2).add({"a": 1.0})
    ShardedIck(client, "gone", 1).add({"b": 1.0})
    Dehydrator(client, "later").park(["x"], ["y"], [0])
    for i in range(2000):  # a busy shared Redis: keys of other applications
        client.set(f"app:{i}", i)
    ShardedIck(client, "gone", 1).delete()
    client.config_resetstat()
    m = served(client)
    assert (
        m['pyspark_ick_queued{ick="kept",lane="live",shard="0"}']
        + m['pyspark_ick_queued{ick="kept",lane="live",shard="1"}']
        == 1
    )
    assert not any('ick="gone"' in name for name in m)  # deleted: left the registry
    assert m['pyspark_ick_dehydrator_parked{dehydrator="later",shard="0"}'] == 1
    assert "cmdstat_scan" not in client.info("commandstats")  # no keyspace scan


def test_what_the_alerts_read_throughput_heartbeats_and_overdue_elements(client):
    """The gauges and counters conf/prometheus/pyspark-ick-alerts.yml needs: members and
    elements committed, the lease's heartbeat age, how long a due element has waited."""
    ShardedIck(client, "docs", 1).add({f"doc:{i}": float(i) for i in range(5)})
    log = ReservationLog(client, "docs")
    fence = log.lease.acquire("indexer", 60_000)
    log.commit(log.reserve(3, 0, fence).head, fence)
    parked = Dehydrator(client, "parked", 1)
    parked.park(["a", "b", "c", "d"], ["w", "x", "y", "z"], [0, 0, 0, 3_600_000])
    claims = parked.claim_log(0)
    claim_fence = claims.lease.acquire("rehydrator", 60_000)
    claims.commit(claims.reserve(1, 0, claim_fence).head, claim_fence)
    claims.reserve(1, 1, claim_fence)  # one claimed, not committed

    def overdue() -> dict[str, float] | None:
        m = served(client)
        key = 'pyspark_ick_dehydrator_overdue_seconds{dehydrator="parked",shard="0"}'
        return m if m[key] >= 0.3 else None

    m = wait_until(overdue, timeout=30, what="an element due for 0.3 s")
    ick, dh = '{ick="docs",shard="0"}', '{dehydrator="parked",shard="0"}'
    assert m[f"pyspark_ick_committed_total{ick}"] == 3
    assert 0 <= m[f"pyspark_ick_lease_heartbeat_age_seconds{ick}"] < 30
    assert m[f"pyspark_ick_dehydrator_committed_total{dh}"] == 1
    assert m[f"pyspark_ick_dehydrator_claimed{dh}"] == 1
    assert m[f"pyspark_ick_dehydrator_lease_held{dh}"] == 1
    assert 0 <= m[f"pyspark_ick_dehydrator_lease_heartbeat_age_seconds{dh}"] < 30
    log.lease.release(fence)
    claims.lease.release(claim_fence)
    m = served(client)
    assert m[f"pyspark_ick_lease_held{ick}"] == 0
    assert f"pyspark_ick_lease_heartbeat_age_seconds{ick}" not in m  # no holder, no age
    assert m[f"pyspark_ick_dehydrator_lease_held{dh}"] == 0
    Dehydrator(client, "parked", 1).pull("c")  # nothing due any more
    assert served(client)[f"pyspark_ick_dehydrator_overdue_seconds{dh}"] == 0


def test_freshness_is_a_histogram_promtool_accepts(client):
    import shutil
    import urllib.request

    from pyspark_ick import Ick
    from pyspark_ick.metrics import serve
    from pyspark_ick.observe import server_time

    now = server_time(client)
    docs = ShardedIck(client, "fresh_docs", 1)  # its count recorded: the exporter reads it
    docs.add({"a": now - 0.75, "b": now - 45.0, "p": 7.0})
    docs.add({"c": now - 45.0}, lane="backfill")
    ick = Ick(client, "fresh_docs")
    ick.reserve(10)
    ick.commit("a", "b", "c", "p")
    port = free_port()
    server = serve(client, port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            body = reply.read().decode()
    finally:
        server.shutdown()
    m = {
        name: float(value)
        for line in body.splitlines()
        if line and not line.startswith("#")
        for name, value in [line.rsplit(" ", 1)]
    }
    live = 'ick="fresh_docs",lane="live",shard="0"'
    back = 'ick="fresh_docs",lane="backfill",shard="0"'

    def bucket(labels: str, le: str) -> float:
        found = [
            v
            for k, v in m.items()
            if k.startswith("pyspark_ick_freshness_seconds_bucket")
            and all(p in k for p in labels.split(","))
            and f'le="{le}"' in k
        ]
        assert len(found) == 1, (labels, le)
        return found[0]

    assert (bucket(live, "0.5"), bucket(live, "1"), bucket(live, "60")) == (0, 1, 2)
    assert (bucket(live, "+Inf"), bucket(back, "30"), bucket(back, "60")) == (2, 0, 1)
    count = [
        v
        for k, v in m.items()
        if k.startswith("pyspark_ick_freshness_seconds_count")
        and 'lane="live"' in k
        and "fresh_docs" in k
    ]
    total = [
        v
        for k, v in m.items()
        if k.startswith("pyspark_ick_freshness_seconds_sum")
        and 'lane="live"' in k
        and "fresh_docs" in k
    ]
    assert count == [2] and 45.75 <= total[0] < 55
    untimed = [
        v
        for k, v in m.items()
        if k.startswith("pyspark_ick_freshness_untimed_total")
        and 'lane="live"' in k
        and "fresh_docs" in k
    ]
    assert untimed == [1]
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: .ci/test.sh installs Debian's prometheus package"
    checked = subprocess.run(
        [binary, "check", "metrics"], input=body, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
