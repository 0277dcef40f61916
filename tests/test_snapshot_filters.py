"""Filters of spark.read.format("ick") that Redis answers (spark/ick_filters.py): the same
rows as Spark filtering the whole snapshot, for random filters on string and binary
members; the same filters offered to the reader on the driver (as Spark offers them),
many more of them, giving the rows SQL keeps; far fewer bytes out of Redis; reads with
Spark's pushdown off still work.

How many random examples each test runs was set by breaking the translation by hand
(docs/records/filter-examples.md): the driver's 150 examples of 6 rounds of WHEREs catch
every broken pushdown tried; Spark's 10 examples a test check that Spark hands over the
filters as the driver's test offers them.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyspark_ick import ShardedIck
from pyspark_ick.keys import IckKeys, shard_names, shard_of
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.spark.compat import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
)
from pyspark_ick.spark.ick_reader import snapshot_schema
from pyspark_ick.spark.ick_snapshot import batch_reader

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
SHARDS = 3
TEXTS = st.sampled_from(["a", "b", "doc:1", "doc:2", "é", "z z", "", "ü-7"])
BYTES = st.sampled_from([b"a", b"\xff", b"a\xffb", b"", b"\x00\x01", "é".encode()])
SCORES = st.sampled_from([-1.0, 0.0, 1.0, 2.0, float("inf"), float("-inf")])  # ties, bounds
SPARK_EXAMPLES = 10  # a test: each runs 1 + 2 x 3 Spark jobs
DRIVER_EXAMPLES, ROUNDS = 150, 6  # a test: a new Ick each, ROUNDS draws of the 3 WHEREs
names = count()


@contextlib.contextmanager
def pushdown(spark: Any, on: bool) -> Iterator[None]:
    """Spark's filter pushdown for Python data sources on or off, for the block."""
    before = spark.conf.get(PUSHDOWN)
    spark.conf.set(PUSHDOWN, str(on).lower())
    try:
        yield
    finally:
        spark.conf.set(PUSHDOWN, before)


def rows(
    spark: Any, url: str, name: str, where: str | None, on: bool, binary: bool = False
) -> list[Any]:
    """The rows of a snapshot read of Ick ``name`` with filter ``where``."""
    with pushdown(spark, on):
        df = (
            spark.read.format("ick")
            .option("redis.url", url)
            .option("ick", name)
            .option("shards", SHARDS)
            .option("memberType", "binary" if binary else "string")
            .schema(snapshot_schema(binary))
            .load()
        )
        return collect(df if where is None else df.where(where))


def collect(df: Any) -> list[tuple[Any, ...]]:
    got = [tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in df.collect()]
    return sorted(got, key=repr)


def build(client: Any, data: st.DataObject, members: st.SearchStrategy[Any]) -> str:
    """An Ick of SHARDS shards: queued members, reservations, members re-added in flight
    (queued and reserved) and held by two reservations."""
    name = f"f{next(names)}"
    ick = ShardedIck(client, name, SHARDS)
    ick.add(data.draw(st.dictionaries(members, SCORES, min_size=1, max_size=20)))
    for key in shard_names(name, SHARDS):
        log = ReservationLog(client, key)
        token = log.lease.acquire("t", 60_000)
        head = log.reserve(data.draw(st.integers(0, 3)), 0, token).head
        reserved = client.zrange(IckKeys(key).cset, 0, -1)
        if reserved:
            ick.add(data.draw(st.dictionaries(st.sampled_from(reserved), SCORES, max_size=2)))
            log.reserve(data.draw(st.integers(0, 2)), head, token)
    return name


def literal(value: Any) -> str:
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, str):
        return "'" + value + "'"
    if value in (float("inf"), float("-inf")):
        return f"double('{value}')"
    return repr(value)


Conjunct = tuple[str, tuple[Any, ...]]
"""One filter of a WHERE: its SQL, and the filters Spark hands a reader for it (none for
LIKE and OR here: Spark applies them itself)."""

COMPARE = st.sampled_from(["=", "<", "<=", ">", ">=", "<>", "<=>"])
OPS = {
    "=": EqualTo,
    "<": LessThan,
    "<=": LessThanOrEqual,
    ">": GreaterThan,
    ">=": GreaterThanOrEqual,
    "<>": lambda column, value: Not(EqualTo(column, value)),
    "<=>": EqualNullSafe,
}


def compare(column: str, op: str, value: Any) -> Conjunct:
    return f"{column} {op} {literal(value)}", (OPS[op]((column,), value),)


def listed(column: str, values: list[Any], negated: bool = False) -> Conjunct:
    found = In((column,), tuple(values))
    sql = f"{column} {'NOT ' if negated else ''}IN ({', '.join(map(literal, values))})"
    return sql, (Not(found) if negated else found,)


def compared(scores: st.SearchStrategy[float]) -> st.SearchStrategy[Conjunct]:
    """A comparison of the score."""
    return st.builds(lambda op, v: compare("score", op, v), COMPARE, scores)


