"""df.write.format("ick"): round trips, scores, sharding, overwrite, every error message."""

from __future__ import annotations

import logging
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packing import decode_rows
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pyspark_ick import Ick, IckConfigError, ShardedIck, connect, scripts, shard_of
from pyspark_ick.columns import pack_pairs
from pyspark_ick.packing import pack_chunks
from pyspark_ick.spark.ick_writer import IckCommitMessage, batch_writer, by_shard
from pyspark_ick.testing import redis_server

MS = StructType([StructField("member", StringType()), StructField("score", DoubleType())])


def save(df: Any, url: str, mode: str = "append", **options: Any) -> None:
    writer = df.write.format("ick").option("redis.url", url).mode(mode)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def pset(client: Any, name: str, shards: int = 1) -> dict[str, float]:
    """Every member queued in the psets of logical Ick ``name``, with its score."""
    out: dict[str, float] = {}
    for i in range(shards):
        key = ShardedIck(client, name, shards).shard(i).keys.pset
        out.update({m.decode(): s for m, s in client.zrange(key, 0, -1, withscores=True)})
    return out


def redis_time(client: Any) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1e6


FRESH = """
from pyspark_ick.testing import spark_session
spark = spark_session("fresh", **{"spark.master": "local[1]",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"})
spark.createDataFrame([("a", 2.0), ("b", 1.0)], "member string, score double") \\
    .write.format("ick").option("redis.url", URL).option("ick", "fresh") \\
    .mode("append").save()
spark.stop()
"""


@pytest.fixture(scope="module", autouse=True)
def fresh_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    """A fresh Python process that writes with format("ick") and no register call.

    Started before this module's first test, so its JVM boots while the others run; on a
    server of its own, since the other tests flush theirs.
    """
    log = tmp_path_factory.mktemp("fresh") / "output.txt"
    with redis_server() as server, log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", FRESH.replace("URL", repr(server.url))],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            yield server, process, log
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.parametrize(
    "sql_type, values",
    [
        ("string", ["doc:1", "doc:2", "ünï"]),
        ("int", [1, -7, 2**31 - 1]),
        ("bigint", [2**40, -(2**62), 0]),
    ],
)
def test_member_types_round_trip(spark, redis_url, client, sql_type, values):
    rows = [(v, float(i)) for i, v in enumerate(values)]
    save(spark.createDataFrame(rows, f"member {sql_type}, score double"), redis_url, ick="m")
    assert pset(client, "m") == {str(v): float(i) for i, v in enumerate(values)}


def test_score_types_and_column_options(spark, redis_url, client):
    df = spark.sql("""
        SELECT * FROM VALUES ('a', 1.5D, 7L, timestamp_micros(1700000000250000)),
                             ('b', -2.0D, 1L, timestamp_micros(0))
        AS t(id, d, l, ts)
    """)
    for column in ("d", "l", "ts"):
        save(df, redis_url, ick=column, memberColumn="ID", scoreColumn=column)
    assert pset(client, "d") == {"a": 1.5, "b": -2.0}
    assert pset(client, "l") == {"a": 7.0, "b": 1.0}
    assert pset(client, "ts") == {"a": 1700000000.25, "b": 0.0}


def test_default_score_is_redis_server_time(spark, redis_url, client):
    before = redis_time(client)
    save(spark.range(50).selectExpr("id AS member"), redis_url, ick="now", shards=2)
    after = redis_time(client)
    scores = pset(client, "now", 2)
    assert set(scores) == {str(i) for i in range(50)}
    assert all(before <= s <= after for s in scores.values())


def test_rewrites_fold_to_the_lower_score(spark, redis_url, client):
    save(spark.createDataFrame([("a", 5.0), ("b", 5.0)], MS), redis_url, ick="fold")
    save(spark.createDataFrame([("a", 3.0), ("b", 9.0), ("c", 1.0)], MS), redis_url, ick="fold")
    assert pset(client, "fold") == {"a": 3.0, "b": 5.0, "c": 1.0}


