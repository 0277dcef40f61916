"""The CLI's commands on Icks: stats, add, peek, del, reshard, release, and the metrics
exporter."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

from ..clients import Client
from ..errors import IckError
from ..existence import shards_of
from ..holds import holders, in_use
from ..keys import IckKeys, shard_names
from ..listen import host_port, listen_failed
from ..observe import peek, server_time, stats, summary
from ..registry import recorded, resharding, shards_to_use
from ..release import release
from ..reshard import reshard
from ..retries import release_due
from ..sharded import ShardedIck
from ..words import plural
from .found import existing, not_found
from .output import ask, console, emit, peek_tables, stats_table, watch


def cmd_stats(client: Client, args: argparse.Namespace) -> int:
    shards = existing(client, args)
    target = resharding(client, args.name)

    def show() -> Any:
        report = summary(client, args.name, shards)
        if target is not None:
            report["resharding_to"] = target
        return report if args.json else stats_table(report)

    if args.watch is not None:
        return watch(show, args.watch, args.json)
    report = summary(client, args.name, shards)
    if target is not None and not args.json:
        print(f"Ick {args.name!r} is being resharded to {plural(target, 'shard')}", file=sys.stderr)
    emit(report if args.json else stats_table(report), args.json, None if args.json else console())
    return 0


def cmd_add(client: Client, args: argparse.Namespace) -> int:
    shards = shards_to_use(client, args.name, args.shards)
    score = server_time(client) if args.score is None else args.score
    members = list(dict.fromkeys(args.members))
    sharded = ShardedIck(client, args.name, shards)
    new, changed = sharded.add_pairs(members, [score] * len(members), lane=args.lane)
    lane = " (backfill lane)" if args.lane == "backfill" else ""
    print(
        f"Ick {args.name!r}: {new} new, {changed} lowered, "
        f"{len(members) - new - changed} unchanged{lane}"
    )
    return 0


def cmd_peek(client: Client, args: argparse.Namespace) -> int:
    shards = existing(client, args)
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
        server = serve(client, args.port, args.bind, args.where)
    except OSError as exc:
        raise listen_failed(exc, args.bind, args.port, "metrics") from None
    except ModuleNotFoundError as exc:
        if exc.name != "prometheus_client":
            raise
        raise IckError(
            "metrics need the prometheus-client package (the metrics extra): python3 -m pip "
            "install prometheus-client, or '.[metrics]' in a clone of pyspark-ick"
        ) from None
    print(f"serving http://{host_port(args.bind, args.port)}/metrics (Ctrl-C stops)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


def cmd_del(client: Client, args: argparse.Namespace) -> int:
    shards = existing(client, args)
    found = summary(client, args.name, shards)["totals"]
    kinds = (
        f"{found['queued']} queued, {found['reserved']} reserved, {found['retrying']} retrying, "
        f"{plural(found['dead'], 'dead letter')}"
    )
    masters = shard_names(args.name, shards)
    held = holders(
        client, [(IckKeys(m).lease, f"Ick {args.name!r} shard {i}") for i, m in enumerate(masters)]
    )
    if held and not args.force:
        raise in_use(
            "not deleted",
            held,
            args.name,
            "Or pass --force to delete under it (it goes on, on an empty Ick, and its batch in "
            "flight is lost)",
        )
    if not args.yes:
        ask(
            f"Delete Ick {args.name!r} ({plural(shards, 'shard')}: {kinds})"
            + (f", consumed by {held[0].owner!r} now" if held else "")
            + "?",
            "not deleted",
        )
    removed = ShardedIck(client, args.name, shards).delete(keep_leases=bool(held))
    kept = " (the leases stay: a consumer holds one)" if held else ""
    print(f"deleted Ick {args.name!r}: {kinds} ({plural(removed, 'key')}){kept}")
    return 0


def cmd_reshard(client: Client, args: argparse.Namespace) -> int:
    target = resharding(client, args.name)
    tried = [args.shards] if args.shards else [None, 2]  # NAME:0, NAME:1: a gem's Ick's shards
    if target is None and all(shards_of(client, args.name, "ick", n) is None for n in tried):
        raise not_found(client, args)
    if not args.yes:
        count = recorded(client, args.name, "ick", f"Ick {args.name!r}") or args.shards
        size = stats(client, args.name, count)["totals"] if count else None
        members = f", {plural(size['queued'] + size['reserved'], 'member')}" if size else ""
        ask(
            (
                f"Finish the reshard of Ick {args.name!r} to {plural(target, 'shard')}{members}?"
                if target is not None
                else f"Reshard Ick {args.name!r} from {count or '?'} to {plural(args.to, 'shard')}"
                f"{members}? Stop its queries first, and the producers that do not read the "
                "recorded count (the redis-ick gem, code with a fixed count, long-lived "
                "ShardedIck objects); pyspark-ick's readers and writers refuse it until "
                "the reshard has finished."
            ),
            "not resharded",
        )
    done = reshard(client, args.name, args.to, args.shards)
    carried = plural(done.carried, "member's", "members'")
    if done.before == done.after and not (done.moved or done.requeued or done.dropped):
        print(
            f"Ick {args.name!r} has {plural(done.after, 'shard')} already: nothing to move; "
            f"{carried} retries or dead letters carried to their shard"
        )
        return 0
    print(
        f"Ick {args.name!r}: {done.before} -> {plural(done.after, 'shard')}: "
        f"{plural(done.moved, 'member')} moved, "
        f"{carried} retries or dead letters carried, "
        f"{plural(done.requeued, 'reserved member')} back in the queue "
        f"({plural(done.closed, 'reservation')} closed), "
        f"{plural(len(done.dropped), 'old shard')} deleted; {plural(done.calls, 'call')} "
        f"in {done.seconds:.1f} s (longest {done.longest_ms:.1f} ms). Run its producers and "
        f"queries with shards={done.after}, each query with a new checkpointLocation"
    )
    return 0


def cmd_release(client: Client, args: argparse.Namespace) -> int:
    done = release(client, args.name, existing(client, args))
    for i, owner in enumerate(done.owners):
        print(
            f"shard {i}: "
            + (f"lease of {owner!r} dropped, " if owner else "no lease held, ")
            + f"{plural(done.requeued[i], 'reserved member')} back in the queue "
            f"({plural(done.closed[i], 'reservation')} closed)"
        )
    print(
        f"Ick {args.name!r} released: {plural(sum(done.requeued), 'member')} back in the queue; "
        "the next "
        "query starts at once. Its old query, if restarted from its checkpoint with a batch "
        "in flight, fails (number N was committed already): give it a new checkpointLocation"
    )
    return 0


def cmd_retry_due(client: Client, args: argparse.Namespace) -> int:
    shards = existing(client, args)
    keys = [IckKeys(master) for master in shard_names(args.name, shards)]
    label = f"Ick {args.name!r}"
    try:
        while True:
            done = release_due(client, keys, label)
            print(
                f"Ick {args.name!r}: {plural(done.released, 'due retry', 'due retries')} queued, "
                f"{plural(done.dropped, 'pending retry', 'pending retries')} dropped (their "
                "member is queued or reserved already)",
                flush=True,
            )
            if args.every is None:
                return 0
            time.sleep(args.every)
    except KeyboardInterrupt:
        return 0
