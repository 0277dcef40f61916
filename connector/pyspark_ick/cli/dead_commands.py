"""The CLI's commands on an Ick's dead letters: list, count (with the retries waiting),
re-drive and purge (docs/operations.md's dead-letter runbook)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..clients import Client
from ..dead_letters import DeadLetter, DeadLetters
from ..registry import shards_to_use
from ..sharded import ShardedIck
from .output import ask, console, emit, fmt_age, table


def letters(client: Client, args: argparse.Namespace) -> DeadLetters:
    shards = shards_to_use(client, args.name, args.shards)
    return DeadLetters(ShardedIck(client, args.name, shards))


def as_json(letter: DeadLetter) -> dict[str, Any]:
    return {
        "member": letter.member,
        "shard": letter.shard,
        "attempts": letter.attempts,
        "failed_at_ms": letter.record.failed_at_ms,
        "dead_at_ms": letter.dead_at_ms,
        "score": letter.record.score,
        "error": letter.error,
    }


def cmd_dead_list(client: Client, args: argparse.Namespace) -> int:
    found = list(letters(client, args).read(args.n))
    if args.json:
        for letter in found:
            emit(as_json(letter), True, None)
        return 0
    now = time.time()
    rows = [
        (d.member, str(d.shard), str(d.attempts), fmt_age(now - d.dead_at_ms / 1000), d.error[:100])
        for d in found
    ]
    title = f"Ick {args.name} dead letters (oldest first per shard, {len(rows)} shown)"
    columns = ("member", "shard", "attempts", "dead for", "error")
    emit(table(title, columns, rows), False, console())
    return 0


def cmd_dead_count(client: Client, args: argparse.Namespace) -> int:
    found = letters(client, args)
    dead, retrying = found.count(), found.retrying()
    shards = [
        {"shard": i, "dead": d, "retrying": r}
        for i, (d, r) in enumerate(zip(dead, retrying, strict=True))
    ]
    report = {"name": args.name, "dead": sum(dead), "retrying": sum(retrying), "shards": shards}
    if args.json:
        emit(report, True, None)
    else:
        print(f"Ick {args.name!r}: {sum(dead)} dead letters, {sum(retrying)} waiting for a retry")
    return 0


def cmd_dead_redrive(client: Client, args: argparse.Namespace) -> int:
    done = letters(client, args).redrive(args.members or None)
    print(f"Ick {args.name!r}: {done} dead letters re-driven (queued again, attempts from 0)")
    return 0


def cmd_dead_purge(client: Client, args: argparse.Namespace) -> int:
    found = letters(client, args)
    if not args.members and not args.yes:
        total = sum(found.count())
        ask(f"Purge all {total} dead letters of Ick {args.name!r}?", "not purged")
    done = found.purge(args.members or None)
    print(f"Ick {args.name!r}: {done} dead letters purged")
    return 0