@pytest.mark.parametrize("where", ["redis_url", "cluster_url"])
def test_eight_shards_land_where_shard_of_says(spark, request, where):
    url = request.getfixturevalue(where)
    save(
        spark.range(400).selectExpr("concat('doc:', id) AS member", "CAST(id AS DOUBLE) AS score"),
        url,
        ick="sharded",
        shards=8,
        chunkSize=7,
    )
    c = connect(url)
    sharded = ShardedIck(c, "sharded", 8)
    for i in range(8):
        queued = {
            m.decode(): s for m, s in c.zrange(sharded.shard(i).keys.pset, 0, -1, withscores=True)
        }
        expected = {f"doc:{n}": float(n) for n in range(400) if sharded.shard_of(f"doc:{n}") == i}
        assert queued == expected, f"shard {i}"
    c.close()


def test_overwrite_empties_every_shard_first(spark, redis_url, client):
    save(
        spark.range(100).selectExpr("CAST(id AS STRING) AS member", "1.0D AS score"),
        redis_url,
        ick="ow",
        shards=4,
    )
    Ick(client, "ow:0").reserve(3)  # something in a cset too
    save(spark.createDataFrame([("z", 2.0)], MS), redis_url, "overwrite", ick="ow", shards=4)
    assert pset(client, "ow", 4) == {"z": 2.0}
    assert ShardedIck(client, "ow", 4).stats()["total_size"] == 1


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=8), st.floats(allow_nan=False)), min_size=1, max_size=40),
    st.integers(0, 3),
    st.integers(1, 5),
    st.integers(1, 9),
)
def test_columns_pack_like_pack_pairs_in_every_shard(rows, lead, shards, chunk):
    members = pa.array(["x"] * lead + [m for m, _ in rows])[lead:]  # a non-zero offset
    scores = pa.array([s for _, s in rows], pa.float64())
    parts = by_shard(members, scores, shards)
    assert sum(len(m) for m, _ in parts.values()) == len(rows)
    for shard, (ms, ss) in parts.items():
        names, values = ms.to_pylist(), ss.to_pylist()
        assert all(shard_of(m, shards) == shard for m in names)
        arrow, plain = pack_pairs(ms, ss, chunk), pack_chunks(names, values, chunk)
        assert [pairs(a) for a in arrow] == [pairs(p) for p in plain]


def pairs(packed: bytes) -> list[tuple[str, float]]:
    """ickadd's argument decoded, scores as floats: Arrow and Python may spell a score
    differently, never its value."""
    return [(m.decode(), float(s)) for s, m in decode_rows(packed, 2)]


def test_infinite_scores_are_written_as_the_gem_writes_them(redis_url, client):
    """ZADD (and the gem's ickadd) take -inf and +inf: the writer passes them on; only NaN
    and null are invalid rows. Written and read back through the task's own path."""
    writer = batch_writer({"redis.url": redis_url, "ick": "infinite", "shards": "2"}, MS, False)
    scores = [-math.inf, 1.0, math.inf, math.nan, -math.inf]
    batch = pa.record_batch(
        {
            "member": pa.array(["first", "mid", "last", "nan", "also"]),
            "score": pa.array(scores, pa.float64()),
        }
    )
    with pytest.raises(Exception, match="column 'score' has 1 null or NaN value"):
        writer.write(iter([batch]))
    assert pset(client, "infinite", 2) == {}
    writer = batch_writer(
        {"redis.url": redis_url, "ick": "infinite", "shards": "2", "onInvalid": "skip"}, MS, False
    )
    assert writer.write(iter([batch])) == IckCommitMessage(rows=5, new=4, changed=0, skipped=1)
    assert pset(client, "infinite", 2) == {
        "first": -math.inf,
        "mid": 1.0,
        "last": math.inf,
        "also": -math.inf,
    }


def test_arrow_packed_scores_round_trip_exactly(client):
    """Arrow spells the scores (shortest exact text) and Redis parses them: no value moves."""
    scores = [
        0.1,
        1 / 3,
        -0.0,
        1e-300,
        5e-324,
        2.0**53 + 1,
        -1.7976931348623157e308,
        1.763851234567e12,
        123456789.12345678,
        1e16,
        7.0,
        math.inf,
        -math.inf,
    ]
    members = pa.array([f"m{i}" for i in range(len(scores))])
    ick = Ick(client, "arrow-exact")
    for packed in pack_pairs(members, pa.array(scores, pa.float64()), 4):
        scripts.run(client, "ickadd", ick.keys.base, [packed])
    got = dict(ick.reserve(len(scores)))
    assert got == {f"m{i}": s for i, s in enumerate(scores)}


