"""The options table: a misspelled or misplaced option is an error naming the right one, and
the options reference shows a table for each use of it (docs/generate.py writes them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pyspark_ick import IckConfigError, ShardedIck
from pyspark_ick.option_table import (
    DH_READ,
    DH_STREAM,
    DH_WRITE,
    ICK_READ,
    ICK_STREAM,
    ICK_WRITE,
    OPTIONS,
    USES,
)
from pyspark_ick.options import check_known

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "options.md"


@pytest.mark.parametrize(
    ("use", "given", "message"),
    [
        (ICK_WRITE, "shard", "unknown option 'shard'; did you mean 'shards'?"),
        (ICK_WRITE, "scoreColum", "did you mean 'scoreColumn'?"),
        (ICK_STREAM, "maxMemberPerTrigger", "did you mean 'maxMembersPerTrigger'?"),
        (
            DH_STREAM,
            "maxMembersPerTrigger",
            "did you mean 'maxElementsPerTrigger'?; 'maxMembersPerTrigger' is an option of "
            "format('ick') readStream",
        ),
        (DH_WRITE, "memberColumn", "'memberColumn' is an option of format('ick') write"),
    ],
)
def test_an_unknown_option_names_the_right_one(use, given, message):
    with pytest.raises(IckConfigError, match=re.escape(message)) as info:
        check_known({"redis.url": "redis://x", given: "1"}, use)
    assert str(info.value).startswith(f"{use}: unknown option {given!r}")


@pytest.mark.parametrize("use", USES)
@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("redis.urll", "did you mean 'redis.url'?"),
        ("redis.pasword", "'redis.password'"),
        ("redis.anything", "It takes: redis.url"),
    ],
)
def test_a_redis_option_that_does_not_exist_is_refused_by_every_use(use, given, hint):
    with pytest.raises(IckConfigError, match=f"unknown option {given!r}.*{re.escape(hint)}"):
        check_known({given: "x"}, use)


def test_sparks_own_options_and_any_case_pass():
    for use in USES:
        check_known(
            {"path": "p", "checkpointLocation": "c", "REDIS.URL": "u", "spark.foo": "x"}, use
        )


def test_a_misspelled_option_fails_on_the_driver_and_writes_nothing(spark, redis_url, client):
    df = spark.createDataFrame([("a", 1.0)], "member string, score double")
    with pytest.raises(Exception, match="did you mean 'shards'"):
        df.write.format("ick").option("redis.url", redis_url).option("ick", "typo").option(
            "shard", 4
        ).mode("append").save()
    assert client.keys("*") == []  # neither members nor a shard count recorded
    reader = (
        spark.readStream.format("dehydrator")
        .option("redis.url", redis_url)
        .option("dehydrator", "d")
        .option("maxMembersPerTrigger", 10)
    )
    with pytest.raises(Exception, match="did you mean 'maxElementsPerTrigger'"):
        reader.load().writeStream.foreachBatch(lambda df, i: None).start().awaitTermination(60)
    ShardedIck(client, "typo", 1).check_shards()  # the right count is still free to record


@pytest.mark.parametrize(
    ("fmt", "option", "value", "message"),
    [
        ("ick", "maxMemberPerTrigger", "10", "did you mean 'maxMembersPerTrigger'?"),
        ("ick", "delay", "1h", "'delay' is an option of format('dehydrator') write"),
        ("ick", "maxMembersPerTrigger", "lots", "option 'maxMembersPerTrigger': expected an"),
        ("dehydrator", "maxElementPerTrigger", "10", "did you mean 'maxElementsPerTrigger'?"),
        ("dehydrator", "idType", "text", "option 'idType': expected one of string | binary"),
    ],
)
def test_a_read_fails_at_load_not_after_start(spark, redis_url, fmt, option, value, message):
    """Spark asks the source for its schema at load(), on the driver: the options are
    checked there, for a stream (before start()) and for a batch read alike."""
    for read in (spark.readStream, spark.read):
        source = read.format(fmt).option("redis.url", redis_url).option(fmt, "q")
        with pytest.raises(Exception, match=re.escape(message)):
            source.option(option, value).load()


def test_the_options_reference_shows_every_use_and_every_option_says_what_it_does():
    """Each use has its generated table in docs/reference/options.md; an option without
    a meaning would show an empty cell."""
    markers = re.findall(r"^<!-- generated: options: (.+?) -->$", REFERENCE.read_text(), re.M)
    assert sorted(markers) == sorted(["connection", *USES])
    for option in OPTIONS:
        assert option.meaning[:1].isupper() or option.meaning[:1] == "`", option.name
        assert not option.meaning.endswith("."), option.name  # the table adds no period


def test_a_batch_read_takes_and_ignores_its_formats_write_options():
    """A SQL view's OPTIONS reach its SELECT too (option_table.IGNORES); a stream read
    still refuses them, and a misspelled one is refused by both."""
    check_known({"dehydrator": "d", "delay": "1h", "onDuplicate": "keep"}, DH_READ)
    check_known({"ick": "q", "onInvalid": "skip", "memberColumn": "id"}, ICK_READ)
    with pytest.raises(IckConfigError, match="unknown option 'delay'"):
        check_known({"delay": "1h"}, DH_STREAM)  # at start(): load() cannot tell the two

    with pytest.raises(IckConfigError, match="unknown option 'dely'") as info:
        check_known({"dely": "1h"}, DH_READ)
    assert "delay" not in str(info.value).split("It takes:")[1]  # lists what a read uses
