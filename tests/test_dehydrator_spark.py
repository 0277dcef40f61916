"""format("dehydrator") end to end: the batch and streaming sink, the stream source and
the rehydrate loop of examples/rehydrate.py (dehydrator -> Ick)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from support import Sink, drain, load_module, redis_ms, stream

from pyspark_ick import Dehydrator, ShardedIck
from pyspark_ick.keys import DehydratorKeys, shard_names
from pyspark_ick.spark.dehydrator_writer import content_id
from pyspark_ick.testing import wait_until

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rehydrate.py"


def write(df: Any, url: str, name: str = "parked", mode: str = "append", **options: Any) -> None:
    writer = df.write.format("dehydrator").option("redis.url", url).option("dehydrator", name)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode(mode).save()


def dues(client, name: str = "parked", shards: int = 1) -> dict[str, int]:
    """id -> due ms of every parked element."""
    out = {}
    for master in shard_names(name, shards):
        for id, due in client.zrange(DehydratorKeys(master).due, 0, -1, withscores=True):
            out[id.decode()] = int(due)
    return out


# --- the sink -------------------------------------------------------------------------


def test_sink_delay_option_generated_ids_and_retry_is_idempotent(spark, redis_url, client):
    elements = [f"doc:{i % 400}" for i in range(500)]  # 100 parked twice: folded
    df = spark.createDataFrame([(e,) for e in elements], "element string")  # 2 partitions
    before = redis_ms(client)
    write(df, redis_url, delay="1h", shards=3)
    after = redis_ms(client)
    d = Dehydrator(client, "parked", 3)
    first = dues(client, shards=3)
    assert sorted(first) == sorted({content_id(e) for e in elements})
    assert all(before + 3_600_000 <= due <= after + 3_600_000 for due in first.values())
    assert d.look(content_id("doc:7")) == "doc:7"
    write(df, redis_url, delay="1s", shards=3)  # a retry of the same rows: nothing moves
    assert dues(client, shards=3) == first
    assert d.size() == 400


def test_sink_task_failing_midway_then_retried_keeps_first_due_times(spark, redis_url, client):
    rows = [(f"e{i}", None if i == 250 else 60_000) for i in range(300)]
    df = spark.createDataFrame(rows, "element string, delayMs long").coalesce(1)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        with pytest.raises(Exception, match=r"column 'delayMs' has 1 null value"):
            write(df, redis_url)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    written = dues(client)
    assert len(written) == 200  # the first two Arrow batches, then the task failed
    fixed = spark.createDataFrame(
        [(e, 60_000 if d is None else d) for e, d in rows], "element string, delayMs long"
    ).coalesce(1)
    write(fixed, redis_url)  # the retry
    after = dues(client)
    assert len(after) == 300
    assert {id: after[id] for id in written} == written


def test_sink_id_and_due_columns(spark, redis_url, client):
    at = dt.datetime(2031, 5, 4, 3, 2, 1, 123456, tzinfo=dt.timezone.utc)
    df = spark.createDataFrame(
        [(1, "one", at), (2, "two", at)], "id long, element string, releaseAt timestamp"
    )
    write(df, redis_url, name="at")
    expected = int(at.timestamp() * 1000)  # ms, the microseconds cut off
    assert dues(client, "at") == {"1": expected, "2": expected}
    df = spark.createDataFrame(
        [("a", b"\x00\xff", 0), ("b", b"x", 120_000)], "id string, element binary, delayMs int"
    )
    before = redis_ms(client)
    write(df, redis_url, name="bin", shards=2)
    d = Dehydrator(client, "bin", 2, decode=False)
    assert d.poll() == [b"\x00\xff"]
    assert before + 120_000 <= dues(client, "bin", 2)["b"] <= redis_ms(client) + 120_000


def test_sink_replace_and_error(spark, redis_url, client):
    Dehydrator(client, "parked").push("a", "old", 3_600_000)
    df = spark.createDataFrame([("a", "new", 0)], "id string, element string, delayMs long")
    with pytest.raises(Exception, match="dehydrator id a already exists"):
        write(df, redis_url, onDuplicate="error")
    assert Dehydrator(client, "parked").look("a") == "old"
    write(df, redis_url)  # keep
    assert Dehydrator(client, "parked").look("a") == "old"
    write(df, redis_url, onDuplicate="replace")
    assert Dehydrator(client, "parked").poll() == ["new"]  # new element, due now


@pytest.mark.parametrize(
    ("ddl", "row", "options", "message"),
    [
        (
            "element string, delayMs long",
            ("x", 5),
            {"delay": "1s"},
            "exactly one of .*got option 'delay' and column 'delayMs'",
        ),
        (
            "element string, delayMs long, releaseAt timestamp",
            ("x", 5, None),
            {},
            "got column 'delayMs' and column 'releaseAt'",
        ),
        ("element string", ("x",), {}, "exactly one of .*got none of them"),
        ("element string", ("x",), {"delay": "-5s"}, "option 'delay': expected a duration"),
        (
            "element string",
            ("x",),
            {"delay": "1s", "onDuplicate": "ignore"},
            "option 'onDuplicate': expected one of keep | replace | error",
        ),
        ("element long", (1,), {"delay": "1s"}, "column 'element' has type bigint"),
        ("id string", ("x",), {"delay": "1s"}, "needs a column 'element'"),
        ("element string, delay_ms long", ("x", 1), {}, "unexpected column 'delay_ms'"),
        ("element string, delayMs double", ("x", 1.5), {}, "column 'delayMs' has type double"),
        ("element string", ("x",), {"delay": "1s", "dehydrator": "a{b}"}, "braces"),
    ],
)
def test_sink_rejects_bad_options_and_schemas_on_the_driver(
    spark, redis_url, client, ddl, row, options, message
):
    df = spark.createDataFrame([row], ddl)
    with pytest.raises(Exception, match=message):
        write(df, redis_url, **options)
    assert client.dbsize() == 0


@pytest.mark.parametrize(
    ("ddl", "row", "message"),
    [
        ("element string, delayMs long", (None, 5), "column 'element' has 1 null value"),
        ("id string, element string, delayMs long", (None, "x", 5), "column 'id' has 1 null"),
        ("element string, delayMs long", ("x", -1), "column 'delayMs' has 1 value outside 0 to"),
        (
            "element string, delayMs long",
            ("x", 9 * 10**18),
            r"column 'delayMs' has 1 value outside 0 to 4503599627370496 .* at most",
        ),
        ("element string, releaseAt timestamp", ("x", None), "column 'releaseAt' has 1 null"),
    ],
)
def test_sink_rejects_invalid_rows(spark, redis_url, client, ddl, row, message):
    df = spark.createDataFrame([row], ddl)
    with pytest.raises(Exception, match=message):
        write(df, redis_url)
    assert Dehydrator(client, "parked").size() == 0


def test_sink_rejects_overwrite_and_a_different_shard_count(spark, redis_url, client):
    df = spark.createDataFrame([("x",)], "element string")
    with pytest.raises(Exception, match=r"only mode\('append'\)"):
        write(df, redis_url, mode="overwrite", delay="1s")
    Dehydrator(client, "parked", 4).check_shards()
    with pytest.raises(Exception, match="4 shards recorded in Redis, but 2 were given"):
        write(df, redis_url, delay="1s", shards=2)
    assert Dehydrator(client, "parked", 4).size() == 0


def test_stream_sink(spark, redis_url, client, tmp_path):
    source = tmp_path / "in"
    source.mkdir()  # the input written directly: no Spark job for it
    (source / "rows.json").write_text(
        "".join(json.dumps({"element": f"s{i}", "delayMs": i * 10}) + "\n" for i in range(50))
    )
    query = (
        spark.readStream.schema("element string, delayMs long")
        .json(str(source))
        .writeStream.format("dehydrator")
        .option("redis.url", redis_url)
        .option("dehydrator", "streamed")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    assert query.awaitTermination(120)
    assert Dehydrator(client, "streamed").size() == 50
    assert sorted(
        wait_until(
            lambda: len(got := Dehydrator(client, "streamed").xpoll()) == 50 and got, what="all due"
        )
    ) == sorted(content_id(f"s{i}") for i in range(50))


# --- the source -----------------------------------------------------------------------


def test_source_releases_each_element_once_when_due(spark, redis_url, client, tmp_path):
    d = Dehydrator(client, "parked", 2)
    d.park(["later"], ["not yet"], [3_600_000])
    sink = Sink(clock=lambda: redis_ms(client))  # stamped by the Redis clock
    options = {"redis.url": redis_url, "dehydrator": "parked", "shards": 2}
    query = stream(spark, "dehydrator", options, sink, str(tmp_path / "ckpt"), "0 seconds")
    try:
        wait_until(lambda: query.lastProgress, timeout=90, what="the query running")
        start = redis_ms(client)  # due times are >= start + ttl
        ttls = {f"i{n}": (n * 7) % 700 for n in range(200)}
        d.park(list(ttls), [f"e{n}" for n in range(200)], list(ttls.values()))
        wait_until(lambda: len(sink.rows()) >= 200, timeout=90, what="200 releases")
    finally:
        query.stop()
    rows = [(d.at, r) for d in sink.batches().values() for r in d.rows]
    assert sorted(r.id for _, r in rows) == sorted(ttls)  # each once, the later one not
    for at, r in rows:
        due_ms = int(r.due.timestamp() * 1000)
        assert due_ms >= start + ttls[r.id]
        assert due_ms <= at  # nothing released before due (by the Redis clock)
        assert r.element == "e" + r.id[1:] and r.shard == d.shard_of(r.id)
    assert len(sink.batches()) > 1
    assert d.look("later") == "not yet" and d.size() == 1


def test_source_available_now_binary_and_limits(spark, redis_url, client, tmp_path):
    d = Dehydrator(client, "bin", 2, decode=False)
    d.park([str(n) for n in range(250)], [bytes([n % 256, 0]) for n in range(250)], [0] * 250)
    options = {
        "redis.url": redis_url,
        "dehydrator": "bin",
        "shards": 2,
        "elementType": "binary",
        "maxElementsPerTrigger": 100,
    }
    query, sink = drain(spark, "dehydrator", options, str(tmp_path / "ckpt"))
    assert query.awaitTermination(120)
    assert [len(d.rows) for _, d in sorted(sink.batches().items())] == [100, 100, 50]
    assert sorted(bytes(r.element) for r in sink.rows()) == sorted(
        bytes([n % 256, 0]) for n in range(250)
    )
    # every claim was committed: nothing left anywhere
    for i in range(2):
        log = d.claim_log(i)
        assert log.last_committed() == log.last_claimed() > 0
    assert client.keys("bin:*/dh/*claim:*") == []


def test_source_rejects_bad_options(spark, redis_url):
    for options, message in [
        ({}, "needs option 'dehydrator'"),
        (
            {"dehydrator": "d", "maxElementsPerTrigger": 0},
            "option 'maxElementsPerTrigger': expected an integer >= 1",
        ),
    ]:
        reader = spark.readStream.format("dehydrator").option("redis.url", redis_url)
        for key, value in options.items():
            reader = reader.option(key, value)
        with pytest.raises(Exception, match=message):
            reader.load()  # at load(), on the driver: before start()


# --- the rehydrate loop ---------------------------------------------------------------


def load_example() -> Any:
    return load_module(EXAMPLE, "rehydrate_example")


def test_rehydrate_loop_returns_parked_member_to_the_ick_when_due(
    spark, redis_url, client, tmp_path
):
    example = load_example()
    df = spark.createDataFrame([("doc:42",)], "element string")
    write(df, redis_url, name="parked_docs", delay="1s", shards=2)
    due = next(iter(dues(client, "parked_docs", 2).values()))
    query = example.rehydrate(
        spark, redis_url, "parked_docs", "dirty_docs", 2, str(tmp_path / "ckpt")
    )
    try:
        ick = ShardedIck(client, "dirty_docs", 2)
        wait_until(lambda: ick.stats()["pset_size"] == 1, timeout=60, what="the member back")
    finally:
        query.stop()
    member, score = ick.shard(ick.shard_of("doc:42")).reserve(1)[0]
    assert member == "doc:42"
    assert score * 1000 >= due  # added (scored with Redis time) after it was due
    assert Dehydrator(client, "parked_docs", 2).size() == 0


def test_an_element_that_is_not_utf8_is_named_and_delivered_as_binary(
    spark, redis_url, client, tmp_path
):
    d = Dehydrator(client, "raw", decode=False)
    d.park(["good", "bad"], [b"fine", b"\xff\xfe latin-1?"], [0, 0])
    ckpt = str(tmp_path / "ckpt")
    options = {"redis.url": redis_url, "dehydrator": "raw"}
    failed, _ = drain(spark, "dehydrator", options, ckpt)
    with pytest.raises(Exception, match=r"element of id 'bad'.*not UTF-8.*elementType=binary"):
        failed.awaitTermination(120)
    # the same checkpoint, read as bytes: the claim is delivered
    query, sink = drain(spark, "dehydrator", {**options, "elementType": "binary"}, ckpt)
    assert query.awaitTermination(120)
    assert sorted((r.id, bytes(r.element)) for r in sink.rows()) == [
        ("bad", b"\xff\xfe latin-1?"),
        ("good", b"fine"),
    ]
    assert d.size() == 0 and client.keys("raw/dh/*claim:*") == []
