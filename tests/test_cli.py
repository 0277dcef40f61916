"""The pyspark-ick command line, run as a subprocess against the test Redis servers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from typing import Any

import pytest
from support import cli_command

from pyspark_ick import Ick, ShardedIck, shard_of
from pyspark_ick.testing import free_port, wait_until


def cli(
    *args: str,
    url: str | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    script: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``pyspark-ick ARGS`` (the console script when ``script``, else ``python -m``)."""
    command = (
        [shutil.which("pyspark-ick") or "pyspark-ick", *(["--url", url] if url else [])]
        if script
        else cli_command(url=url)
    )
    environ = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    environ.update({"COLUMNS": "200", **(env or {})})
    return subprocess.run(
        command + list(args), capture_output=True, text=True, input=stdin, env=environ, timeout=60
    )


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def failed(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The one-line message of a failed run (exit ``code``, no traceback)."""
    assert done.returncode == code, (done.stdout, done.stderr)
    message = done.stderr.strip()
    assert "Traceback" not in message
    if code != 2:  # argparse prints its usage before the error line
        assert "\n" not in message, message
    return message


def test_add_stats_and_lower_score(redis_url, client):
    assert "2 new, 0 lowered" in cli("add", "q", "a", "b", "--score", "5", url=redis_url).stdout
    # the console script, with the URL from REDIS_URL
    done = cli("add", "q", "a", "c", "--score", "3", env={"REDIS_URL": redis_url}, script=True)
    assert "1 new, 1 lowered, 0 unchanged" in done.stdout, done.stderr
    assert Ick(client, "q").reserve(1) == [("a", 3.0)]

    report = as_json(cli("stats", "q", "--json", url=redis_url))
    (row,) = report["rows"]
    assert (row["key"], row["queued"], row["reserved"]) == ("q", 2, 1)
    assert row["oldest_score"] == 3.0 and row["age_s"] is None  # 3.0 is no Unix time
    assert report["totals"]["queued"] == 2 and report["totals"]["reserved"] == 1

    table = cli("stats", "q", url=redis_url).stdout
    assert "Ick q (1 shard)" in table and "total" in table and " oldest " in table


def test_sharded_stats_on_cluster(cluster_url, cluster_client):
    members = [f"doc{i}" for i in range(40)]
    assert "40 new" in cli("add", "docs", *members, "--shards", "4", url=cluster_url).stdout

    # without --shards the recorded count is used; scores default to Redis server time
    report = as_json(cli("stats", "docs", "--json", "--cluster", url=cluster_url))
    assert report["shards"] == 4
    expected = [sum(shard_of(m, 4) == i for m in members) for i in range(4)]
    assert [r["queued"] for r in report["rows"]] == expected
    assert [r["key"] for r in report["rows"]] == ["docs:0", "docs:1", "docs:2", "docs:3"]
    assert report["totals"]["queued"] == 40
    assert 0 <= report["totals"]["age_s"] < 60
    assert ShardedIck(cluster_client, "docs", 4).stats()["pset_size"] == 40

    message = failed(cli("stats", "docs", "--shards", "3", url=cluster_url), 1)
    assert "4 shards recorded" in message and "--shards 3" in message


def test_stats_shows_reservations_and_lease(redis_url, client):
    from pyspark_ick.reservations import ReservationLog

    Ick(client, "feed").add({"a": 1, "b": 2, "c": 3})
    log = ReservationLog(client, "feed")
    token = log.lease.acquire("indexer-7", 60_000)
    log.reserve(2, 0, token)

    (row,) = as_json(cli("stats", "feed", "--json", url=redis_url))["rows"]
    assert (row["queued"], row["reserved"], row["open_reservations"]) == (1, 2, 1)
    assert row["lease_owner"] == "indexer-7" and 0 < row["lease_expires_in_ms"] <= 60_000
    narrow = cli("stats", "feed", url=redis_url, env={"COLUMNS": "80"}).stdout
    assert_fits(narrow, "shard", "queued", "reserved", "retrying", "dead", "open", "oldest")
    assert "leases: shard 0: indexer-7 (expires in " in narrow


def assert_fits(table: str, *headings: str, width: int = 80) -> None:
    """``table`` fits ``width`` columns, every heading whole (rich cuts one to "queu…")."""
    assert max(map(len, table.splitlines())) <= width and "\u2026" not in table, table
    for heading in headings:
        assert f" {heading} " in table, (heading, table)


def test_peek_is_read_only(redis_url, client):
    sharded = ShardedIck(client, "p", 3)
    sharded.add({f"m{i}": float(i) for i in range(30)})
    held = sharded.shard(1).reserve(2)
    before = sharded.stats()

    found = as_json(cli("peek", "p", "-n", "4", "--json", url=redis_url))
    reserved = {m for m, _ in held}
    queued = sorted((float(i), f"m{i}") for i in range(30) if f"m{i}" not in reserved)[:4]
    assert found["queued"] == [[m, s, shard_of(m, 3)] for s, m in queued]
    assert found["reserved"] == [[m, s, 1] for m, s in held]
    assert sharded.stats() == before
    assert sharded.shard(1).reserve(2) == held  # the same batch: nothing was reserved

    table = cli("peek", "p", "-n", "2", url=redis_url).stdout
    assert "queued: lowest scores" in table and held[0][0] in table
    ShardedIck(client, "t", 1).add({"at": 1_700_000_000.0})  # a Unix time shows as one
    table = cli("peek", "t", url=redis_url).stdout
    assert "2023-11-14 22:13:20Z" in table
    assert "reserved: none" in table and "reserved: lowest" not in table  # empty: said once
    assert cli("dead", "list", "t", url=redis_url).stdout == "Ick 't': no dead letters\n"


def test_del_asks_first(redis_url, client):
    ShardedIck(client, "gone", 2).add({"a": 1, "b": 2})
    assert "not deleted" in failed(cli("del", "gone", url=redis_url, stdin="n\n"), 3)
    assert ShardedIck(client, "gone", 2).stats()["total_size"] == 2

    done = cli("del", "gone", url=redis_url, stdin="y\n")
    kinds = "2 queued, 0 reserved, 0 retrying, 0 dead letters"
    assert done.returncode == 0 and f"deleted Ick 'gone': {kinds} (" in done.stdout
    assert f"Delete Ick 'gone' (2 shards: {kinds})?" in done.stderr
    assert client.dbsize() == 0  # every shard and the recorded shard count

    assert "does not exist" in failed(cli("del", "gone", "--yes", url=redis_url), 3)
    Ick(client, "other").add({"x": 1})
    assert cli("del", "other", "--yes", url=redis_url).returncode == 0
    assert client.dbsize() == 0


def test_del_counts_what_it_deleted_by_kind(redis_url, client):
    from console_support import bury

    from pyspark_ick.retries import RetryPolicy

    ick = ShardedIck(client, "gone", 1)
    bury(ick, {"d1": "bad doc", "d2": "bad doc"})
    ick.add({"r1": 1.0})
    assert ick.shard(0).reserve(1) == [("r1", 1.0)]
    ick.fail({"r1": "later"}, RetryPolicy(max_attempts=5))
    ick.add({"q1": 1.0, "q2": 2.0})
    ick.shard(0).reserve(1)
    done = cli("del", "gone", "--yes", url=redis_url)
    assert "deleted Ick 'gone': 1 queued, 1 reserved, 1 retrying, 2 dead letters (" in done.stdout
    assert client.dbsize() == 0


def test_watch_refreshes_until_interrupted(redis_url, client):
    Ick(client, "w").add({"a": 1})
    environ = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    process = subprocess.Popen(
        cli_command("stats", "w", "--watch", "0.1", "--json", url=redis_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    try:
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())
        assert first["totals"]["queued"] == 1
        Ick(client, "w").add({"b": 2})
        wait_until(
            lambda: json.loads(process.stdout.readline())["totals"]["queued"] == 2,
            timeout=20,
            what="a refreshed report",
        )
        process.send_signal(signal.SIGINT)
        assert process.wait(20) == 0
        assert "Traceback" not in process.stderr.read()
    finally:
        process.kill()
        process.wait()


def test_dehydrator_commands(redis_url):
    def dh(*args: str) -> subprocess.CompletedProcess[str]:
        return cli("dehydrator", *args, url=redis_url)

    assert "does not exist" in failed(dh("ttn", "parked"), 3)  # and writes nothing
    assert dh("push", "parked", "id1", "hello world", "--ttl", "1h").returncode == 0
    assert dh("look", "parked", "id1").stdout == "hello world\n"
    assert 3_500_000 < int(dh("ttn", "parked").stdout) <= 3_600_000
    assert "id1" in failed(dh("push", "parked", "id1", "again", "--ttl", "1s"), 1)
    assert dh("pull", "parked", "id1").stdout == "hello world\n"
    assert "no id 'id1'" in failed(dh("pull", "parked", "id1"), 3)
    assert "no id 'id1'" in failed(dh("look", "parked", "id1"), 3)
    assert dh("ttn", "parked").stdout.strip() == "-1"  # it exists, empty
    assert dh("push", "parked", "id2", "now", "--delay", "0ms").returncode == 0
    narrow = cli("dehydrator", "stats", "parked", url=redis_url, env={"COLUMNS": "80"}).stdout
    assert_fits(narrow, "parked", "due", "next due in", "open claims", "claimed")
    assert dh("ttn", "parked").stdout.strip() == "0"
    assert "1 shard recorded" in failed(dh("ttn", "parked", "--shards", "2"), 1)
    assert "duration" in failed(dh("push", "parked", "id3", "x", "--ttl", "soon"), 2)


def test_without_rich_json_still_works(redis_url, client):
    Ick(client, "q").add({"a": 1})
    run = (
        "import sys; sys.modules['rich'] = None; from pyspark_ick.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    command = [sys.executable, "-c", run, "--url", redis_url, "stats", "q"]
    table = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert "python3 -m pip install rich, or '.[cli]'" in failed(table, 1)
    assert (
        as_json(subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=60))[
            "totals"
        ]["queued"]
        == 1
    )


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (["stats", "nope"], 3, "Ick 'nope' does not exist"),
        (["stats", "bad{name"], 2, "braces"),
        (["add", "q", "a", "--score", "nan"], 2, "expected a number, inf or -inf"),
        (["peek", "q", "-n", "0"], 2, "positive integer"),
        (["add", "h", "a"], 1, "h is a hash, not an Ick version flag"),
    ],
)
def test_errors_are_one_line(redis_url, client, args, code, needle):
    client.hset("h", "field", "value")
    assert needle in failed(cli(*args, url=redis_url), code)


def test_add_takes_infinite_scores_as_the_gem_does(redis_url, client):
    cli("add", "q", "late", "--score", "5", url=redis_url)
    assert cli("add", "q", "first", "--score=-inf", url=redis_url).returncode == 0
    assert Ick(client, "q").reserve(1) == [("first", float("-inf"))]


def test_connection_errors_name_no_password():
    url = f"redis://ops:sekret-pw@127.0.0.1:{free_port()}/0"
    message = failed(cli("stats", "q", url=url), 1)
    assert message.startswith("pyspark-ick: error: cannot reach Redis at redis://127.0.0.1:")
    assert "sekret" not in message
    bad = failed(cli("stats", "q", url="http://ops:sekret-pw@example.com/0"), 1)
    assert "redis://, rediss://, unix://, redis+sentinel://" in bad and "sekret" not in bad


def test_a_url_parameter_redis_py_does_not_take_is_one_line_naming_it(capsys):
    """A TLS setting on a redis:// URL, or a misspelt parameter, is one line naming the
    parameter, not redis-py's TypeError traceback; the password stays hidden."""
    from pyspark_ick.cli import main

    port = free_port()
    for query, hint in (
        ("ssl_certfile=/x", "TLS settings need a rediss:// URL"),
        ("sockettimeout=3", "check its spelling"),
    ):
        assert main(["--url", f"redis://:pw-9@127.0.0.1:{port}/0?{query}", "stats", "q"]) == 1
        said = capsys.readouterr().err
        name = query.split("=")[0]
        assert said.count("\n") == 1 and f"query parameter {name!r}" in said and hint in said
        assert "pw-9" not in said


def test_retry_timeout_is_an_option_and_the_advice_names_it(capsys, monkeypatch):
    from pyspark_ick.cli import main

    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("PYSPARK_ICK_RETRY_TIMEOUT", "0.3")
    for argv, waited in ((["--retry-timeout", "0.2"], "0.2 s"), ([], "0.3 s")):
        assert main(["--url", url, "stats", "q", *argv]) == 1
        said = capsys.readouterr().err
        assert f"within --retry-timeout ({waited})" in said and "Raise --retry-timeout" in said
        assert "redis.retryTimeout" not in said
    monkeypatch.setenv("PYSPARK_ICK_RETRY_TIMEOUT", "soon")
    assert main(["--url", url, "stats", "q"]) == 1
    assert "$PYSPARK_ICK_RETRY_TIMEOUT: expected a number of seconds" in capsys.readouterr().err


def test_counts_read_in_english():
    from pyspark_ick.words import ordinal, plural

    assert [plural(n, "dead letter") for n in (0, 1, 2)] == [
        "0 dead letters",
        "1 dead letter",
        "2 dead letters",
    ]
    assert (
        plural(1, "retry", "retries") == "1 retry"
        and plural(3, "retry", "retries")[2:] == "retries"
    )
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111, 1001)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "101st",
        "111th",
        "1,001st",
    ]
