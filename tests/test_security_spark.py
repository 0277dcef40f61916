"""The restricted ACL user of docs/security.md runs every Spark format, and no log line,
plan or error of those jobs shows its password."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from pyspark_ick import Dehydrator, ShardedIck, connect
from pyspark_ick.acl import acl_rules

PASSWORD = "Sp4rk-s3cret"


@pytest.fixture
def acl_url(redis_url: str, redis_standalone: Any) -> Iterator[str]:
    """The standalone server as user ``ick``, allowed only the keys of dirty_docs, parked."""
    with redis_standalone.client() as admin:
        admin.execute_command("ACL", "SETUSER", "ick", *acl_rules(PASSWORD, "dirty_docs", "parked"))
    yield redis_url.replace("redis://", f"redis://ick:{PASSWORD}@")
    with redis_standalone.client() as admin:
        admin.execute_command("ACL", "DELUSER", "ick")


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
    query = (
        spark.readStream.format("ick")
        .options(**opts)
        .option("ick", "dirty_docs")
        .option("shards", 4)
        .load()
        .writeStream.foreachBatch(lambda df, _: seen.extend(r.member for r in df.collect()))
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ick"))
        .start()
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
    query = (
        spark.readStream.format("dehydrator")
        .options(**opts)
        .option("dehydrator", "parked")
        .load()
        .writeStream.foreachBatch(lambda df, _: released.extend(r.element for r in df.collect()))
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "dh"))
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(released) == ["element a", "element b"]
    assert Dehydrator(client, "parked").ttn() == -1

    leaks = {r.name for r in caplog.records if PASSWORD in r.getMessage()}
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
    assert PASSWORD not in text


def test_restricted_user_cannot_touch_keys_outside_its_patterns(acl_url):
    restricted = connect(acl_url)
    with pytest.raises(Exception, match=r"NOPERM|permission"):
        restricted.set("unrelated", "x")
