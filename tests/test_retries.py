"""Members a consumer fails on (no Spark): deliveries counted per consumer run, a
hand-back retried after its backoff or buried after its last attempt, in the commit
itself; what a re-dirtying producer, a replay and a success do to a pending retry; the
plain client's fail; dead letters read, re-driven and purged."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from support import cli_command, script_calls, served

from pyspark_ick import Ick, ShardedIck, bounds, connect
from pyspark_ick.dead_letters import Cursor, DeadLetters
from pyspark_ick.errors import ReplicationError
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.retries import MAX_ERROR_BYTES, AttemptRecord, RetryPolicy
from pyspark_ick.testing import wait_until
from pyspark_ick.values import text

TTL = 30_000
FAST = RetryPolicy(max_attempts=3, backoff_ms=200, backoff_max_ms=400)


def redis_ms(client: Any) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def consumer(client: Any, name: str = "q", policy: RetryPolicy = FAST) -> Any:
    """A ReservationLog of Ick ``name`` with its lease held: (log, fence)."""
    log = ReservationLog(client, name)
    log.policy = policy
    return log, log.lease.acquire("me", TTL)


def batch(log: Any, fence: Any, after: int, token: str = "run-1") -> tuple[int, dict[str, Any]]:
    """Reserve everything past ``after`` and read it as a reader with ``token`` would:
    (end, {member: (reservation, deliveries, attempt)})."""
    end = log.reserve(None, after, fence).head
    rows = {}
    for m in log.read(after, end, token):
        attempts = m.attempts or [0] * (len(m.items) // 2)
        for member, tried in zip(m.items[0::2], attempts, strict=True):
            rows[text(member)] = (m.number, m.deliveries, tried + 1)
    return end, rows


def test_deliveries_count_consumer_runs_not_reads(any_client):
    client = any_client
    Ick(client, "q").add({"a": 1.0, "b": 2.0})
    log, fence = consumer(client)
    end, rows = batch(log, fence, 0)
    assert {m: r[1] for m, r in rows.items()} == {"a": 1, "b": 1}
    assert [m.deliveries for m in log.read(0, end, "run-1")] == [1]  # the same run
    assert [m.deliveries for m in log.read(0, end, "run-2")] == [2]  # a restarted query
    assert [m.deliveries for m in log.read(0, end, "run-2")] == [2]
    assert [m.deliveries for m in log.read(0, end, "")] == [2]  # a look counts nothing
    log.commit(end, fence)
    assert not any(f.startswith(b"dlv:") for f in client.hkeys(log.keys.rlog))


def test_a_failed_member_is_retried_after_its_backoff_and_the_others_are_done(any_client):
    client = any_client
    ick = Ick(client, "q")
    ick.add({"good": 1.0, "bad": 2.0})
    log, fence = consumer(client)
    end, rows = batch(log, fence, 0)
    r, delivery, attempt = rows["bad"]
    assert attempt == 1
    assert log.fail(r, delivery, {"bad": "boom"}) == (1, 0, 0)
    before = redis_ms(client)
    log.commit(end, fence)
    assert log.fates == {"retried": 1, "dead": 0}
    due = client.zscore(log.keys.retry, "bad")
    assert before + FAST.backoff_ms / 2 <= due <= redis_ms(client) + FAST.backoff_ms
    record = AttemptRecord.parse(client.hget(log.keys.attempts, "bad"))
    assert (record.attempts, record.score, record.error) == (1, 2.0, "boom")
    assert ick.stats()["total_size"] == 0  # waiting for its retry: neither queued nor reserved
    assert client.exists(log.keys.failed) == 0
    assert ick.attempts("good", "bad") == [0, 1]
    # not due yet: nothing to reserve; when due, the next batch delivers it as attempt 2
    assert log.reserve(None, end, fence).moved == 0 or client.zscore(log.keys.retry, "bad") is None
    wait_until(lambda: log.reserve(None, end, fence).head > end, what="the retry")
    end2, rows2 = batch(log, fence, end)
    assert rows2 == {"bad": (end2, 1, 2)}
    assert client.zcard(log.keys.retry) == 0  # delivered: no retry pending
    log.commit(end2, fence)  # it succeeds
    assert client.exists(log.keys.attempts, log.keys.retry) == 0  # no record left


def test_the_last_attempt_makes_a_dead_letter_with_its_error(any_client):
    client = any_client
    Ick(client, "q").add({"bad": 7.0})
    log, fence = consumer(client)
    end = 0
    for attempt in range(1, FAST.max_attempts + 1):
        wait_until(lambda end=end: log.reserve(None, end, fence).head > end, what="a delivery")
        end2, rows = batch(log, fence, end)
        assert rows["bad"][2] == attempt
        log.fail(rows["bad"][0], rows["bad"][1], {"bad": f"boom {attempt}"})
        log.commit(end2, fence)
        end = end2
    assert log.fates == {"retried": FAST.max_attempts - 1, "dead": 1}
    assert client.exists(log.keys.attempts, log.keys.retry) == 0
    [letter] = DeadLetters(ShardedIck(client, "q")).read()
    assert (letter.member, letter.attempts, letter.error, letter.record.score) == (
        "bad",
        3,
        "boom 3",
        7.0,
    )


def test_a_hand_back_from_an_earlier_delivery_counts_no_attempt(client):
    Ick(client, "q").add({"m": 1.0})
    log, fence = consumer(client)
    end, rows = batch(log, fence, 0)
    log.fail(rows["m"][0], 1, {"m": "failed before the crash"})
    log.read(0, end, "run-2")  # the restarted query replays the batch: delivery 2
    assert log.fail(rows["m"][0], 1, {"m": "a zombie of run 1"}) == (0, 0, 1)  # late
    log.commit(end, fence)  # the replay succeeded
    assert client.exists(log.keys.retry, log.keys.attempts, log.keys.failed) == 0


def test_a_commit_clears_the_hand_backs_of_what_it_closed_while_a_later_one_is_open(client):
    """The failed hash keeps no entry of a committed reservation while a later one stays
    open (a reader ahead keeps one open nearly always: entries would pile up for good)."""
    ick = Ick(client, "q")
    ick.add({"a": 1.0, "b": 2.0})
    log, fence = consumer(client)
    end, rows = batch(log, fence, 0)
    ick.add({"c": 3.0})
    end2, rows2 = batch(log, fence, end)
    assert end2 > end and set(rows2) == {"c"}
    log.fail(rows["a"][0], rows["a"][1], {"a": "boom"})
    log.fail(rows2["c"][0], rows2["c"][1], {"c": "boom"})
    log.commit(end, fence)
    assert log.fates == {"retried": 1, "dead": 0}
    assert [text(f) for f in client.hkeys(log.keys.failed)] == [f"{end2} c"]
    log.commit(end2, fence)
    assert client.exists(log.keys.failed) == 0


def test_a_hand_back_waits_for_the_replicas_asked_for(client, redis_url):
    """A hand-back that a failover lost would let the batch's commit take its member for
    processed: with redis.waitReplicas it waits, as the reserve and the commit do (this
    server has no replica: it fails, naming the option)."""
    Ick(client, "q").add({"m": 1.0})
    log, fence = consumer(client)
    _, rows = batch(log, fence, 0)
    waiting = ReservationLog(
        connect(redis_url, wait_replicas=1, wait_timeout=0.1, retry_timeout=0.3), "q"
    )
    with pytest.raises(ReplicationError, match=r"redis\.waitReplicas"):
        waiting.fail(rows["m"][0], 1, {"m": "failed"})


def test_hand_backs_name_the_members_of_their_reservation_only(client):
    Ick(client, "q").add({"a": 1.0, "b": 2.0})
    log, fence = consumer(client)
    end, _ = batch(log, fence, 0)
    assert log.fail(end, 1, {"a": "x", "stranger": "y"}) == (1, 1, 0)
    assert log.fail(end + 5, 1, {"a": "x"}) == (0, 1, 0)  # no such reservation
    log.commit(end, fence)
    assert log.fail(end, 1, {"b": "after the commit"}) == (0, 0, 1)
    assert client.hlen(log.keys.attempts) == 1 and client.exists(log.keys.failed) == 0


def test_an_error_is_kept_to_a_bounded_length(client):
    Ick(client, "q").add({"m": 1.0})
    log, fence = consumer(client)
    end, _ = batch(log, fence, 0)
    log.fail(end, 1, {"m": "x" * 100_000})
    log.commit(end, fence)
    assert len(AttemptRecord.parse(client.hget(log.keys.attempts, "m")).error) == MAX_ERROR_BYTES


def test_a_producer_re_dirtying_a_member_waiting_for_its_retry_gets_it_delivered_at_once(
    any_client,
):
    client = any_client
    ick = Ick(client, "q")
    ick.add({"m": 5.0})
    slow = RetryPolicy(max_attempts=5, backoff_ms=3_600_000, backoff_max_ms=3_600_000)
    log, fence = consumer(client, policy=slow)
    end, _ = batch(log, fence, 0)
    log.fail(end, 1, {"m": "downstream said no"})
    log.commit(end, fence)
    assert client.zscore(log.keys.retry, "m") is not None  # an hour away
    ick.add({"m": 9.0})  # the producer dirties it again
    end2, rows2 = batch(log, fence, end)
    assert rows2 == {"m": (end2, 1, 2)}  # at once, and it knows it failed before
    assert client.zscore(log.keys.retry, "m") is None
    log.commit(end2, fence)  # this time it works: the older failure is forgotten
    assert client.exists(log.keys.retry, log.keys.attempts) == 0
    assert ick.stats()["total_size"] == 0


def test_a_member_re_dirtied_in_flight_and_failed_is_retried_once(client):
    ick = Ick(client, "q")
    ick.add({"m": 5.0})
    log, fence = consumer(client)
    end1 = log.reserve(None, 0, fence).head
    ick.add({"m": 4.0})  # dirtied again while reservation 1 is in flight
    end2, rows = batch(log, fence, 0)  # one batch of both reservations: one row
    assert rows["m"][0] == end2
    log.fail(end2, 1, {"m": "boom"})
    log.commit(end2, fence)
    assert end2 > end1 and client.zcard(log.keys.retry) == 1
    assert ick.stats()["total_size"] == 0


def test_the_plain_client_fails_reserved_members_into_retries_and_dead_letters(any_client):
    ick = ShardedIck(any_client, "plain", 2)
    ick.add({"a": 1.0, "b": 2.0, "c": 3.0})
    policy = RetryPolicy(max_attempts=2, backoff_ms=100, backoff_max_ms=100)
    reserved = {m: s for i in range(2) for m, s in ick.shard(i).reserve(10)}
    assert reserved == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert ick.fail({"a": "no", "b": ValueError("bad b"), "zz": "not reserved"}, policy) == (2, 0)
    for i in range(2):
        ick.shard(i).commit(*[m for m, _ in ick.shard(i).reserve(10) if m == "c"])
    assert ick.stats()["total_size"] == 0  # a and b wait for their retries

    def redelivered() -> dict[str, float]:
        return {m: s for i in range(2) for m, s in ick.shard(i).reserve(10)}

    assert wait_until(lambda: redelivered() == {"a": 1.0, "b": 2.0}, what="the retries")
    assert [ick.shard(ick.shard_of(m)).attempts(m) for m in "ab"] == [[1], [1]]
    assert ick.fail({"a": "no again"}, policy) == (0, 1)  # the last attempt
    ick.shard(ick.shard_of("b")).commit("b")  # b made it: its record goes
    assert ick.shard(ick.shard_of("b")).attempts("b") == [0]
    letters = list(DeadLetters(ick).read())
    assert [(d.member, d.attempts, d.error) for d in letters] == [("a", 2, "no again")]


def test_dead_letters_are_counted_re_driven_and_purged(any_client):
    client = any_client
    ick = ShardedIck(client, "d", 2)
    members = [f"m{i}" for i in range(30)]
    ick.add({m: float(i) for i, m in enumerate(members)})
    once = RetryPolicy(max_attempts=1)
    for i in range(2):
        reserved = [m for m, _ in ick.shard(i).reserve(100)]
        ick.fail({m: f"error of {m}" for m in reserved}, once)
    letters = DeadLetters(ick)
    assert sum(letters.count()) == 30 and sum(letters.retrying()) == 0
    assert sorted(d.member for d in letters.read()) == sorted(members)
    assert len(list(letters.read(limit=7))) == 7
    assert letters.redrive(["m3", "m4", "nobody"]) == 2
    assert sum(letters.count()) == 28
    assert {m: s for i in range(2) for m, s in ick.shard(i).reserve(10)} == {"m3": 3.0, "m4": 4.0}
    assert ick.shard(ick.shard_of("m3")).attempts("m3") == [0]  # counted from zero
    assert letters.purge(["m5"]) == 1
    assert letters.redrive() == 27
    assert sum(letters.count()) == 0 and not client.keys("*deadinfo")


def bury(ick: ShardedIck, errors: dict[str, str]) -> None:
    """Make dead letters of ``errors``' members (added, reserved, failed once)."""
    ick.add({m: float(i) for i, m in enumerate(errors)})
    for i in range(ick.shards):
        while reserved := [m for m, _ in ick.shard(i).reserve(1000)]:
            ick.fail({m: errors[m] for m in reserved}, RetryPolicy(max_attempts=1))


