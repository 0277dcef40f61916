"""The operator's day on the command line (issue 35): reshard, release, del under a live
lease, dehydrator stats and peek, --cluster true/false; subprocesses of pyspark-ick against
the test Redis, as tests/test_cli.py."""

from __future__ import annotations

from test_cli import as_json, cli, failed

from pyspark_ick import Dehydrator, Ick, ShardedIck, shard_of
from pyspark_ick.cli.parser import build_parser
from pyspark_ick.keys import IckKeys, reshard_key, shard_count_key
from pyspark_ick.reservations import ReservationLog, describe


def test_del_is_refused_while_a_consumer_holds_a_lease(redis_url, client):
    ShardedIck(client, "live", 2).add({f"m{i}": float(i) for i in range(10)})
    log = ReservationLog(client, "live:1")
    fence = log.lease.acquire("query-9c1e", 60_000)
    log.reserve(3, 0, fence)
    message = failed(cli("del", "live", "--yes", url=redis_url), 1)
    assert "not deleted" in message and "shard 1: consumer 'query-9c1e' holds the lease" in message
    assert "--force" in message and "pyspark-ick release live" in message
    assert ShardedIck(client, "live", 2).stats()["total_size"] == 10

    done = cli("del", "live", "--yes", "--force", url=redis_url)
    assert (
        done.returncode == 0 and "7 queued, 3 reserved, 0 retrying, 0 dead letters" in done.stdout
    ), done.stderr
    assert client.keys("*") == [IckKeys("live:1").lease.encode()]  # the lease stays
    assert describe(client, "live:1")["lease_owner"] == "query-9c1e"
    log.lease.renew(fence)  # the query still holds its lease: it goes on


def test_reshard_asks_then_moves_and_release_hands_back(redis_url, client):
    members = {f"m{i}": float(i) for i in range(60)}
    ShardedIck(client, "q", 2).add(members)
    log = ReservationLog(client, "q:0")
    fence = log.lease.acquire("query-dead", 60_000)
    log.reserve(None, 0, fence)
    message = failed(cli("reshard", "q", "--to", "5", "--yes", url=redis_url), 1)
    assert "consumer 'query-dead' holds the lease" in message and "pyspark-ick release q" in message

    log.lease.release(fence)  # the query stopped; its reservation stays open
    declined = cli("reshard", "q", "--to", "5", url=redis_url, stdin="n\n")
    assert "not resharded" in failed(declined, 3)
    assert "Reshard Ick 'q' from 2 to 5 shards, 60 members? Stop its queries" in declined.stderr
    assert int(client.get(shard_count_key("q"))) == 2 and not client.exists(reshard_key("q"))

    done = cli("reshard", "q", "--to", "5", "--yes", url=redis_url)
    assert done.returncode == 0, done.stderr
    assert "2 -> 5 shards" in done.stdout and "new checkpointLocation" in done.stdout
    report = as_json(cli("stats", "q", "--json", url=redis_url))
    assert [r["queued"] for r in report["rows"]] == [
        sum(shard_of(m, 5) == i for m in members) for i in range(5)
    ]
    assert "5 shards already" in cli("reshard", "q", "--to", "5", "--yes", url=redis_url).stdout

    Ick(client, "r").add({"a": 1.0, "b": 2.0})
    log = ReservationLog(client, "r")
    log.reserve(None, 0, log.lease.acquire("query-gone", 100))  # its lease expires at once
    done = cli("release", "r", url=redis_url)
    assert done.returncode == 0, done.stderr
    assert "2 reserved members back in the queue" in done.stdout
    assert Ick(client, "r").stats()["pset_size"] == 2


def test_dehydrator_stats_peek_and_release(redis_url, client):
    d = Dehydrator(client, "parked", 2)
    d.push("due", "now", 0)
    d.push("later", "in an hour", 3_600_000)
    report = as_json(cli("dehydrator", "stats", "parked", "--json", url=redis_url))
    assert report["totals"] | {"next_due_ms": 0, "overdue_ms": 0} == {
        "parked": 2,
        "due": 1,
        "next_due_ms": 0,
        "overdue_ms": 0,  # how long "due" has waited: a few ms
        "open_claims": 0,
        "claimed": 0,
        "done": 0,
    }
    assert [r["parked"] for r in report["rows"]] == [
        sum(shard_of(i, 2) == s for i in ("due", "later")) for s in range(2)
    ]
    table = cli("dehydrator", "stats", "parked", url=redis_url).stdout
    assert "dehydrator parked (2 shards)" in table and "next due in" in table

    found = as_json(cli("dehydrator", "peek", "parked", "-n", "5", "--json", url=redis_url))
    assert [(row[0], row[2]) for row in found] == [("due", "now"), ("later", "in an hour")]
    assert found[1][1] - found[0][1] >= 3_599_000  # due times in ms, earliest first
    assert "in an hour" in cli("dehydrator", "peek", "parked", url=redis_url).stdout
    assert d.ttn() == 0 and d.look("due") == "now"  # peek changed nothing

    assert "'parked' is a dehydrator" in failed(cli("stats", "parked", url=redis_url), 3)
    assert "does not exist" in failed(cli("dehydrator", "stats", "empty", url=redis_url), 3)
    done = cli("dehydrator", "release", "parked", url=redis_url)
    assert done.returncode == 0 and "starts at once" in done.stdout, done.stderr


def test_cluster_takes_true_and_false_like_the_option(redis_url, client):
    parse = build_parser().parse_args
    assert parse(["--cluster", "false", "stats", "q"]).cluster == "false"
    assert parse(["stats", "q", "--cluster", "TRUE"]).cluster == "true"
    assert parse(["stats", "q", "--cluster"]).cluster == "true"
    assert parse(["stats", "q", "--cluster", "no"]).cluster == "no"  # the old spelling
    Ick(client, "q").add({"a": 1.0})
    assert as_json(cli("--cluster", "false", "stats", "q", "--json", url=redis_url))["shards"] == 1
    assert "Cluster mode is not enabled" in failed(
        cli("stats", "q", "--cluster", "true", url=redis_url), 1
    )
