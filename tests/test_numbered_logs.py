"""Both numbered logs (the Ick's reservations, the dehydrator's claims) at the protocol's
edges, without Spark: every manifest within the per-call bound when a limit is given, a
commit that leaves no manifest behind, and a replay that reads exactly the logged range
while later numbers exist and new items wait (through the stream readers' own ``read``)."""

from __future__ import annotations

from typing import Any

import pytest

from pyspark_ick import Dehydrator, Ick, bounds
from pyspark_ick.claims import ClaimLog
from pyspark_ick.keys import DehydratorKeys, IckKeys
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.spark.dehydrator_reader import DehydratorStreamReader, SourceOptions
from pyspark_ick.spark.ick_reader import IckStreamReader, ReaderOptions
from pyspark_ick.spark.planning import ShardRange

TTL = 30_000
PER_CALL = bounds.MOVES_PER_CALL


def ick_log(client: Any, n: int, first: int = 0) -> ReservationLog:
    """Ick "q" (one shard) with members m<first>..m<first+n-1>, scored by their number."""
    Ick(client, "q").add({f"m{i:05}": float(i) for i in range(first, first + n)})
    return ReservationLog(client, "q")


def claim_log(client: Any, n: int, first: int = 0) -> ClaimLog:
    """Dehydrator "d" (one shard) with n elements due now."""
    ids = [f"e{i:05}" for i in range(first, first + n)]
    Dehydrator(client, "d").park(ids, [f"x{i}" for i in ids], [0] * n)
    return Dehydrator(client, "d").claim_log(0)


LOGS = {"reservations": ick_log, "claims": claim_log}


def manifest_sizes(client: Any, log: Any) -> list[int]:
    """Items in each open manifest, by its list in Redis (2 or 3 values an item)."""
    head, committed = log.counters()
    width = 2 if isinstance(log, ReservationLog) else 3
    return [client.llen(log.manifest(number)) // width for number in range(committed + 1, head + 1)]


@pytest.mark.parametrize("kind", LOGS)
def test_a_limited_reserve_keeps_every_manifest_within_the_per_call_bound(client, kind):
    log = LOGS[kind](client, 3 * PER_CALL)
    fence = log.lease.acquire("me", TTL)
    limit = 2 * PER_CALL + PER_CALL // 2
    reserved = log.reserve(limit, 0, fence)
    assert (reserved.moved, reserved.pending) == (limit, limit)
    assert manifest_sizes(client, log) == [PER_CALL, PER_CALL, PER_CALL // 2]


@pytest.mark.parametrize("kind", LOGS)
def test_a_commit_leaves_no_manifest_and_no_size_behind(client, kind):
    log = LOGS[kind](client, 2 * PER_CALL + 7)
    fence = log.lease.acquire("me", TTL)
    head = log.reserve(None, 0, fence).head
    assert head == 3
    manifests = [log.manifest(n) for n in range(1, head + 1)]
    assert client.exists(*manifests) == head
    assert log.commit(2, fence) == 2
    assert client.exists(*manifests) == 1  # only the open one
    assert log.commit(head, fence) == head
    assert client.exists(*manifests) == 0
    fields = {f.decode() for f in client.hkeys(log.log_key)}
    assert not any(f.startswith("size:") for f in fields), fields


@pytest.mark.parametrize("kind", LOGS)
def test_commits_count_the_items_they_close_in_all(client, kind):
    """The log's ``done`` field counts the items its commits closed (operators' throughput:
    the exporter's committed_total, the console's plot); a commit repeated adds nothing."""
    log = LOGS[kind](client, 2 * PER_CALL + 7)
    fence = log.lease.acquire("me", TTL)
    head = log.reserve(None, 0, fence).head
    log.commit(1, fence)
    assert int(client.hget(log.log_key, "done")) == PER_CALL
    log.commit(1, fence)
    log.commit(head, fence)
    log.commit(head, fence)
    assert int(client.hget(log.log_key, "done")) == 2 * PER_CALL + 7


def ick_reader(url: str) -> IckStreamReader:
    return IckStreamReader(ReaderOptions.parse({"redis.url": url, "ick": "q"}))


def dehydrator_reader(url: str) -> DehydratorStreamReader:
    return DehydratorStreamReader(SourceOptions.parse({"redis.url": url, "dehydrator": "d"}))


READERS = {"reservations": ick_reader, "claims": dehydrator_reader}


@pytest.mark.parametrize("kind", LOGS)
def test_a_replay_reads_the_logged_range_not_what_came_after(client, redis_url, kind):
    log = LOGS[kind](client, 3 * PER_CALL)
    fence = log.lease.acquire("me", TTL)
    end = log.reserve(PER_CALL + 10, 0, fence).head  # the batch Spark logged: 2 manifests
    logged = [row for manifest in log.read_numbered(0, end) for row in manifest.items]
    log.reserve(None, end, fence)  # reserved ahead of it
    LOGS[kind](client, 50, first=10_000)  # and new items wait
    batches = list(READERS[kind](redis_url).read(ShardRange(0, 0, end)))
    column = "member" if kind == "reservations" else "id"
    read = [value for batch in batches for value in batch.column(column).to_pylist()]
    width = 2 if kind == "reservations" else 3
    assert read == [value.decode() for value in logged[::width]]
    assert len(read) == PER_CALL + 10


def test_the_manifest_keys_are_the_logs_own(client):
    assert ReservationLog(client, "q").manifest(3) == IckKeys("q").reservation(3)
    assert ClaimLog(client, DehydratorKeys("d")).manifest(3) == DehydratorKeys("d").claim(3)


@pytest.mark.parametrize("kind", LOGS)
def test_operators_see_the_open_manifests_first_few_only(client, kind):
    """What the console's Ick and dehydrator pages show of the reservations or claims in
    flight: number, size, deliveries, first score or due time; a bounded few of them."""
    log = LOGS[kind](client, 3 * PER_CALL + 5)
    fence = log.lease.acquire("me", TTL)
    assert log.in_flight(2) == (0, [])
    head = log.reserve(None, 0, fence).head
    log.read_numbered(0, 1, token="run-1")
    log.commit(1, fence)
    count, shown = log.in_flight(2)
    assert (count, [m.number for m in shown]) == (head - 1, [2, 3])
    assert [(m.size, m.deliveries) for m in shown] == [(PER_CALL, 0), (PER_CALL, 0)]
    log.read_numbered(1, 2, token="run-1")
    first = shown[0].first
    assert log.in_flight(1)[1] == [(2, PER_CALL, 1, first)]
    width = 2 if isinstance(log, ReservationLog) else 3
    assert first == float(client.lrange(log.manifest(2), 0, width - 1)[1])
