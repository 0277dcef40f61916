"""Console benchmark (issue 42): does every page of ``pyspark-ick web`` render fast on a
big Ick, and leave Redis to its other clients?

One redis-server of its own (a free 127.0.0.1 port) holds an Ick of ``--members``
(1,000,000) queued members in 4 shards with ``--dead`` (100,000) dead letters, a few
reservations in flight and a dehydrator of 100,000 parked elements. The console runs in
this process (waitress on a free port, as ``pyspark-ick web`` runs it) and each page is
fetched over HTTP ``--repeat`` times while bench_neighbour's probe (another process doing
GET in a loop) measures what a neighbour waits, and SLOWLOG records every call over
``--slowlog-us``. The baseline rows of the same run: the probe on an idle Redis, and the
raw commands a dead-letter page needs at least (ZRANGE of 50 and HMGET of their records).
Last, "re-drive all that match" an error held by 10% of the dead letters.

Run: ``python bench/bench_console.py [--quick]``; writes bench/results/bench_console.json
(``--quick``: 100,000 members, 10,000 dead letters, bench_console_quick.json).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import raw_zadd
from bench_neighbour import PROBE_KEY, Probe, prioritize, quantiles, script_names, slowlog
from common import Report

from pyspark_ick import Dehydrator, ShardedIck, connect
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.keys import IckKeys, shard_names
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import free_port, start_binary
from pyspark_ick.web.app import create_app
from pyspark_ick.web.history import History, Sampler

SHARDS = 4
PAGE_MS = 1000.0  # target: each page renders within this
CALL_MS = 5.0  # target: no Redis call of a page longer than this
TIMEOUT = "Timeout talking to the sink at search:9200 after 30000 ms (the bulk request)"
PAGES = {
    "overview": "/",
    "Ick page": "/ick?name=big",
    "dead letters": "/dead?ick=big",
    "dead letters, error filter": "/dead?ick=big&error=timeout",
    "dead letters, filter matching none": "/dead?ick=big&error=no+such+error",
    "dead letters, member filter": "/dead?ick=big&member=m00012",
    "dehydrator page": "/dehydrator?name=parked",
}


def load(client: Any, admin: Any, members: int, dead: int) -> None:
    """The big Ick (queued members, dead letters written as rlog_commit writes them, three
    reservations in flight under a lease) and the dehydrator."""
    now_ms = int(time.time() * 1000)
    ick = ShardedIck(client, "big", SHARDS)
    ick.check_shards()  # recorded and registered, as a Spark writer does
    masters = shard_names("big", SHARDS)
    for i, master in enumerate(masters):
        admin.set(master, "ick.v1")
        part = range(i, members, SHARDS)
        for start in range(0, len(part), 100_000):
            chunk = part[start : start + 100_000]
            raw_zadd(admin, IckKeys(master).pset, {f"m{k:08d}": now_ms / 1000 - k for k in chunk})
    for k in range(dead):
        if k % 10_000 == 0:
            pipe = admin.pipeline(transaction=False)
        member = f"d{k:08d}"
        keys = IckKeys(masters[ick.shard_of(member)])
        error = TIMEOUT if k % 10 == 0 else f"ValueError: document {member} has no title " * 3
        pipe.zadd(keys.dead, {member: now_ms - dead + k})
        pipe.hset(keys.deadinfo, member, f"25 {now_ms - dead + k} {now_ms / 1000 - k} {error}")
        if k % 10_000 == 9_999 or k == dead - 1:
            pipe.execute()
    log = ReservationLog(client, masters[0])
    fence = log.lease.acquire("query-bench", 600_000)
    for r in range(3):
        log.reserve(500, r, fence)
    parked = Dehydrator(client, "parked", SHARDS)
    ids = [f"e{k:07d}" for k in range(members // 10)]
    for start in range(0, len(ids), 10_000):
        chunk = ids[start : start + 10_000]
        parked.park(chunk, chunk, [(k % 3600) * 1000 for k in range(len(chunk))])


def fetch(url: str) -> float:
    """Seconds one GET of ``url`` takes (the page read in full; a 200 expected)."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as reply:
        reply.read()
        assert reply.status == 200, url
    return time.perf_counter() - started