BAD_OPTIONS = [
    ({}, "format('ick') needs option 'ick'"),
    ({"ick": "a{b}"}, "option 'ick' 'a{b}' contains '{' or '}'"),
    (
        {"ick": "x", "shards": "0"},
        "option 'shards': expected an integer >= 1 and <= 16384, got '0'",
    ),
    ({"ick": "x", "shards": "many"}, "option 'shards': expected an integer >= 1"),
    ({"ick": "x", "onInvalid": "ignore"}, "option 'onInvalid': expected one of fail | skip"),
    ({"ick": "x", "chunkSize": "0"}, "option 'chunkSize': expected an integer >= 1"),
    ({"ick": "x", "redis.url": "http://h:1"}, "option 'redis.url': expected a URL starting"),
    ({"ick": "x", "redis.cluster": "maybe"}, "option 'redis.cluster': expected auto | true"),
    ({"ick": "x", "redis.timeout": "-1"}, "option 'redis.timeout': expected a number"),
    ({"ick": "x", "memberColumn": "id"}, "member column 'id' not found (columns: member, score)"),
    ({"ick": "x", "scoreColumn": "when"}, "score column 'when' not found (columns: member, score)"),
]


def schema(member: DataType, score: DataType | None = None) -> StructType:
    fields = [StructField("member", member)]
    return StructType(fields + ([StructField("score", score)] if score else []))


BAD_SCHEMAS = [
    (
        schema(StringType(), StringType()),
        "score column 'score' has type string; expected a numeric or timestamp column",
    ),
    (
        schema(StringType(), BooleanType()),  # True is no score (it would be stored as 1.0)
        "score column 'score' has type boolean; expected a numeric or timestamp column",
    ),
    (schema(ArrayType(IntegerType()), DoubleType()), "member column 'member' has type array<int>"),
    (schema(DoubleType()), "member column 'member' has type double"),
    (schema(TimestampType()), "member column 'member' has type timestamp"),
]


@pytest.mark.parametrize("options, message", BAD_OPTIONS)
def test_option_errors_name_the_option(redis_url, options, message):
    with pytest.raises(IckConfigError) as failure:
        batch_writer({"redis.url": redis_url, **options}, MS, False)
    assert message in str(failure.value)


@pytest.mark.parametrize("bad_schema, message", BAD_SCHEMAS)
def test_column_type_errors_name_the_column(redis_url, bad_schema, message):
    with pytest.raises(IckConfigError) as failure:
        batch_writer({"redis.url": redis_url, "ick": "x"}, bad_schema, False)
    assert message in str(failure.value)


def test_errors_surface_on_save_before_any_write(spark, redis_url, client):
    df = spark.createDataFrame([("a", 1.0)], MS)
    cases = [
        (df, BAD_OPTIONS[0]),
        (df, BAD_OPTIONS[2]),
        (df, BAD_OPTIONS[9]),
        (df.selectExpr("member", "'high' AS score"), ({"ick": "x"}, BAD_SCHEMAS[0][1])),
    ]
    for frame, (options, message) in cases:
        with pytest.raises(Exception) as failure:
            save(frame, redis_url, **options)
        assert message in str(failure.value)
    assert client.dbsize() == 0


def test_shard_count_mismatch_fails_before_any_write(spark, redis_url, client):
    df = spark.createDataFrame([("a", 1.0)], MS)
    save(df, redis_url, ick="counted", shards=4)
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception) as failure:
            save(spark.createDataFrame([("b", 1.0)], MS), redis_url, mode, ick="counted", shards=8)
        assert "Ick 'counted' has 4 shards recorded in Redis, but 8 were given" in str(
            failure.value
        )
    assert pset(client, "counted", 4) == {"a": 1.0}


