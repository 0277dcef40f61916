"""Spark SQL on formats ick and dehydrator (issue 26, part 2).

Spark keeps a catalog table's OPTIONS from a Python data source (spark/tables.py says where),
so INSERT into / SELECT from a table ``USING ick OPTIONS (...)`` fails: it must fail naming
what works, and what it names must work: options in the statement (``WITH (...)``) and a
temporary view ``USING ick OPTIONS (...)``, which keeps its options for reads and writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_ick import Dehydrator, Ick


@pytest.fixture
def sql(spark: Any) -> Iterator[Any]:
    """spark.sql; afterwards drops the tables and views named sql_* that a test made."""
    yield spark.sql
    for table in spark.catalog.listTables():
        if table.name.startswith("sql_"):
            kind = "VIEW" if table.isTemporary else "TABLE"
            spark.sql(f"DROP {kind} IF EXISTS {table.name}")


def rows(df: Any) -> set[tuple[Any, ...]]:
    return {tuple(r) for r in df.collect()}


def test_insert_into_a_table_using_ick_says_what_works(
    sql: Any, redis_url: str, client: Any
) -> None:
    sql(
        f"CREATE TABLE sql_t (member STRING, score DOUBLE) USING ick "
        f"OPTIONS (`redis.url` '{redis_url}', ick 'q')"
    )
    for statement in (
        "INSERT INTO sql_t VALUES ('a', 1.0)",
        "INSERT OVERWRITE sql_t VALUES ('a', 1.0)",
        "SELECT * FROM sql_t",
    ):
        with pytest.raises(Exception) as failed:
            sql(statement).collect()
        message = str(failed.value)
        assert "catalog table's OPTIONS" in message, (statement, message[:2000])
        assert "INSERT INTO t WITH (" in message and "CREATE TEMPORARY VIEW" in message
    assert client.dbsize() == 0  # failed before writing anything


def test_insert_into_a_table_using_dehydrator_says_what_works(sql: Any, redis_url: str) -> None:
    sql(
        f"CREATE TABLE sql_d (id STRING, element STRING) USING dehydrator "
        f"OPTIONS (`redis.url` '{redis_url}', dehydrator 'd', delay '1h')"
    )
    with pytest.raises(Exception) as failed:
        sql("INSERT INTO sql_d VALUES ('i1', 'x')").collect()
    message = str(failed.value)
    assert "catalog table's OPTIONS" in message, message[:2000]
    assert "USING dehydrator" in message and "'dehydrator' = 'd'" in message


def test_a_table_takes_the_options_in_the_statement(sql: Any, redis_url: str, client: Any) -> None:
    sql(
        f"CREATE TABLE sql_w (member STRING, score DOUBLE) USING ick "
        f"OPTIONS (`redis.url` '{redis_url}', ick 'q')"
    )
    options = f"'redis.url' = '{redis_url}', 'ick' = 'q'"
    sql(f"INSERT INTO sql_w WITH ({options}) VALUES ('a', 1.0), ('b', 2.0)")
    assert rows(sql(f"SELECT member, score FROM sql_w WITH ({options})")) == {
        ("a", 1.0),
        ("b", 2.0),
    }
    sql(f"INSERT OVERWRITE sql_w WITH ({options}) VALUES ('c', 3.0)")
    assert Ick(client, "q").reserve(10) == [("c", 3.0)]


def test_a_temporary_view_reads_and_writes_with_its_options(
    sql: Any, redis_url: str, client: Any
) -> None:
    sql(
        f"CREATE TEMPORARY VIEW sql_v (member STRING, score DOUBLE) USING ick "
        f"OPTIONS (`redis.url` '{redis_url}', ick 'q', shards '2')"
    )
    sql("INSERT INTO sql_v VALUES ('a', 1.0), ('b', 2.0)")
    sql("INSERT INTO sql_v SELECT 'c', 3.0")
    assert rows(sql("SELECT * FROM sql_v")) == {("a", 1.0), ("b", 2.0), ("c", 3.0)}
    sql("INSERT OVERWRITE sql_v VALUES ('d', 4.0)")
    assert rows(sql("SELECT * FROM sql_v")) == {("d", 4.0)}

    # without a column list the view has the reader's columns: a snapshot with shards
    sql(
        f"CREATE TEMPORARY VIEW sql_s USING ick OPTIONS (`redis.url` '{redis_url}', "
        f"ick 'q', shards '2')"
    )
    assert [r.member for r in sql("SELECT * FROM sql_s").collect()] == ["d"]


def test_a_temporary_view_parks_in_a_dehydrator(sql: Any, redis_url: str, client: Any) -> None:
    sql(
        f"CREATE TEMPORARY VIEW sql_dv (id STRING, element STRING) USING dehydrator "
        f"OPTIONS (`redis.url` '{redis_url}', dehydrator 'd', delay '1h')"
    )
    sql("INSERT INTO sql_dv VALUES ('i1', 'one'), ('i2', 'two')")
    parked = Dehydrator(client, "d")
    assert (parked.look("i1"), parked.look("i2")) == ("one", "two")


def test_a_view_reads_with_the_options_its_writes_take(
    sql: Any, redis_url: str, client: Any
) -> None:
    """A view is one table: SELECT gets the OPTIONS that only INSERT uses (a dehydrator's
    delay, an Ick writer's onInvalid and chunkSize) and ignores them."""
    sql(
        f"CREATE TEMPORARY VIEW sql_dv (id STRING, element STRING) USING dehydrator "
        f"OPTIONS (`redis.url` '{redis_url}', dehydrator 'd', delay '1h', onDuplicate 'keep')"
    )
    sql("INSERT INTO sql_dv VALUES ('i1', 'one'), ('i2', 'two')")
    assert rows(sql("SELECT id, element FROM sql_dv")) == {("i1", "one"), ("i2", "two")}
    sql(  # without a column list: Spark asks the source for its schema (at load())
        f"CREATE TEMPORARY VIEW sql_ds USING dehydrator "
        f"OPTIONS (`redis.url` '{redis_url}', dehydrator 'd', delay '1h')"
    )
    assert rows(sql("SELECT id, element FROM sql_ds")) == {("i1", "one"), ("i2", "two")}

    options = f"`redis.url` '{redis_url}', ick 'q', onInvalid 'skip', chunkSize '10'"
    sql(f"CREATE TEMPORARY VIEW sql_v (member STRING, score DOUBLE) USING ick OPTIONS ({options})")
    sql("INSERT INTO sql_v VALUES ('a', 1.0), (NULL, 2.0)")  # the null member: skipped
    assert rows(sql("SELECT member, score FROM sql_v")) == {("a", 1.0)}
    sql(f"CREATE TEMPORARY VIEW sql_s USING ick OPTIONS ({options})")
    assert rows(sql("SELECT member, score FROM sql_s")) == {("a", 1.0)}