FIXED = [
    listed("state", ["queued", "other"]),
    ("member IS NOT NULL", (IsNotNull(("member",)),)),
    ("score IS NULL", (IsNull(("score",)),)),
    ("reservation IS NULL", (IsNull(("reservation",)),)),
    compare("reservation", ">", 1),
    ("member LIKE 'a%'", ()),
    ("(shard = 1 OR score < 0.5)", ()),
]


def conjuncts(
    members: st.SearchStrategy[Any], scores: st.SearchStrategy[float]
) -> st.SearchStrategy[Conjunct]:
    """One filter: those Redis answers, and some it does not (Spark applies them)."""
    score = compared(scores)
    return st.one_of(
        st.builds(lambda m: compare("member", "=", m), members),
        st.builds(lambda m: compare("member", "<=>", m), members),
        st.builds(lambda ms: listed("member", ms), st.lists(members, min_size=1, max_size=3)),
        st.builds(lambda op, n: compare("shard", op, n), COMPARE, st.integers(-1, SHARDS)),
        st.builds(
            lambda ns, neg: listed("shard", ns, neg),
            st.lists(st.integers(0, SHARDS), min_size=1, max_size=3),
            st.booleans(),
        ),
        score,
        score,
        st.builds(
            lambda op, s: compare("state", op, s),
            st.sampled_from(["=", "<>"]),
            st.sampled_from(["queued", "reserved", "other"]),
        ),
        st.sampled_from(FIXED),
    )


def wheres(snapshot: list[Any], members: Any) -> st.SearchStrategy[list[list[Conjunct]]]:
    """Three WHEREs of the filters above for an Ick whose rows are ``snapshot``: a mix, two
    score bounds (with another filter or not), and a lookup of every member in the shard it
    hashes to; the values those of the rows (bounds hit exactly) and others."""
    scores = st.sampled_from([r[1] for r in snapshot]) | SCORES if snapshot else SCORES
    present = conjuncts(
        st.sampled_from([r[0] for r in snapshot]) | members if snapshot else members, scores
    )
    ranges = st.lists(compared(scores), min_size=2, max_size=2)
    ranges = st.builds(lambda r, more: r + more, ranges, st.lists(present, max_size=1))
    lookup = [[listed("member", [r[0] for r in snapshot])]] if snapshot else []
    return st.builds(
        lambda mixed, bounded: [mixed, bounded, *lookup],
        st.lists(present, min_size=1, max_size=3),
        ranges,
    )


def check_random_filters(spark: Any, client: Any, url: str, members: Any, binary: bool) -> None:
    schema = snapshot_schema(binary)

    @settings(
        max_examples=SPARK_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.data())
    def check(data: st.DataObject) -> None:
        name = build(client, data, members)
        # Spark filters the whole snapshot (read without pushdown) as a local relation
        snapshot = rows(spark, url, name, None, False, binary)
        whole = spark.createDataFrame(snapshot, schema)
        for conjunction in data.draw(wheres(snapshot, members)):
            where = " AND ".join(sql for sql, _ in conjunction)
            assert rows(spark, url, name, where, True, binary) == collect(whole.where(where)), where

    check()


@pytest.mark.slow
def test_random_filters_give_the_rows_spark_gives(spark, client, redis_url):
    check_random_filters(spark, client, redis_url, TEXTS, binary=False)


@pytest.mark.slow
def test_random_filters_of_binary_members_give_the_rows_spark_gives(spark, client, redis_url):
    check_random_filters(spark, client, redis_url, BYTES, binary=True)


def test_filters_on_a_cluster(spark, cluster_client, cluster_url):
    name = "clustered"
    ick = ShardedIck(cluster_client, name, SHARDS)
    ick.add({f"doc:{i}": float(i) for i in range(60)})
    log = ReservationLog(cluster_client, shard_names(name, SHARDS)[1])
    log.reserve(5, 0, log.lease.acquire("t", 60_000))
    for where in [
        "member IN ('doc:1', 'doc:7', 'doc:99')",
        "shard = 1 AND state = 'reserved'",
        "score >= 10 AND score < 20.5 AND shard <> 0",
    ]:
        pushed = rows(spark, cluster_url, name, where, True)
        assert pushed and pushed == rows(spark, cluster_url, name, where, False), where


def out_bytes(client: Any) -> int:
    """Bytes Redis has sent so far (INFO's own reply counts in the next one)."""
    return int(client.info("stats")["total_net_output_bytes"])


def test_a_pushed_filter_reads_only_what_it_needs(spark, client, redis_url):
    n = 4000
    ick = ShardedIck(client, "narrow", SHARDS)
    ick.add({f"doc:{i}": float(i) for i in range(n)})

    info = -out_bytes(client) + out_bytes(client)  # the size of INFO's reply

    def read(where: str) -> tuple[int, int, int]:
        """(rows, bytes Redis sent for them, partitions)"""
        with pushdown(spark, True):
            df = (
                spark.read.format("ick")
                .option("redis.url", redis_url)
                .option("ick", "narrow")
                .option("shards", SHARDS)
                .load()
                .where(where)
            )
            before = out_bytes(client)
            got = df.count()
            return got, out_bytes(client) - before - info, df.rdd.getNumPartitions()

    full = read("member IS NOT NULL")
    assert full[:1] == (n,) and full[2] == SHARDS
    one = read("member = 'doc:42'")
    assert one[0] == 1 and one[2] == 1 and one[1] < full[1] / 20, (one, full)
    shard = read("shard = 1")
    assert shard[2] == 1 and shard[1] < full[1] / 2, (shard, full)
    ranged = read("score < 40")
    assert ranged[0] == 40 and ranged[1] < full[1] / 20, (ranged, full)
    assert read("shard = 7")[:1] == (0,)


