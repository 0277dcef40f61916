"""What the Sentinel check after WAIT costs (replication.write, issue 40): adds through a
Sentinel set with ``redis.waitReplicas`` 1, with the check (``Pinned.demoted``: one
round trip to a sentinel per write) and with it left out, in alternating rounds
(pairs.py). Single-member adds (``Ick.add`` one at a time: the worst case) and adds of
10,000 members (a Spark task's write).

    python bench/bench_sentinel_check.py [--singles 500] [--bulk 5] [--rounds 6]

Starts its own Sentinel set (a primary, 2 replicas, 3 sentinels) on free ports.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pairs
from common import Report

from pyspark_ick import Ick, connect, pinned
from pyspark_ick.testing import start_sentinels

BULK = 10_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--singles", type=int, default=500, help="single adds per side")
    parser.add_argument("--bulk", type=int, default=5, help="10,000-member adds per side")
    pairs.add_arguments(parser, rounds=6)
    args = parser.parse_args(argv)
    if args.own_core:
        parser.error("--own-core: not here (a Sentinel set is several servers)")
    cpus = pairs.layout(None, False)
    loadavg_start = list(os.getloadavg())
    checked = pinned.Pinned.demoted
    sentinels = start_sentinels(2, 3, service="bench-check")
    try:
        ick = Ick(connect(sentinels.url, wait_replicas=1), "bench")
        ick.add({"warm": 1.0})

        def adds(check: bool, size: int, count: int) -> Callable[[], float]:
            """Seconds per add of ``size`` members, over ``count`` adds."""

            def side() -> float:
                pinned.Pinned.demoted = checked if check else (lambda self: False)  # type: ignore[method-assign]
                start = time.perf_counter()
                for i in range(count):
                    ick.add({f"m{i}:{j}": float(j) for j in range(size)})
                return (time.perf_counter() - start) / count

            return side

        sides = {
            "single, checked": adds(True, 1, args.singles),
            "single, unchecked": adds(False, 1, args.singles),
            "bulk, checked": adds(True, BULK, args.bulk),
            "bulk, unchecked": adds(False, BULK, args.bulk),
        }
        done = pairs.run_rounds("adds", sides, args.rounds, cpus)
    finally:
        pinned.Pinned.demoted = checked  # type: ignore[method-assign]
        sentinels.stop()

    report = Report(
        "sentinel_check",
        params={
            "singles": args.singles,
            "bulk": args.bulk,
            "rounds": args.rounds,
            "cpus": cpus,
            "loadavg_start": loadavg_start,
            "loadavg_end": list(os.getloadavg()),
        },
    )
    for kind, unit, scale in (("single", "us", 1e6), (f"bulk ({BULK:,})", "ms", 1e3)):
        key = kind.split()[0]
        base = f"{kind} add, unchecked"
        report.add(base, done.side(f"{key}, unchecked").median * scale, unit)
        report.pair(
            f"{kind} add, checked",
            done.side(f"{key}, checked").median * scale,
            unit,
            base,
            done,
            done.ratio(f"{key}, checked", f"{key}, unchecked"),
        )
    report.show()
    return 0


if __name__ == "__main__":
    sys.exit(main())
