"""Reading never writes (issue 50 items 3 and 4, issue 51 item 5): a batch read, a CLI read
command, a console page or an exporter scrape of a name that does not exist leaves every key
of the server as it was, and fails naming the name, the Redis asked (no password) and a
registered name close to it; an empty Ick or dehydrator is a state, shown with its zeros."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_cli import cli, failed
from test_cli_missing import snapshot

from pyspark_ick import Dehydrator, ShardedIck
from pyspark_ick.cli import main
from pyspark_ick.existence import Missing, require, shards_of
from pyspark_ick.retries import RetryPolicy
from pyspark_ick.spark.dead_letters_reader import dead_letter_reader, dead_letter_schema
from pyspark_ick.spark.dehydrator_reader import source_schema
from pyspark_ick.spark.dehydrator_snapshot import batch_reader as dehydrator_batch_reader
from pyspark_ick.spark.ick_reader import SNAPSHOT_SCHEMA
from pyspark_ick.spark.ick_snapshot import batch_reader as ick_batch_reader
from pyspark_ick.urls import where


def neighbours(client: Any) -> None:
    """A registered Ick with a dead letter and a registered dehydrator, so a read of a
    name close to theirs has something to suggest (and to write into, were it to)."""
    docs = ShardedIck(client, "dirty_docs", 2)
    docs.add({"doc:1": 1.0, "doc:2": 2.0})
    shard = docs.shard(docs.shard_of("doc:1"))
    shard.reserve(2)
    shard.fail({"doc:1": "boom"}, RetryPolicy(max_attempts=1))
    Dehydrator(client, "parked_docs", shards=2).push("id1", "x", 60_000)


def batch_reads(spark: Any, url: str) -> dict[str, Any]:
    """Every Spark batch read, of a name one letter off a registered one."""

    def ick(**options: str) -> Any:
        reader = spark.read.format("ick").option("redis.url", url).option("ick", "dirty_doc")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader

    return {
        "Ick 'dirty_doc'": ick(),
        "Ick 'dirty_doc' ": ick(deadLetters="true"),
        "dehydrator 'parked_doc'": spark.read.format("dehydrator")
        .option("redis.url", url)
        .option("dehydrator", "parked_doc"),
    }


@pytest.mark.slow  # three failing Spark reads: a Python worker each to plan them
def test_a_typo_in_a_batch_read_writes_nothing_and_names_the_redis_and_the_close_name(
    spark, redis_url, client
):
    neighbours(client)
    before = snapshot(client)
    for label, reader in batch_reads(spark, redis_url).items():
        with pytest.raises(Exception) as caught:
            reader.load().collect()
        close = "dirty_docs" if label.startswith("Ick") else "parked_docs"
        said = str(caught.value)
        assert f"{label.strip()} does not exist in Redis at {where(redis_url)}" in said, said
        assert f"did you mean {close!r}?" in said, said
        assert snapshot(client) == before, label


def driver_reads(url: str) -> dict[str, Any]:
    """What Spark calls on the driver to plan each batch read (no Spark needed)."""
    ick = {"redis.url": url, "ick": "dirty_doc"}
    return {
        "Ick 'dirty_doc'": lambda: ick_batch_reader(ick, SNAPSHOT_SCHEMA),
        "Ick 'dirty_doc' ": lambda: dead_letter_reader(
            {**ick, "deadLetters": "true"}, dead_letter_schema()
        ),
        "dehydrator 'parked_doc'": lambda: dehydrator_batch_reader(
            {"redis.url": url, "dehydrator": "parked_doc"}, source_schema()
        ),
    }


def test_a_typo_in_a_batch_read_fails_on_the_driver_and_writes_nothing(redis_url, client):
    neighbours(client)
    before = snapshot(client)
    for label, plan in driver_reads(redis_url).items():
        with pytest.raises(Missing) as caught:
            plan()
        close = "dirty_docs" if label.startswith("Ick") else "parked_docs"
        assert str(caught.value) == (
            f"{label.strip()} does not exist in Redis at {where(redis_url)}; "
            f"did you mean {close!r}?"
        )
        assert snapshot(client) == before, label


def test_the_missing_error_masks_the_password(acl_url, client):
    """What the Spark reads raise (existence.require with urls.where) holds no password."""
    with pytest.raises(Missing) as caught:
        require(client, "nosuch", "ick", where=where(acl_url))
    assert "s3cret" not in str(caught.value) and where(acl_url) in str(caught.value)
    assert where(acl_url).startswith("redis://127.0.0.1:")


def test_the_cli_names_the_redis_and_the_close_name(redis_url, client):
    neighbours(client)
    message = failed(cli("stats", "dirty_doc", url=redis_url), 3)
    assert f"in Redis at {where(redis_url)}" in message, message
    assert "did you mean 'dirty_docs'?" in message, message
    message = failed(cli("dead", "redrive", "dirty_docs", "doc:9", url=redis_url), 3)
    assert f"(Redis at {where(redis_url)})" in message, message


def test_an_empty_dehydrator_has_stats(redis_url, client):
    drained = Dehydrator(client, "drained", shards=2)
    drained.push("id1", "x", 60_000)
    assert drained.pull("id1") == "x"
    done = cli("dehydrator", "stats", "drained", "--json", url=redis_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["parked"] == 0
    table = cli("dehydrator", "stats", "drained", url=redis_url)
    assert table.returncode == 0 and "drained" in table.stdout, table.stderr


def test_an_empty_ick_has_stats(redis_url, client):
    emptied = ShardedIck(client, "emptied", 2)
    emptied.add({"a": 1.0})
    emptied.shard(emptied.shard_of("a")).reserve(1)
    emptied.shard(emptied.shard_of("a")).commit("a")
    done = cli("stats", "emptied", "--json", url=redis_url)
    assert done.returncode == 0, done.stderr
    totals = json.loads(done.stdout)["totals"]
    assert (totals["queued"], totals["reserved"]) == (0, 0)


def test_existence_is_recorded_or_held(client):
    """Recorded: exists, empty or not. Nothing recorded: exists while a shard's key is
    there (the gem's producers record nothing). Neither: does not."""
    Dehydrator(client, "recorded", shards=3).check_shards()
    assert shards_of(client, "recorded", "dehydrator") == 3
    client.zadd("gem/ick/{gem}/pset", {"m": 1.0})  # what the gem's ickadd writes
    assert shards_of(client, "gem") == 1
    assert shards_of(client, "nosuch") is None and shards_of(client, "recorded") is None


READ_COMMANDS = [
    ("stats", "nosuch"),
    ("stats", "nosuch", "--json"),
    ("peek", "nosuch"),
    ("layout", "nosuch"),
    ("layout", "nosuch", "--dehydrator"),
    ("dead", "list", "nosuch"),
    ("dead", "count", "nosuch"),
    ("dehydrator", "stats", "nosuch"),
    ("dehydrator", "peek", "nosuch"),
    ("dehydrator", "look", "nosuch", "id1"),
    ("dehydrator", "ttn", "nosuch"),
]
"""The CLI's commands documented as reading (docs/reference/cli.md)."""


def test_every_read_of_a_missing_name_writes_nothing(redis_url, client, capsys):
    """The CLI's read commands (in this process: the same ``main``), the batch reads'
    driver side, the console's pages and the exporter's scrape, each on a name that does
    not exist: every key stays as it was."""
    from prometheus_client import CollectorRegistry, generate_latest

    from pyspark_ick.metrics import Collector
    from pyspark_ick.web.app import create_app
    from pyspark_ick.web.history import History

    neighbours(client)
    before = snapshot(client)
    asked = where(redis_url)
    for args in READ_COMMANDS:
        assert main(["--url", redis_url, *args]) == 3, args
        message = capsys.readouterr().err
        assert "'nosuch' does not exist in Redis at " + asked in message, (args, message)
    for plan in driver_reads(redis_url).values():
        with pytest.raises(Missing):
            plan()
    app = create_app(
        client,
        History(5.0),
        token=None,
        allow_actions=False,
        where=asked,
        scrub=str,
        passwords=[],
    )
    browser = app.test_client()
    for path in ("/ick?name=nosuch", "/dead?ick=nosuch", "/dehydrator?name=nosuch"):
        reply = browser.get(path)
        page = reply.get_data(as_text=True)
        assert reply.status_code == 404 and "does not exist in Redis at " + asked in page, path
    assert browser.get("/").status_code == 200
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(client))  # type: ignore[arg-type]
    scraped = generate_latest(registry).decode()
    assert 'ick="dirty_docs"' in scraped and "nosuch" not in scraped
    assert snapshot(client) == before


