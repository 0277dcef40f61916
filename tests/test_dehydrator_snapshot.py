"""``spark.read.format("dehydrator")`` (issue 35): a read-only snapshot of every parked and
claimed element, with its id, element, due time and shard (and state when asked for),
binary-safe, in pages."""

from __future__ import annotations

import datetime as dt

import pytest

from pyspark_ick import Dehydrator
from pyspark_ick.dehydrator_view import stats
from pyspark_ick.keys import DehydratorKeys

WITH_STATE = "id string, element string, due timestamp, shard int, state string"


def read(spark, url: str, schema: str | None = None, **options: str):
    reader = spark.read.format("dehydrator").option("redis.url", url)
    reader = reader.option("dehydrator", "parked").option("shards", "3")
    for key, value in options.items():
        reader = reader.option(key, value)
    return (reader.schema(schema) if schema else reader).load()


def counts(client) -> list[tuple[int, int, int, int]]:
    """Per shard: parked, due, open claims, claimed elements."""
    return [
        (r["parked"], r["due"], r["open_claims"], r["claimed"])
        for r in stats(client, "parked", 3)["rows"]
    ]


def test_snapshot_of_parked_and_claimed_elements_changes_nothing(spark, client, redis_url):
    d = Dehydrator(client, "parked", 3)
    n = 2_500  # several ZSCAN pages per shard
    d.park([f"id{i}" for i in range(n)], [f"e{i}" for i in range(n)], [3_600_000] * n)
    d.park(["soon"], ["due now"], [0])
    claim = d.claim_log(d.shard_of("soon"))
    claim.reserve(None, 0, claim.lease.acquire("query-1", 60_000))  # claimed, not committed
    before = counts(client)

    df = read(spark, redis_url)
    expected = "struct<id:string,element:string,due:timestamp,shard:int,deliveries:int>"
    assert df.schema.simpleString() == expected
    rows = {r.id: r for r in df.collect()}
    assert len(rows) == n + 1
    assert rows["id7"].element == "e7" and rows["id7"].shard == d.shard_of("id7")
    now = dt.datetime.now(dt.timezone.utc)
    due = (
        rows["id7"].due.replace(tzinfo=dt.timezone.utc)
        if rows["id7"].due.tzinfo is None
        else rows["id7"].due
    )
    assert dt.timedelta(minutes=50) < due - now < dt.timedelta(minutes=70)

    states = {r.id: r.state for r in read(spark, redis_url, WITH_STATE).collect()}
    assert states["soon"] == "claimed" and states["id7"] == "parked"
    assert counts(client) == before  # read-only
    assert [r.shard for r in read(spark, redis_url, "shard int").collect()].count(0) == sum(
        d.shard_of(f"id{i}") == 0 for i in range(n)
    ) + (d.shard_of("soon") == 0)


def test_binary_ids_and_elements(spark, client, redis_url):
    keys = DehydratorKeys(Dehydrator(client, "parked", 3).keys_of(b"i\xff").master)
    Dehydrator(client, "parked", 3).park([b"i\xff"], [b"e\xfe"], [0])
    assert client.hget(keys.elements, b"i\xff") == b"e\xfe"
    with pytest.raises(Exception, match="idType"):
        read(spark, redis_url).collect()
    rows = read(
        spark,
        redis_url,
        "id binary, element binary, due timestamp, shard int",
        idType="binary",
        elementType="binary",
    ).collect()
    assert [(bytes(r.id), bytes(r.element)) for r in rows] == [(b"i\xff", b"e\xfe")]


def test_a_column_it_does_not_have_is_named(spark, redis_url):
    with pytest.raises(Exception, match="column 'score' is not one of id, element"):
        read(spark, redis_url, "id string, score double").collect()