def test_a_scan_finds_the_dead_letters_of_one_error_page_by_page(any_client):
    """The console's filter: a bounded look per request, a cursor to go on from, every
    match found once over the whole walk, whatever the page and budget."""
    ick = ShardedIck(any_client, "scan", 3)
    errors = {
        f"m{i:04}": ("Timeout talking to the sink" if i % 7 == 0 else "bad doc")
        for i in range(2500)
    }
    bury(ick, errors)
    letters = DeadLetters(ick)
    wanted = sorted(m for m, e in errors.items() if "timeout" in e.lower())
    for limit, budget in ((10, 300), (1000, 1000), (5, 5000)):
        found, looked, cursor, pages = [], 0, None, 0
        while True:
            page = letters.scan(cursor, error="TIMEOUT", limit=limit, budget=budget)
            assert page.looked <= budget and len(page.letters) <= limit
            found += [d.member for d in page.letters]
            looked, pages = looked + page.looked, pages + 1
            if page.next is None:
                break
            cursor = page.next
        assert sorted(found) == wanted and looked == 2500, (limit, budget)
        assert pages >= 2500 // budget
    page = letters.scan(Cursor(), member="m000", limit=50)
    assert sorted(d.member for d in page.letters) == [f"m000{i}" for i in range(10)]
    assert all(d.error == errors[d.member] for d in page.letters)


