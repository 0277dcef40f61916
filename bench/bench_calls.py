"""Per-call cost of the client and per-element Redis CPU of the dehydrator's scripts, each
against a raw baseline of the same run (issue 14's targets).

calls:  the median wall time of one client call (Ick add, reserve and commit of one member;
        Dehydrator push, gidpush, look, ttn, update, pull) against a raw EVALSHA round trip
        of a one-key script, in alternating rounds (bench/pairs.py: each side's median of
        its calls per round, the median ratio over the rounds with its spread); target
        <= 1.3x the raw round trip.
server: Redis time per call (INFO commandstats) of dh_push with one element, against a raw
        ZADD + HSET pair (target <= 10 us); per element in bulk, dh_push against pipelined
        ZADD + HSET (target <= 1.2x) and poll (dh_take; target <= 1.0 us); ickadd in bulk
        (the writer's script) against pipelined ZADD LT. Bulk rows also give INFO cpu.

    python bench/bench_calls.py [--quick] [--rounds 5] [--own-core]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import pairs
from bench_core import server_cpu
from bench_dehydrator import raw_poll, raw_push, redis_ms
from common import Report
from pairs import run_rounds

from pyspark_ick import Dehydrator, Ick, connect, scripts
from pyspark_ick.bounds import ICK_CHUNK as CHUNK
from pyspark_ick.packing import pack_chunks
from pyspark_ick.testing import redis_server

HOUR = 3_600_000


class Spent(NamedTuple):
    usec: float  # Redis time in the commands (INFO commandstats)
    cpu: float  # the server's CPU time, parsing the commands included (INFO cpu), in us


def server_us(client: Any, commands: tuple[str, ...], run: Callable[[], Any]) -> Spent:
    """What Redis spent on ``commands`` while ``run()`` ran."""
    client.config_resetstat()
    before = server_cpu(client)
    run()
    cpu = (server_cpu(client) - before) * 1e6
    stats = client.info("commandstats")
    return Spent(float(sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in commands)), cpu)


def bulk_rows(
    report: Report,
    raw_name: str,
    name: str,
    raw: Spent,
    ours: Spent,
    items: int,
    maximum: float | None = None,
) -> None:
    """Per item, ours against raw: Redis time, then INFO cpu."""
    report.add(f"{raw_name}, per item", raw.usec / items, "us Redis")
    report.compare(
        f"{name}, per item", ours.usec / items, "us Redis", f"{raw_name}, per item", maximum=maximum
    )
    report.add(f"{raw_name}, INFO cpu", raw.cpu / items, "us CPU")
    report.compare(
        f"{name}, INFO cpu", ours.cpu / items, "us CPU", f"{raw_name}, INFO cpu", maximum=maximum
    )


def bench_calls(
    report: Report, client: Any, n: int, rounds: int = 5, cpus: dict[str, Any] | None = None
) -> None:
    """``n`` calls of each kind in ``rounds`` alternating rounds against the raw round trip."""
    raw_sha = client.script_load("return redis.call('EXISTS', KEYS[1])")
    ick, d = Ick(client, "calls"), Dehydrator(client, "calls")
    ick.add({"warm": 1.0})
    d.push("warm", "x", HOUR)
    d.push("kept", "element", HOUR)
    per_round = max(1, n // rounds)
    counter = iter(range(10**9))

    def pushed() -> str:
        key = f"q{next(counter)}"
        d.push(key, "element", HOUR)
        return key

    def held() -> Any:
        ick.add({f"h{next(counter)}": 0.0})
        return ick.reserve(1)[0][0]

    calls: dict[str, tuple[Callable[[], Any] | None, Callable[[Any], Any]]] = {
        "raw": (None, lambda _: client.evalsha(raw_sha, 1, "k")),
        "Ick.add, one member": (None, lambda _: ick.add({f"m{next(counter)}": 1.0})),
        "Dehydrator.push": (None, lambda _: d.push(f"p{next(counter)}", "element", HOUR)),
        "Dehydrator.gidpush": (None, lambda _: d.gidpush("element", HOUR)),
        "Dehydrator.look": (None, lambda _: d.look("kept")),
        "Dehydrator.ttn": (None, lambda _: d.ttn()),
        "Dehydrator.update": (None, lambda _: d.update("kept", f"element {next(counter)}")),
        "Dehydrator.pull": (pushed, lambda key: d.pull(key)),
        "Ick.reserve(1)": (lambda: ick.add({f"r{next(counter)}": 0.0}), lambda _: ick.reserve(1)),
        "Ick.commit, one member": (held, lambda member: ick.commit(member)),
    }

    def side(setup: Callable[[], Any] | None, call: Callable[[Any], Any]) -> Callable[[], float]:
        def measure() -> float:
            times = []
            for _ in range(per_round):
                arg = setup() if setup else None
                start = time.perf_counter()
                call(arg)
                times.append(time.perf_counter() - start)
            return statistics.median(times) * 1e6

        return measure

    done = run_rounds(
        "calls", {name: side(*pair) for name, pair in calls.items()}, rounds, cpus, False
    )
    base = "raw EVALSHA round trip"
    report.add(base, done.side("raw").median, "us")
    for name in calls:
        if name != "raw":
            report.pair(
                name,
                done.side(name).median,
                "us",
                base,
                done,
                done.ratio(name, "raw"),
                maximum=1.3,
            )


def bench_server(report: Report, client: Any, n: int, bulk: int) -> None:
    d = Dehydrator(client, "server")
    raw = server_us(
        client,
        ("zadd", "hset"),
        lambda: [
            (client.zadd("rawz", {f"r{i}": 1.0}), client.hset("rawh", f"r{i}", "element"))
            for i in range(n)
        ],
    ).usec
    push = server_us(
        client, ("evalsha",), lambda: [d.push(f"s{i}", "element", HOUR) for i in range(n)]
    ).usec
    report.add("raw ZADD + HSET, one element", raw / n, "us Redis")
    row = report.compare(
        "dh_push, one element", push / n, "us Redis", "raw ZADD + HSET, one element"
    )
    row.target, row.ok = "<= 10 us", push / n <= 10

    rng = random.Random(7)  # ids as gidpush makes them, 100-byte elements
    ids = [f"{rng.getrandbits(128):032x}" for _ in range(bulk)]
    elements = [f'{{"doc": {i}, "body": "{"x" * 80}"}}' for i in range(bulk)]

    bulk_d = Dehydrator(client, "bulk")
    bulk_rows(
        report,
        "raw pipelined ZADD + HSET",
        "dh_push in bulk",
        server_us(
            client,
            ("zadd", "hset"),
            lambda: raw_push(client, "rawbulk", ids, elements, redis_ms(client) + 1),
        ),
        server_us(client, ("evalsha",), lambda: bulk_d.park(ids, elements, [1] * bulk)),
        bulk,
        maximum=1.2,
    )
    time.sleep(0.01)  # every element is due
    poll = server_us(client, ("evalsha",), bulk_d.poll).usec
    raw = server_us(
        client, ("zrange", "hmget", "zremrangebyrank", "hdel"), lambda: raw_poll(client, "rawbulk")
    ).usec
    report.add("raw ZRANGE + HMGET + ZREMRANGEBYRANK + HDEL, per element", raw / bulk, "us Redis")
    row = report.compare(
        "poll (dh_take), per element",
        poll / bulk,
        "us Redis",
        "raw ZRANGE + HMGET + ZREMRANGEBYRANK + HDEL, per element",
    )
    row.target, row.ok = "<= 1.0 us", poll / bulk <= 1.0
    bench_ickadd(report, client, bulk)


def bench_ickadd(report: Report, client: Any, bulk: int) -> None:
    """ickadd in bulk (the writer's script) against pipelined ZADD LT of the same pairs."""
    rng = random.Random(7)
    members = [f"doc:{rng.randrange(10**9)}" for _ in range(bulk)]
    scores = [rng.uniform(0, 1e9) for _ in range(bulk)]

    def raw_bulk() -> None:
        pipe = client.pipeline(transaction=False)
        for first in range(0, bulk, CHUNK):
            flat: list[Any] = []
            for i in range(first, min(bulk, first + CHUNK)):
                flat += (scores[i], members[i])
            pipe.execute_command("ZADD", "bulkick", "LT", *flat)
        pipe.execute()

    packed = pack_chunks(members, scores)
    ick = Ick(client, "bulk")

    def ickadd() -> None:
        pipe = client.pipeline(transaction=False)
        for arg in packed:
            scripts.queue(pipe, "ickadd", ick.keys.base, [arg])
        pipe.execute()

    bulk_rows(
        report,
        "raw pipelined ZADD LT",
        "ickadd in bulk",
        server_us(client, ("zadd",), raw_bulk),
        server_us(client, ("eval",), ickadd),
        bulk,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    pairs.add_arguments(parser)
    args = parser.parse_args(argv)
    n, bulk = (500, 20_000) if args.quick else (5_000, 200_000)
    report = Report(
        "bench_calls_quick" if args.quick else "bench_calls",
        params={"calls": n, "bulk": bulk, "loadavg_start": list(os.getloadavg())},
    )
    with redis_server() as server:
        cpus = pairs.layout(server.process.pid if server.process else None, args.own_core)
        report.params.update(cpus=cpus, rounds=args.rounds)
        client = connect(server.url)
        bench_calls(report, client, n, args.rounds, cpus)
        client.flushall()
        bench_server(report, client, n, bulk)
    report.params["loadavg_end"] = list(os.getloadavg())
    report.show()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