@pytest.mark.slow
def test_a_member_that_is_not_utf8_is_neither_matched_nor_dropped(spark, client, redis_url):
    """A string read fails on a member that is not UTF-8 when it reaches it (naming it and
    memberType=binary), as an unfiltered read does; a lookup of other members does not
    reach it, and no string equals it (U+FFFD is not the byte it stands for)."""
    raw = b"a\xffb"
    ShardedIck(client, "raw", SHARDS).add({raw: 1.0, "ok": 2.0, "a\ufffdb": 3.0})
    bad = r"b'a\\xffb'.*memberType=binary"

    def members(where: str, on: bool = True) -> list[Any]:
        return [r[0] for r in rows(spark, redis_url, "raw", where, on)]

    assert members("member = 'ok'") == ["ok"]
    assert members("member IN ('a\ufffdb', 'zz')") == ["a\ufffdb"]
    assert members("score >= 2") == ["a\ufffdb", "ok"]
    for where in (f"shard = {shard_of(raw, SHARDS)}", "score < 1.5"):
        with pytest.raises(Exception, match=bad):
            members(where)
    with pytest.raises(Exception, match=bad):
        members("member = 'ok'", on=False)


def test_with_spark_pushdown_off_a_filtered_read_reads_everything(spark, client, redis_url):
    """Spark (4.1+) refuses a reader with pushFilters while its pushdown is off (the
    default): this one reads the whole snapshot instead, and Spark filters it."""
    ShardedIck(client, "whole", SHARDS).add({"x": 1.0, "y": 2.0})
    assert spark.conf.get(PUSHDOWN) == "false"
    assert [r[0] for r in rows(spark, redis_url, "whole", "member = 'y'", False)] == ["y"]


# --- the same filters on the driver, without Spark --------------------------------------


def holds(f: Any, row: dict[str, Any]) -> bool | None:
    """Whether ``row`` passes filter ``f`` as SQL says; None (null) when unknown."""
    if isinstance(f, Not):
        inner = holds(f.child, row)
        return None if inner is None else not inner
    value = row[f.attribute[0]]
    if isinstance(f, IsNull | IsNotNull):
        return (value is None) == isinstance(f, IsNull)
    if isinstance(f, EqualNullSafe):
        return bool(value == f.value)
    if value is None:
        return None
    if isinstance(f, In):
        return True if value in f.value else (None if None in f.value else False)
    op = {
        EqualTo: operator.eq,
        LessThan: operator.lt,
        LessThanOrEqual: operator.le,
        GreaterThan: operator.gt,
        GreaterThanOrEqual: operator.ge,
    }[type(f)]
    return bool(op(value, f.value))


def driver_rows(url: str, name: str, binary: bool, filters: list[Any]) -> list[dict[str, Any]]:
    """The rows of a snapshot reader offered ``filters`` as Spark offers them
    (``pushFilters``, then a task per partition), those it gave back applied as Spark
    applies them."""
    options = {"redis.url": url, "ick": name, "shards": str(SHARDS)}
    options["memberType"] = "binary" if binary else "string"
    reader = batch_reader(options, snapshot_schema(binary))
    rest = list(reader.pushFilters(filters)) if filters else []
    assert all(any(f is r for f in filters) for r in rest)  # given back by reference
    got = [r for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist()]
    return sorted((r for r in got if all(holds(f, r) for f in rest)), key=repr)


def check_on_the_driver(client: Any, url: str, members: Any, binary: bool) -> None:
    @settings(
        max_examples=DRIVER_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(st.data())
    def check(data: st.DataObject) -> None:
        name = build(client, data, members)
        whole = driver_rows(url, name, binary, [])
        drawn = wheres([(r["member"], r["score"]) for r in whole], members)
        for _ in range(ROUNDS):
            for conjunction in data.draw(drawn):
                filters = [f for _, fs in conjunction for f in fs]
                kept = [r for r in whole if all(holds(f, r) for f in filters)]
                got = driver_rows(url, name, binary, filters)
                assert got == kept, [sql for sql, _ in conjunction]

    check()


@pytest.mark.slow
@pytest.mark.parametrize("binary", [False, True], ids=["string", "binary"])
def test_random_filters_on_the_driver_give_the_rows_sql_gives(client, redis_url, binary):
    """The filters of the tests above as Spark hands them to the reader, without Spark:
    many more WHEREs than Spark can run here, each giving the rows of the whole snapshot
    that SQL keeps."""
    check_on_the_driver(client, redis_url, BYTES if binary else TEXTS, binary)
