"""What the freshness histogram costs a drain (issue 52): the stream reader's own calls
(ReservationLog reserve, read, commit: bench_reader.raw_drain, the drain's physical
limit) over N members queued with Unix-time scores, with the product's Lua and with the
same Lua less the one line of rlog_commit that counts (``fresh_count``), in alternating
rounds (pairs.py). Every member is counted, in one of several buckets (waits of 0 s to
2 h). Two figures per round: the drain's seconds, and the CPU seconds redis-server spent
in it (INFO cpu: Redis's own work, which the other processes of a shared machine disturb
less than they do a wall clock). Then Redis's own time per commit call (INFO
commandstats, ``usec`` of EVALSHA while only commits run): --commits members reserved,
then committed in calls of 1,000, with each Lua, in alternating rounds.

    python bench/bench_freshness.py [--members 200000] [--commits 20000] [--rounds 6]
        [--own-core]

The Spark drain runs these calls from its driver: its micro-batches cost more than the
loop's, so the histogram's share of a Spark drain is smaller than the ratio here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pairs
from bench_reader import SHARDS, raw_drain
from common import Report

from pyspark_ick import Ick, ShardedIck, connect, lua
from pyspark_ick.observe import server_time
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import redis_server

COUNTING = "fresh_count(fresh, counted)\n"


@contextmanager
def lua_without_counting() -> Iterator[Path]:
    """A copy of lua/ whose rlog_commit leaves out the line that counts."""
    folder = Path(tempfile.mkdtemp(prefix="bench-freshness-"))
    try:
        for script in lua.lua_dir().glob("*.lua"):
            shutil.copy(script, folder / script.name)
        commit = folder / "rlog_commit.lua"
        text = commit.read_text()
        if COUNTING not in text:
            raise SystemExit(f"rlog_commit.lua has no line {COUNTING!r}: update this benchmark")
        commit.write_text(text.replace(COUNTING, ""))
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def use_lua(folder: Path | None, product: Callable[[], Path]) -> None:
    """Scripts from ``folder`` (None: the product's) from the next call on."""
    lua.lua_dir = product if folder is None else (lambda: folder)  # type: ignore[assignment]
    lua.source.cache_clear()
    lua.sha.cache_clear()


def commit_us(client: Any, members: int) -> float:
    """Redis's microseconds per 1,000 members committed: ``members`` queued (waits of 0 s
    to 2 h) and reserved in one shard, then committed, the commit calls alone timed."""
    ick = Ick(client, "bench_commit")
    ick.delete()
    now = server_time(client)
    ick.add({f"doc:{i}": now - (i % 7200) for i in range(members)})
    log = ReservationLog(client, "bench_commit")
    token = log.lease.acquire("bench", 60_000)
    head = 0
    while True:
        head, moved, _ = log.reserve(None, head, token)
        if not moved:
            break
    log.commit(0, token)  # loads the script
    client.config_resetstat()
    log.commit(head, token)
    usec = float(client.info("commandstats")["cmdstat_evalsha"]["usec"])
    log.lease.release(token)
    return usec / members * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=200_000, help="members per drain")
    parser.add_argument("--commits", type=int, default=20_000, help="members per commit round")
    pairs.add_arguments(parser, rounds=6)
    args = parser.parse_args(argv)
    product = lua.lua_dir
    loadavg_start = list(os.getloadavg())
    with redis_server() as server, lua_without_counting() as plain:
        cpus = pairs.layout(server.process.pid if server.process else None, args.own_core)
        client = connect(server.url)
        ick = ShardedIck(client, "bench_fresh", SHARDS)

        redis_cpu: dict[str, list[float]] = {"histogram": [], "none": []}

        def cpu_seconds() -> float:
            info = client.info("cpu")
            return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

        def drain(counting: bool) -> Callable[[], float]:
            def side() -> float:
                ick.delete()
                now = server_time(client)
                members = [f"doc:{i}" for i in range(args.members)]
                ick.add_pairs(members, [now - (i % 7200) for i in range(args.members)])
                use_lua(None if counting else plain, product)
                try:
                    start, cpu = time.perf_counter(), cpu_seconds()
                    got = raw_drain(client, "bench_fresh", 10_000)
                    spent = time.perf_counter() - start
                    redis_cpu["histogram" if counting else "none"].append(cpu_seconds() - cpu)
                finally:
                    use_lua(None, product)
                assert got == args.members, (got, args.members)
                return spent

            return side

        done = pairs.run_rounds(
            "drain", {"histogram": drain(True), "none": drain(False)}, args.rounds, cpus
        )
        busy = pairs.Rounds("redis_cpu", done.sides, cpus=dict(cpus))
        for i, order in enumerate(done.orders):
            busy.add({side: redis_cpu[side][i] for side in done.sides}, order)
        busy.loads = list(done.loads)  # each round's load, as read after the drain's round

        def commits(counting: bool) -> Callable[[], float]:
            def side() -> float:
                use_lua(None if counting else plain, product)
                try:
                    return commit_us(client, args.commits)
                finally:
                    use_lua(None, product)

            return side

        calls = pairs.run_rounds(
            "commit", {"histogram": commits(True), "none": commits(False)}, args.rounds, cpus
        )
    report = Report(
        "freshness",
        params={
            "members": args.members,
            "commits": args.commits,
            "shards": SHARDS,
            "rounds": args.rounds,
            "cpus": cpus,
            "loadavg_start": loadavg_start,
            "loadavg_end": list(os.getloadavg()),
        },
    )
    for what, timed, unit in (
        ("drain", done, "s"),
        ("Redis CPU of a drain", busy, "s"),
        ("Redis's time per 1,000 committed", calls, "us"),
    ):
        base = f"{what}, no histogram"
        report.add(base, timed.side("none").median, unit)
        report.pair(
            f"{what}, histogram",
            timed.side("histogram").median,
            unit,
            base,
            timed,
            timed.ratio("histogram", "none"),
        )
    report.show()
    return 0


if __name__ == "__main__":
    sys.exit(main())