def test_all_that_match_a_filter_are_re_driven_in_bounded_batches(any_client):
    ick = ShardedIck(any_client, "all", 2)
    errors = {f"m{i:04}": ("sink down" if i % 3 == 0 else "bad doc") for i in range(2500)}
    bury(ick, errors)
    letters = DeadLetters(ick)
    part = letters.apply_matching("redrive", error="SINK", most=1000)
    assert not part.finished and part.looked == 1000 and 0 < part.done < 1000
    rest = letters.apply_matching("redrive", error="sink")
    wanted = sorted(m for m, e in errors.items() if e == "sink down")
    assert rest.finished and part.done + rest.done == len(wanted)
    left = sorted(d.member for d in letters.read())
    assert left == sorted(m for m, e in errors.items() if e == "bad doc")
    queued = sorted(m for i in range(2) for m, _ in ick.shard(i).reserve(2000))
    assert queued == wanted
    early = sum(1 for m in left if m.startswith("m00"))
    assert letters.apply_matching("purge", member="m00").done == early
    every = letters.apply_matching("purge")
    assert (every.done, every.looked) == (len(left) - early, len(left) - early)
    assert sum(letters.count()) == 0


@pytest.mark.parametrize("field", ["max_attempts", "backoff_ms", "backoff_max_ms"])
def test_a_retry_policy_refuses_what_it_cannot_mean(field):
    with pytest.raises(Exception, match=f"RetryPolicy.{field} must be an integer >= 1"):
        RetryPolicy(**{field: 0})
    with pytest.raises(Exception, match=f"RetryPolicy.{field}"):
        RetryPolicy(**{field: True})


