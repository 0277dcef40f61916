"""A CLI that never writes by mistake (issue 41): every command on a missing Ick, dehydrator
or member exits 3 with one line naming it, and Redis is byte-identical afterwards;
``--version``; a closed pipe ends quietly; no option that does nothing; every command in
the module docstring."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from support import cli_command
from test_cli import cli, failed

import pyspark_ick
import pyspark_ick.cli as cli_module
from pyspark_ick import Dehydrator, Ick, ShardedIck
from pyspark_ick.cli.parser import build_parser
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.retries import RetryPolicy
from pyspark_ick.urls import where


def snapshot(client: Any) -> dict[bytes, bytes | None]:
    """Every key of the test server and its DUMP (SCAN is fine on a test server)."""
    return {key: client.dump(key) for key in client.scan_iter(count=1000)}


def neighbours(client: Any) -> None:
    """Other Icks and dehydrators, so a command that writes anywhere shows."""
    ShardedIck(client, "present", 2).add({"a": 1.0, "b": 2.0})
    Dehydrator(client, "parked", shards=2).push("id1", "x", 60_000)
    ick = Ick(client, "failing")
    ick.add({"m1": 1.0, "m2": 2.0})
    ick.reserve(2)
    ick.fail({"m1": "boom"}, RetryPolicy(max_attempts=1))  # m1: a dead letter


MISSING = [
    ("stats", "nosuch"),
    ("stats", "nosuch", "--json"),
    ("stats", "nosuch", "--watch", "0.1", "--json"),
    ("peek", "nosuch"),
    ("peek", "nosuch", "--json"),
    ("del", "nosuch", "--yes"),
    ("release", "nosuch"),
    ("reshard", "nosuch", "--to", "2", "--yes"),
    ("layout", "nosuch"),
    ("dead", "list", "nosuch"),
    ("dead", "list", "nosuch", "--json"),
    ("dead", "count", "nosuch"),
    ("dead", "count", "nosuch", "--json"),
    ("dead", "redrive", "nosuch"),
    ("dead", "redrive", "nosuch", "m1"),
    ("dead", "purge", "nosuch", "--yes"),
    ("dead", "purge", "nosuch", "m1"),
    ("retry-due", "nosuch"),
    ("retry-due", "nosuch", "--every", "0.1"),
    ("dehydrator", "stats", "nosuch"),
    ("dehydrator", "stats", "nosuch", "--watch", "0.1", "--json"),
    ("dehydrator", "peek", "nosuch"),
    ("dehydrator", "look", "nosuch", "id1"),
    ("dehydrator", "pull", "nosuch", "id1"),
    ("dehydrator", "ttn", "nosuch"),
    ("dehydrator", "release", "nosuch"),
    ("layout", "nosuch", "--dehydrator"),
    # an existing Ick, a member that is not one of its dead letters
    ("dead", "redrive", "failing", "m9"),
    ("dead", "purge", "failing", "m9"),
    ("dead", "redrive", "present", "a"),
    # an existing dehydrator, an id it does not hold
    ("dehydrator", "look", "parked", "nosuch"),
    ("dehydrator", "pull", "parked", "nosuch"),
]


@pytest.mark.parametrize("args", MISSING, ids=" ".join)
def test_a_missing_name_exits_3_and_writes_nothing(redis_url, client, args):
    neighbours(client)
    before = snapshot(client)
    message = failed(cli(*args, url=redis_url), 3)
    assert "nosuch" in message or "m9" in message or "'a'" in message, message
    assert snapshot(client) == before


def test_redrive_does_the_dead_letters_named_and_names_the_others(redis_url, client):
    neighbours(client)
    message = failed(cli("dead", "redrive", "failing", "m1", "m9", "m8", url=redis_url), 3)
    assert "1 dead letters re-driven" not in message  # that goes to stdout
    assert "'m9'" in message and "'m8'" in message and "'m1'" not in message, message
    assert DeadLetters(ShardedIck(client, "failing", 1)).count() == [0]
    assert client.zscore(Ick(client, "failing").keys.pset, "m1") == 1.0
    done = cli("dead", "purge", "failing", "m1", url=redis_url)
    assert failed(done, 3) == (
        f"pyspark-ick: Ick 'failing' has no dead letter 'm1' (Redis at {where(redis_url)})"
    )


def test_version_prints_the_package_version(redis_url):
    done = cli("--version", url=redis_url)
    assert (done.returncode, done.stdout.strip()) == (0, f"pyspark-ick {pyspark_ick.__version__}")


def piped(args: list[str], redis_url: str, close_first: bool) -> tuple[int, str]:
    """Run the CLI into a pipe read by ``head -c 200`` (or closed before it writes: output
    that fits the pipe's buffer meets a closed pipe only then): its exit code and stderr."""
    writer = subprocess.Popen(
        [*cli_command(url=redis_url), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    if close_first:
        writer.stdout.close()
    else:
        head = subprocess.Popen(["head", "-c", "200"], stdin=writer.stdout, stdout=subprocess.PIPE)
        writer.stdout.close()  # head holds the only read end
        assert len(head.communicate(timeout=60)[0]) == 200
    _, stderr = writer.communicate(timeout=60)
    return writer.returncode, stderr


def test_a_closed_pipe_ends_quietly(redis_url, client):
    ShardedIck(client, "big", 64).add({f"member-{i}": float(i) for i in range(1000)})
    for args, close_first in (
        (["stats", "big", "--json"], True),
        (["stats", "big", "--json", "--watch", "0.1"], False),
        (["peek", "big", "-n", "500"], True),  # a rich table
        (["stats", "big", "--watch", "0.1"], False),  # rich, again and again
    ):
        code, stderr = piped(args, redis_url, close_first)
        assert (code, stderr) == (141, ""), (args, stderr)


def test_redrive_offers_no_yes_purge_does(redis_url):
    assert "--yes" not in cli("dead", "redrive", "--help", url=redis_url).stdout
    assert "--yes" in cli("dead", "purge", "--help", url=redis_url).stdout


def test_the_module_docstring_lists_every_command():
    parser = build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    for name in commands.choices:
        assert f"pyspark-ick {name} " in cli_module.__doc__, name


@pytest.mark.cluster
def test_on_a_cluster_a_missing_name_exits_3_and_an_existing_one_works(cluster_url, cluster_client):
    ShardedIck(cluster_client, "present", 4).add({f"m{i}": float(i) for i in range(20)})
    for args in (("stats", "nosuch"), ("dead", "count", "nosuch"), ("retry-due", "nosuch")):
        assert "nosuch" in failed(cli(*args, url=cluster_url), 3)
    assert "nosuch" in failed(cli("dehydrator", "ttn", "nosuch", url=cluster_url), 3)
    assert cli("retry-due", "present", url=cluster_url).returncode == 0
    totals = json.loads(cli("stats", "present", "--json", url=cluster_url).stdout)["totals"]
    assert (totals["queued"], totals["retrying"], totals["dead"]) == (20, 0, 0)


def test_a_missing_name_says_which_database_it_looked_in(redis_url, client):
    """An Ick on database 3 looked for on database 0, or the other way round, is not
    there: the message names the database whenever it is not 0."""
    base = redis_url.rsplit("/", 1)[0]
    ShardedIck(client, "on_zero", 1).add({"a": 1.0})
    message = failed(cli("stats", "on_zero", url=f"{base}/3"), 3)
    assert f"Redis at {base}/3 " in message, message
    assert where(f"{base}/0") == where(base) == where(f"{base}?db=0") == base
    assert where(f"{base}?db=5") == f"{base}/5"
    assert where("redis://u:pw@h1:7000,h2:7001/2") == "redis://h1:7000,h2:7001/2"
    assert where("unix:///tmp/r.sock?db=4") == "unix:///tmp/r.sock?db=4"
    assert where("unix:///tmp/r.sock") == "unix:///tmp/r.sock"