def sampled(admin: Any, probe: Probe, names: dict[str, str], action: Any) -> dict[str, Any]:
    """Run ``action`` with the probe sampling and SLOWLOG emptied before and read after."""
    admin.slowlog_reset()
    probe.start()
    started = time.perf_counter()
    result = action()
    wall = time.perf_counter() - started
    waits = probe.stop()
    calls = slowlog(admin, names)
    return {
        "result": result,
        "wall_s": wall,
        "probe_ms": quantiles(waits),
        "probe_samples": len(waits),
        "calls_over_slowlog": len(calls),
        "slowest": [vars(c) for c in calls[:5]],
        "slowest_ms": calls[0].ms if calls else 0.0,
        "calls_over_5_ms": sum(c.ms > CALL_MS for c in calls),
        "probe_over_5_ms": int((waits > CALL_MS).sum()),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=1_000_000)
    parser.add_argument("--dead", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=10, help="fetches of each page")
    parser.add_argument("--slowlog-us", type=int, default=1000, help="SLOWLOG threshold")
    parser.add_argument(
        "--nice",
        type=int,
        default=-20,
        help="nice value of our redis-server and probe, as bench_neighbour (0: leave them)",
    )
    parser.add_argument("--quick", action="store_true", help="a tenth of the data")
    args = parser.parse_args(argv)
    if args.quick:
        args.members, args.dead, args.repeat = args.members // 10, args.dead // 10, 3
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = Report("bench_console_quick" if args.quick else "bench_console")
    report.params.update(vars(args) | {"shards": SHARDS, "load_before": os.getloadavg()})
    server = start_binary()
    probe = Probe(server, 100.0)  # bench_neighbour's default gap between GETs
    pids = {"redis-server": server.process.pid if server.process else None}
    report.params["nice"] = prioritize(pids | {"probe": probe.process.pid}, args.nice)
    admin = server.client()
    client = connect(server.url)
    names = script_names()
    failed = False
    try:
        print(f"loading {args.members:,} members, {args.dead:,} dead letters", flush=True)
        load(client, admin, args.members, args.dead)
        admin.set(PROBE_KEY, "ok")
        admin.config_set("slowlog-log-slower-than", args.slowlog_us)
        admin.config_set("slowlog-max-len", 100_000)
        history = History(5.0)
        app = create_app(
            client,
            history,
            token=None,
            allow_actions=False,
            where=server.url,
            scrub=str,
            passwords=[],
        )
        from waitress import create_server

        web = create_server(app, host="127.0.0.1", port=free_port(), threads=4)
        threading.Thread(target=web.run, daemon=True).start()
        base = f"http://127.0.0.1:{web.effective_port}"
        fetch(base + "/")  # warm: templates compiled, scripts loaded

        idle = sampled(admin, probe, names, lambda: time.sleep(3))
        report.add("idle Redis: probe p99.9", idle["probe_ms"]["p99.9"], "ms")
        report.add("idle Redis: probe max", idle["probe_ms"]["max"], "ms")
        report.add("idle Redis: probe GETs over 5 ms", idle["probe_over_5_ms"], "GETs")
        details: dict[str, Any] = {"idle": idle}

        def raw_page() -> list[float]:
            out = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                keys = IckKeys("big:0")
                found = admin.zrange(keys.dead, 0, 49, withscores=True)
                admin.hmget(keys.deadinfo, [m for m, _ in found])
                out.append(time.perf_counter() - started)
            return out

        raw = sampled(admin, probe, names, raw_page)
        report.add(
            "raw baseline: 50 dead letters (ZRANGE + HMGET)", 1000 * max(raw["result"]), "ms"
        )
        details["raw"] = raw
        for label, path in PAGES.items():
            run = sampled(
                admin, probe, names, lambda p=path: [fetch(base + p) for _ in range(args.repeat)]
            )
            times = run["result"]
            details[label] = run
            row = report.add(f"{label}: slowest render", 1000 * max(times), "ms")
            row.target, row.ok = f"< {PAGE_MS:g}", 1000 * max(times) < PAGE_MS
            report.add(f"{label}: median render", 1000 * statistics.median(times), "ms")
            row = report.add(f"{label}: longest Redis call", run["slowest_ms"], "ms")
            row.target, row.ok = f"<= {CALL_MS:g}", run["slowest_ms"] <= CALL_MS
            report.add(f"{label}: probe p99.9", run["probe_ms"]["p99.9"], "ms")
            report.add(f"{label}: calls over 5 ms", run["calls_over_5_ms"], "calls")
            failed |= not all(r.ok for r in report.rows if r.ok is not None)

        sampler = Sampler(client, history, str)
        run = sampled(admin, probe, names, sampler.sample)
        details["sample"] = run
        report.add("one sample of every name (the plots)", 1000 * run["wall_s"], "ms")
        row = report.add("sample: longest Redis call", run["slowest_ms"], "ms")
        row.target, row.ok = f"<= {CALL_MS:g}", run["slowest_ms"] <= CALL_MS

        letters = DeadLetters(ShardedIck(client, "big", SHARDS))
        run = sampled(
            admin, probe, names, lambda: letters.apply_matching("redrive", error="timeout")
        )
        details["redrive all that match"] = run
        applied = run["result"]
        report.add(
            f"re-drive all that match ({applied.done:,} of {applied.looked:,})",
            1000 * run["wall_s"],
            "ms",
        )
        row = report.add("re-drive: longest Redis call", run["slowest_ms"], "ms")
        row.target, row.ok = f"<= {CALL_MS:g}", run["slowest_ms"] <= CALL_MS
        report.add("re-drive: probe p99.9", run["probe_ms"]["p99.9"], "ms")
        report.add("re-drive: calls over 5 ms", run["calls_over_5_ms"], "calls")
        report.params["load_after"] = os.getloadavg()
        failed |= not all(r.ok for r in report.rows if r.ok is not None)
        for run in details.values():
            run.pop("result", None)
        report.params["details"] = details
        web.close()
    finally:
        probe.close()
        client.close()
        server.stop()
    report.show()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