def test_reading_an_ick_nothing_recorded_records_nothing(redis_url, client, capsys):
    """The gem's producers record nothing: every read finds their Ick and none records
    it (no shard count, layout or registry entry appears)."""
    from pyspark_ick.web.app import create_app
    from pyspark_ick.web.history import History

    client.set("gemq", "ick.v1")  # what the gem's ickadd writes: the flag and the pset
    client.zadd("gemq/ick/{gemq}/pset", {"doc:1": 1.0, "doc:2": 2.0})
    before = snapshot(client)
    for args in (("stats", "gemq"), ("peek", "gemq"), ("dead", "list", "gemq")):
        assert main(["--url", redis_url, *args]) == 0, capsys.readouterr().err
    options = {"redis.url": redis_url, "ick": "gemq"}
    ick_batch_reader(options, SNAPSHOT_SCHEMA)
    dead_letter_reader({**options, "deadLetters": "true"}, dead_letter_schema())
    app = create_app(
        client, History(5.0), token=None, allow_actions=False, where="", scrub=str, passwords=[]
    )
    for path in ("/ick?name=gemq", "/dead?ick=gemq"):
        assert app.test_client().get(path).status_code == 200, path
    assert snapshot(client) == before


def test_the_console_and_the_exporter_name_the_redis_that_failed():
    """A Redis that does not answer: the console's page and the exporter's scrape error
    name it (no server listens on a free port)."""
    import redis
    from prometheus_client import CollectorRegistry, generate_latest
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from pyspark_ick.clients import settings
    from pyspark_ick.errors import IckError
    from pyspark_ick.metrics import Collector
    from pyspark_ick.testing import free_port
    from pyspark_ick.web.app import create_app
    from pyspark_ick.web.history import History

    port = free_port()
    gone = redis.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    settings(gone).retry_timeout = 0.5  # retried half a second, not a minute
    asked = where(f"redis://127.0.0.1:{port}/0")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(gone, asked))  # type: ignore[arg-type]
    with pytest.raises(IckError, match=f"Redis at {asked}"):
        generate_latest(registry)
    app = create_app(
        gone, History(5.0), token=None, allow_actions=False, where=asked, scrub=str, passwords=[]
    )
    reply = app.test_client().get("/ick?name=docs")
    page = reply.get_data(as_text=True)
    assert reply.status_code == 503 and f"Redis at {asked}" in page
    assert "--retry-timeout" in page and "redis.retryTimeout" not in page  # the console's flag


def test_a_shard_count_that_differs_names_the_redis(redis_url, client):
    from pyspark_ick.errors import ShardCountError

    neighbours(client)
    options = {"redis.url": redis_url, "ick": "dirty_docs", "shards": "4"}
    with pytest.raises(
        ShardCountError, match=f"2 shards recorded.* \\(Redis at {where(redis_url)}\\)"
    ):
        ick_batch_reader(options, SNAPSHOT_SCHEMA)
