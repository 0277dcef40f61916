"""The CLI's commands on Icks: stats, add, peek, del, and the metrics exporter."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from ..clients import Client
from ..errors import IckError
from ..observe import peek, server_time, stats
from ..registry import shards_to_use
from ..sharded import ShardedIck
from .output import NotFound, console, emit, peek_tables, stats_table, watch


def cmd_stats(client: Client, args: argparse.Namespace) -> int:
    shards = shards_to_use(client, args.name, args.shards)

    def show() -> Any:
        report = stats(client, args.name, shards)
        return report if args.json else stats_table(report)

    if args.watch is not None:
        return watch(show, args.watch, args.json)
    report = stats(client, args.name, shards)
    if not any(row["exists"] for row in report["rows"]):
        raise NotFound(f"Ick {args.name!r} does not exist")
    emit(report if args.json else stats_table(report), args.json, None if args.json else console())
    return 0


def cmd_add(client: Client, args: argparse.Namespace) -> int:
    shards = shards_to_use(client, args.name, args.shards)
    score = server_time(client) if args.score is None else args.score
    members = list(dict.fromkeys(args.members))
    new, changed = ShardedIck(client, args.name, shards).add_pairs(members, [score] * len(members))
    print(
        f"Ick {args.name!r}: {new} new, {changed} lowered, {len(members) - new - changed} unchanged"
    )
    return 0


def cmd_peek(client: Client, args: argparse.Namespace) -> int:
    shards = shards_to_use(client, args.name, args.shards)
    found = peek(client, args.name, shards, args.n)
    if args.json:
        emit({part: [list(row) for row in rows] for part, rows in found.items()}, True, None)
    else:
        out = console()
        for table in peek_tables(found):
            out.print(table)
    return 0


def cmd_metrics(client: Client, args: argparse.Namespace) -> int:
    from ..metrics import serve

    try:
        server = serve(client, args.port, args.bind)
    except ModuleNotFoundError as exc:
        if exc.name != "prometheus_client":
            raise
        raise IckError(
            "metrics need the prometheus-client package: pip install 'pyspark-ick[metrics]'"
        ) from None
    print(f"serving http://{args.bind}:{args.port}/metrics (Ctrl-C stops)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


def cmd_del(client: Client, args: argparse.Namespace) -> int:
    shards = shards_to_use(client, args.name, args.shards)
    report = stats(client, args.name, shards)
    if not any(row["exists"] for row in report["rows"]):
        raise NotFound(f"Ick {args.name!r} does not exist")
    size = report["totals"]["queued"] + report["totals"]["reserved"]
    if not args.yes:
        sys.stderr.write(
            f"Delete Ick {args.name!r} ({shards} shard{'s' if shards > 1 else ''}, "
            f"{size} members)? [y/N] "
        )
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            raise NotFound("not deleted")
    removed = ShardedIck(client, args.name, shards).delete()
    print(f"deleted Ick {args.name!r}: {size} members, {removed} keys")
    return 0
