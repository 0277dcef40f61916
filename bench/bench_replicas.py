"""What ``redis.waitReplicas`` costs: writer and drain throughput with waitReplicas 0 and 1,
on a primary with no replica and on one with 1 replica, against raw pipelined ZADD LT into
the same primary in the same run.

Writer: ``ShardedIck.add_pairs`` of N members in writes of ``--write`` members (the path of
``df.write``/``writeStream`` tasks: one write per Arrow batch, 10,000 rows by default) and
of single members (``Ick.add`` one at a time: a WAIT round trip per write). Drain: the
members reserved and committed with ``Ick.exchange`` in batches of 1,000 (the plain
consumer never WAITs: this shows what a replica costs the primary), and the stream
reader's loop (``ReservationLog`` reserve, read, commit of 1,000, the calls of a
micro-batch) with waitReplicas 0 and 1 (a WAIT after each reserve and each commit). Runs
alternate, each into a fresh key, best of ``--repeat``. waitReplicas=1 with no replica is
not measured: it fails after ``redis.retryTimeout``.

Run: ``python bench/bench_replicas.py [--members N] [--write W] [--singles S] [--repeat R]``.
Starts its own redis-servers; never touches a running server.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import raw_zadd
from common import Report, timed

from pyspark_ick import Ick, ShardedIck, connect
from pyspark_ick.reservations import ReservationLog
from pyspark_ick.testing import HOST, RedisServer, start_binary, wait_until


def with_replica(primary: RedisServer) -> RedisServer:
    """A replica of ``primary``, synced."""
    replica = start_binary(None, "--replicaof", HOST, str(primary.port))

    def synced() -> bool:
        with replica.client() as c:
            return c.info("replication").get("master_link_status") == "up"

    wait_until(synced, timeout=30, what="the replica in sync")
    return replica


def drain(client: Any, key: str, batch: int = 1000) -> None:
    """Reserve and commit every member of Ick ``key``, ``batch`` at a time."""
    ick = Ick(client, key)
    got = ick.exchange(batch)
    while got:
        got = ick.exchange(batch, commit=[m for m, _ in got])


def log_drain(client: Any, key: str, batch: int = 1000) -> None:
    """Reserve, read and commit every member of Ick ``key`` as the stream reader does,
    ``batch`` per micro-batch."""
    log = ReservationLog(client, key)
    fence = log.lease.acquire("bench", 60_000)
    number = log.last_committed()
    while True:
        head, moved, _ = log.reserve(batch, number, fence)
        if not moved:
            break
        log.read(number, head)
        log.commit(head, fence)
        number = head
    log.lease.release(fence)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--members", type=int, default=200_000)
    parser.add_argument("--write", type=int, default=10_000, help="members per write")
    parser.add_argument("--singles", type=int, default=2_000, help="one-member writes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    members = [f"member:{i}" for i in range(args.members)]
    scores = [float(i) for i in range(args.members)]
    mapping = dict(zip(members, scores, strict=True))
    report = Report(
        "replicas",
        params={
            "members": args.members,
            "write": args.write,
            "singles": args.singles,
            "repeat": args.repeat,
        },
    )
    primary = start_binary(None, "--repl-diskless-sync-delay", "0")
    replica: RedisServer | None = None
    try:
        runs: dict[str, Callable[[str], None]] = {}
        best: dict[str, float] = {}
        raw_client = primary.client()

        def writer(replicas: int) -> Callable[[str], None]:
            client = connect(primary.url, wait_replicas=replicas)

            def run(key: str) -> None:
                ick = ShardedIck(client, key)
                for i in range(0, args.members, args.write):
                    ick.add_pairs(members[i : i + args.write], scores[i : i + args.write])

            return run

        def singles(replicas: int) -> Callable[[str], None]:
            client = connect(primary.url, wait_replicas=replicas)

            def run(key: str) -> None:
                ick = Ick(client, key)
                for i in range(args.singles):
                    ick.add({members[i]: scores[i]})

            return run

        plain = connect(primary.url)
        for setup in ("0 replicas", "1 replica"):
            if setup == "1 replica":
                replica = with_replica(primary)
            runs = {"raw": lambda key: raw_zadd(raw_client, key, mapping)}
            for n in (0, 1) if replica else (0,):
                runs[f"writer w{n}"] = writer(n)
                runs[f"singles w{n}"] = singles(n)
            times: dict[str, list[float]] = {name: [] for name in runs}
            drains: list[float] = []
            logs: dict[int, list[float]] = {n: [] for n in ((0, 1) if replica else (0,))}
            for attempt in range(args.repeat):
                for name, run in runs.items():
                    key = f"{setup[0]}-{name.replace(' ', '-')}-{attempt}"
                    times[name].append(timed(lambda run=run, key=key: run(key)))
                    if name == "writer w0":
                        drains.append(timed(lambda key=key: drain(plain, key)))
                    raw_client.unlink(key)
                for n in logs:  # the stream reader's calls, waiting for n replicas
                    key = f"{setup[0]}-log-w{n}-{attempt}"
                    writer(0)(key)
                    waiting = connect(primary.url, wait_replicas=n)
                    logs[n].append(timed(lambda key=key, c=waiting: log_drain(c, key)))
                    raw_client.unlink(key)
            best = {name: min(t) for name, t in times.items()}
            raw = f"raw ZADD LT, {setup}"
            report.add(raw, args.members / best["raw"], "members/s")
            for n in (0, 1) if replica else (0,):
                report.compare(
                    f"writer waitReplicas={n}, {setup}",
                    args.members / best[f"writer w{n}"],
                    "members/s",
                    raw,
                )
            for n in (0, 1) if replica else (0,):
                report.add(
                    f"single adds waitReplicas={n}, {setup}",
                    args.singles / best[f"singles w{n}"],
                    "writes/s",
                )
            report.compare(
                f"drain (exchange 1000), {setup}", args.members / min(drains), "members/s", raw
            )
            for n, spent in logs.items():
                report.compare(
                    f"stream reader's calls (1000 a batch) waitReplicas={n}, {setup}",
                    args.members / min(spent),
                    "members/s",
                    raw,
                )
        report.show()
    finally:
        if replica is not None:
            replica.stop()
        primary.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
