"""The options table: a misspelled or misplaced option is an error naming the right one, and
README's option tables say what the table says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pyspark_ick import IckConfigError, ShardedIck
from pyspark_ick.option_table import (
    CONNECTION_OPTIONS,
    DH_READ,
    DH_STREAM,
    DH_WRITE,
    ICK_STREAM,
    ICK_WRITE,
    OPTIONS,
    USES,
    taken_by,
)
from pyspark_ick.options import check_known

README = Path(__file__).resolve().parents[1] / "README.md"


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
        ("ick", "memberColumn", "id", "'memberColumn' is an option of format('ick') write"),
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


def _readme_tables() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """Option names of the first column of each table in README's Options section, by the
    bold heading (or 'connection') above the table; and (heading, name) -> the default
    column of rows that name one option."""
    section = README.read_text().split("## Options", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, set[str]] = {}
    defaults: dict[tuple[str, str], str] = {}
    heading = "connection"
    for line in section.splitlines():
        if line.startswith("**"):
            heading = line
        elif line.startswith("| `"):
            first, default = line.split("|")[1:3]
            names = re.findall(r"`([^`]+)`", first)
            tables.setdefault(heading, set()).update(names)
            if len(names) == 1 and default.strip().startswith("`"):
                defaults[heading, names[0]] = default.strip().strip("`")
    return tables, defaults


def test_readme_option_tables_match_the_options_table():
    tables, defaults = _readme_tables()
    assert tables.pop("connection") == set(CONNECTION_OPTIONS)
    headings = {
        ICK_WRITE: 'df.write.format("ick")',
        ICK_STREAM: 'spark.readStream.format("ick")',
        DH_WRITE: 'df.write.format("dehydrator")',
        DH_STREAM: 'spark.readStream.format("dehydrator")',
        DH_READ: 'spark.read.format("dehydrator")',
    }
    for use, heading in headings.items():
        [(line, names)] = [(line, names) for line, names in tables.items() if heading in line]
        assert names == set(taken_by(use)) - set(CONNECTION_OPTIONS), use
        for option in OPTIONS:
            if use in option.uses and (line, option.name) in defaults:
                assert defaults[line, option.name] == option.shown, (use, option.name)
    everything = set().union(*tables.values()) | set(CONNECTION_OPTIONS)
    assert everything == {o.name for o in OPTIONS}