def test_wrong_credentials_are_not_shown(spark, redis_url):
    df = spark.createDataFrame([("a", 1.0)], MS)
    with pytest.raises(Exception) as failure:
        save(df, redis_url, ick="x", **{"redis.username": "bob", "redis.password": "s3cr3t-pw"})
    assert "refused the username or password" in str(failure.value)
    assert "s3cr3t-pw" not in str(failure.value)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([("a", 1.0), (None, 2.0), (None, 3.0)], "column 'member' has 2 null values"),
        (
            [("a", math.nan), ("b", math.inf), ("c", None), ("d", 1.0)],
            "column 'score' has 2 null or NaN values",
        ),
        (
            [(None, math.nan), ("d", 1.0)],
            "column 'member' has 1 null value; column 'score' has 1 null or NaN value",
        ),
    ],
)
def test_invalid_rows_fail_the_write_naming_column_and_count(
    spark, redis_url, client, rows, message
):
    df = spark.createDataFrame(rows, MS).coalesce(1)
    with pytest.raises(Exception) as failure:
        save(df, redis_url, ick="bad")
    assert message in str(failure.value)
    assert "onInvalid=fail" in str(failure.value)
    assert pset(client, "bad") == {}  # the batch was checked before any of it was written


def test_invalid_rows_are_skipped_and_counted(spark, redis_url, client):
    rows = [("a", 1.0), (None, 2.0), ("b", math.nan), ("c", None), ("d", 4.0)]
    save(spark.createDataFrame(rows, MS), redis_url, ick="skip", onInvalid="SKIP")
    assert pset(client, "skip") == {"a": 1.0, "d": 4.0}

    writer = batch_writer({"redis.url": redis_url, "ick": "skip", "onInvalid": "skip"}, MS, False)
    batch = pa.record_batch(
        {
            "member": pa.array([r[0] for r in rows], pa.string()),
            "score": pa.array([r[1] for r in rows], pa.float64()),
        }
    )
    message = writer.write(iter([batch]))
    assert message == IckCommitMessage(rows=5, new=0, changed=0, skipped=3)


def test_tasks_report_counts_and_the_driver_logs_totals(redis_url, client, caplog):
    schema = StructType([StructField("id", LongType()), StructField("score", IntegerType())])
    writer = batch_writer(
        {"redis.url": redis_url, "ick": "counts", "memberColumn": "id"}, schema, False
    )
    batch = pa.record_batch(
        {"id": pa.array([1, 2, 3], pa.int64()), "score": pa.array([5, 5, 5], pa.int32())}
    )
    lower = pa.record_batch(
        {"id": pa.array([1, 4], pa.int64()), "score": pa.array([1, 9], pa.int32())}
    )
    first = writer.write(iter([batch]))
    second = writer.write(iter([lower]))
    assert (first, second) == (IckCommitMessage(3, 3, 0, 0), IckCommitMessage(2, 1, 1, 0))
    with caplog.at_level(logging.INFO, logger="pyspark_ick"):
        writer.commit([first, second])
        writer.abort([first, None])
    committed, aborted = (r.getMessage() for r in caplog.records)
    assert "Ick 'counts' (1 shard) in 2 tasks: 5 rows: 4 new, 1 changed, 0 skipped" in committed
    assert "aborted, 1 of 2 tasks failed; the others wrote 3 rows: 3 new" in aborted
    assert pset(client, "counts") == {"1": 1.0, "2": 5.0, "3": 5.0, "4": 9.0}


def test_binary_members_are_written_as_their_bytes(spark, redis_url, client):
    df = spark.sql("SELECT * FROM VALUES (X'6869', 1D), (X'FF', 2D) AS t(member, score)")
    save(df.coalesce(1), redis_url, ick="bin")  # binary-safe, as the gem's members are
    key = ShardedIck(client, "bin", 1).shard(0).keys.pset
    assert client.zrange(key, 0, -1, withscores=True) == [(b"hi", 1.0), (b"\xff", 2.0)]


@pytest.mark.slow
def test_found_in_a_fresh_process_without_register(fresh_process):
    server, process, log = fresh_process
    assert process.wait(timeout=300) == 0, log.read_text()[-3000:]
    with server.client() as c:
        assert pset(c, "fresh") == {"a": 2.0, "b": 1.0}
