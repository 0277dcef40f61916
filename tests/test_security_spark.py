"""The restricted ACL user of docs/security.md runs every Spark format, and no log line,
plan or error of those jobs shows its password."""

from __future__ import annotations

import logging

import pytest
from support import ACL_PASSWORD, stream

from pyspark_ick import Dehydrator, ShardedIck, connect


@pytest.mark.slow
def test_restricted_user_runs_writer_reader_and_dehydrator(
    spark, acl_url, client, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG)
    opts = {"redis.url": acl_url}

    docs = [(f"doc:{i}", float(i)) for i in range(50)]
    (
        spark.createDataFrame(docs, "member string, score double")
        .write.format("ick")
        .options(**opts)
        .option("ick", "dirty_docs")
        .option("shards", 4)
        .mode("append")
        .save()
    )
    assert ShardedIck(client, "dirty_docs", 4).stats()["pset_size"] == 50

    seen: list[str] = []
    query = stream(
        spark,
        "ick",
        {**opts, "ick": "dirty_docs", "shards": 4},
        lambda df, _: seen.extend(r.member for r in df.collect()),
        str(tmp_path / "ick"),
        trigger=None,
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(seen) == sorted(f"doc:{i}" for i in range(50))

    (
        spark.createDataFrame([("a", "element a"), ("b", "element b")], "id string, element string")
        .write.format("dehydrator")
        .options(**opts)
        .option("dehydrator", "parked")
        .option("delay", "1ms")
        .mode("append")
        .save()
    )
    released: list[str] = []
    query = stream(
        spark,
        "dehydrator",
        {**opts, "dehydrator": "parked"},
        lambda df, _: released.extend(r.element for r in df.collect()),
        str(tmp_path / "dh"),
        trigger=None,
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(released) == ["element a", "element b"]
    assert Dehydrator(client, "parked").ttn() == -1

    leaks = {r.name for r in caplog.records if ACL_PASSWORD in r.getMessage()}
    assert not {n for n in leaks if n.startswith(("pyspark_ick", "redis"))}, leaks


def test_restricted_user_is_refused_other_icks_with_a_clear_error(spark, acl_url):
    df = spark.createDataFrame([("doc:1", 1.0)], "member string, score double")
    with pytest.raises(Exception) as failure:
        (
            df.write.format("ick")
            .option("redis.url", acl_url)
            .option("ick", "someone_else")
            .mode("append")
            .save()
        )
    text = str(failure.value)
    assert "NOPERM" in text or "permission" in text.lower()
    assert ACL_PASSWORD not in text


def test_restricted_user_cannot_touch_keys_outside_its_patterns(acl_url):
    restricted = connect(acl_url)
    with pytest.raises(Exception, match=r"NOPERM|permission"):
        restricted.set("unrelated", "x")