def test_backoff_grows_with_attempts_and_is_capped(client):
    policy = RetryPolicy(max_attempts=10, backoff_ms=1000, backoff_max_ms=8000)
    Ick(client, "q").add({"m": 1.0})
    log, fence = consumer(client, policy=policy)
    end, waits = 0, []
    for _ in range(6):
        if end:  # due now: move the retry's due time to the past
            client.zadd(log.keys.retry, {"m": 0})
        end2, rows = batch(log, fence, end)
        log.fail(end2, rows["m"][1], {"m": "x"})
        now = redis_ms(client)
        log.commit(end2, fence)
        waits.append(client.zscore(log.keys.retry, "m") - now)
        end = end2
    nominal = [1000, 2000, 4000, 8000, 8000, 8000]
    for wait, full in zip(waits, nominal, strict=True):
        assert full / 2 - 50 <= wait <= full + 50, (waits, nominal)


@pytest.mark.parametrize("how", ["commit", "plain client"])
def test_members_failed_at_once_are_retried_spread_over_their_jitter(client, how):
    """Half of each backoff is random per member, so many members failed at once (a
    downstream outage) come back spread over that half, not as one thundering herd."""
    n, backoff = 400, 60_000
    policy = RetryPolicy(max_attempts=5, backoff_ms=backoff, backoff_max_ms=backoff)
    ick = Ick(client, "q")
    ick.add({f"m{i}": float(i) for i in range(n)})
    before = redis_ms(client)
    if how == "commit":
        log, fence = consumer(client, policy=policy)
        end, rows = batch(log, fence, 0)
        for r in {r for r, _, _ in rows.values()}:
            log.fail(r, 1, {m: "down" for m, (r2, _, _) in rows.items() if r2 == r})
        log.commit(end, fence)
    else:
        reserved = [m for m, _ in ick.reserve(n)]
        assert ick.fail({m: "down" for m in reserved}, policy) == (n, 0)
    after = redis_ms(client)
    waits = sorted(due - before for _, due in client.zrange(ick.keys.retry, 0, -1, withscores=True))
    assert len(waits) == n
    assert backoff / 2 <= waits[0] and waits[-1] <= backoff + (after - before), waits[:3]
    jitter = [(w - backoff / 2) / (backoff / 2) for w in waits]  # each in [0, 1]
    quarters = [sum(q / 4 <= j < (q + 1) / 4 for j in jitter) for q in range(4)]
    print(f"due times over the jitter half, by quarter: {quarters}")
    assert min(quarters) >= n // 10, quarters  # 25% each expected; a herd fills one
    assert len(set(waits)) >= n * 3 // 4  # hardly two members due in the same ms


