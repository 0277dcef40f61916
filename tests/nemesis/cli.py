"""The soak's command line: ``python3 tests/nemesis --minutes 30 --seed 1 --out DIR``;
``--check DIR`` checks a recorded run again, ``--child CFG`` is the consumer process."""

from __future__ import annotations

import argparse
import json
import signal
import sys

import nemesis
from nemesis import check
from nemesis.consumer import child_main
from nemesis.settings import CLUSTER_KINDS, KINDS, SENTINEL_KINDS, Settings
from nemesis.soak import soak


def parse(argv: list[str]) -> Settings:
    p = argparse.ArgumentParser(
        prog="python3 tests/nemesis", description=(nemesis.__doc__ or "").split("\n\n")[0]
    )
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="nemesis-out")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--rate", type=float, default=30.0, help="adds per second")
    p.add_argument(
        "--every", type=float, nargs=2, default=(5.0, 15.0), help="seconds between faults (min max)"
    )
    p.add_argument("--drain-timeout", type=float, default=180.0)
    p.add_argument("--consumer-id", default="", help="fixed consumerId (default: random)")
    p.add_argument(
        "--kinds",
        default="",
        help=f"comma-separated subset of {','.join(KINDS)}"
        f" (--sentinel: of {','.join(SENTINEL_KINDS)}; --cluster: of"
        f" {','.join(CLUSTER_KINDS)})",
    )
    p.add_argument("--dehydrator", action="store_true", help="add the dehydrator loop")
    p.add_argument(
        "--sentinel",
        action="store_true",
        help="the Ick on a Sentinel set (primary, 2 replicas, 3 sentinels)",
    )
    p.add_argument(
        "--wait-timeout",
        type=float,
        default=2.0,
        help="--sentinel, --cluster: seconds an add waits for a replica",
    )
    p.add_argument(
        "--wait-replicas",
        type=int,
        default=None,
        choices=(1, 2),
        help="--sentinel: replicas writers and readers wait for (default 2, both: 1 loses "
        "adds to a SENTINEL FAILOVER, docs/deploying.md)",
    )
    p.add_argument(
        "--unwaited",
        type=int,
        default=0,
        metavar="N",
        help="--sentinel: N producers add without waiting for a replica; the checker counts "
        "their adds apart (unkept), the control that shows a fault losing unreplicated adds",
    )
    p.add_argument(
        "--durable",
        action="store_true",
        help="--sentinel: data nodes with appendonly yes, appendfsync always",
    )
    p.add_argument(
        "--cluster",
        action="store_true",
        help="the Ick on a Redis Cluster (3 primaries, a replica each)",
    )
    p.add_argument(
        "--poison",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="the sink fails for good on SHARE of members (by a seeded hash), once on 2x SHARE",
    )
    p.add_argument("--writer", action="store_true", help="a writeStream.format(ick) producer")
    p.add_argument("--zombie", action="store_true", help="draw zombie_consumer faults too")
    p.add_argument("--outage", action="store_true", help="draw outage (> redis.retryTimeout)")
    a = p.parse_args(argv)
    if a.cluster and (a.sentinel or a.durable or a.wait_replicas is not None):
        p.error("--cluster goes without --sentinel, --durable and --wait-replicas")
    if a.unwaited and not (a.sentinel and 0 < a.unwaited < Settings.producers):
        p.error(f"--unwaited goes with --sentinel, below the {Settings.producers} producers")
    if not 0 <= a.poison < 0.3:
        p.error("--poison takes a share of members in [0, 0.3)")
    kinds = tuple(k for k in a.kinds.split(",") if k)
    allowed = CLUSTER_KINDS if a.cluster else SENTINEL_KINDS if a.sentinel else KINDS
    if set(kinds) - set(allowed):
        p.error(f"unknown fault kinds {sorted(set(kinds) - set(allowed))}")
    return Settings(
        minutes=a.minutes,
        seed=a.seed,
        out=a.out,
        shards=a.shards,
        rate=a.rate,
        every=tuple(a.every),
        drain_timeout=a.drain_timeout,
        consumer_id=a.consumer_id,
        kinds=kinds,
        dehydrator=a.dehydrator,
        sentinel=a.sentinel,
        cluster=a.cluster,
        wait_timeout=a.wait_timeout,
        wait_replicas=a.wait_replicas or (2 if a.sentinel else 1),
        durable=a.durable,
        unwaited=a.unwaited,
        poison=a.poison,
        writer=a.writer,
        zombie=a.zombie,
        outage=a.outage,
    )


def main(argv: list[str]) -> int:
    """``--child CFG``: the consumer; ``--check DIR``: the checker; else a soak."""
    if argv[:1] == ["--child"]:
        return child_main(json.loads(argv[1]))
    if argv[:1] == ["--check"]:
        return check.main(argv[1:])
    settings = parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally: clean up
    summary = soak(settings)
    return 0 if summary["ok"] else 1