def test_no_bound_is_broken_by_many_failures(client):
    n = 3000
    ick = Ick(client, "q")
    ick.add({f"m{i}": float(i) for i in range(n)})
    log, fence = consumer(client)
    end, rows = batch(log, fence, 0)
    by_reservation: dict[int, dict[str, str]] = {}
    for member, (r, _, _) in rows.items():
        by_reservation.setdefault(r, {})[member] = "e"
    for r, failures in by_reservation.items():
        assert log.fail(r, 1, failures)[0] == len(failures)
    calls = script_calls(client)
    log.commit(end, fence)
    assert log.fates["retried"] == n
    # in pieces of at most ITEMS_PER_CALL members: no one call held Redis for all n
    assert script_calls(client) - calls >= n // bounds.ITEMS_PER_CALL
    assert client.zcard(log.keys.retry) == n and client.exists(log.keys.failed) == 0


def test_operators_see_retries_and_dead_letters_in_the_cli_and_the_exporter(client, redis_url):
    ick = ShardedIck(client, "ops", 2)
    ick.add({f"m{i}": float(i) for i in range(6)})
    reserved = [m for i in range(2) for m, _ in ick.shard(i).reserve(10)]
    ick.fail({m: f"bad {m}" for m in reserved[:4]}, RetryPolicy(max_attempts=1))
    ick.fail({m: f"later {m}" for m in reserved[4:]}, RetryPolicy(backoff_ms=3_600_000))

    def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cli_command("dead", *args, url=redis_url),
            capture_output=True,
            text=True,
            input=stdin,
            timeout=60,
        )

    count = json.loads(cli("count", "ops", "--json").stdout)
    assert (count["dead"], count["retrying"]) == (4, 2)
    listed = [json.loads(line) for line in cli("list", "ops", "--json").stdout.splitlines()]
    assert sorted(r["member"] for r in listed) == sorted(reserved[:4])
    assert all(r["error"] == f"bad {r['member']}" and r["attempts"] == 1 for r in listed)
    metrics = served(client)
    assert sum(v for k, v in metrics.items() if k.startswith("pyspark_ick_dead_letters{")) == 4
    assert sum(v for k, v in metrics.items() if k.startswith("pyspark_ick_retrying{")) == 2
    assert "1 dead letter re-driven" in cli("redrive", "ops", reserved[0]).stdout
    declined = cli("purge", "ops", stdin="n\n")
    assert declined.returncode == 3 and "not purged" in declined.stderr
    assert "3 dead letters purged" in cli("purge", "ops", "--yes").stdout
    assert json.loads(cli("count", "ops", "--json").stdout)["dead"] == 0


def test_retry_policy_is_importable_and_retry_later_checks_the_options_it_ignores(
    redis_url, client
):
    """The stream reader's maxAttempts decides; retry_later, given the same options,
    refuses a value the reader would refuse ("0"), before it touches Redis."""
    import pyspark_ick
    from pyspark_ick.spark import retry_later

    assert pyspark_ick.RetryPolicy is RetryPolicy and "RetryPolicy" in pyspark_ick.__all__
    for option in ("maxAttempts", "retryBackoff", "retryBackoffMax"):
        with pytest.raises(pyspark_ick.IckConfigError, match=f"option '{option}': expected"):
            retry_later([], {"redis.url": redis_url, "ick": "q", option: "0"})
    assert client.keys("*") == []
    assert retry_later([], {"redis.url": redis_url, "ick": "q", "maxAttempts": "3"}) == [0, 0, 0]
