"""The CLI's commands on an Ick's dead letters: list, count (with the retries waiting),
re-drive and purge (docs/operations.md's dead-letter runbook)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..clients import Client
from ..dead_letters import DeadLetter, DeadLetters
from ..sharded import ShardedIck
from ..values import as_bytes, text
from ..words import plural
from .found import existing
from .output import NotFound, ask, console, emit, fmt_age, table


def letters(client: Client, args: argparse.Namespace) -> DeadLetters:
    """The dead letters of Ick ``args.name``; NotFound when the Ick does not exist."""
    return DeadLetters(ShardedIck(client, args.name, existing(client, args)))


def named(found: DeadLetters, members: list[str]) -> tuple[list[str], list[str]]:
    """``members`` split into the dead letters of ``found`` (in their shard, or strays in
    another: DeadLetters.where) and the others (read-only)."""
    listed = list(dict.fromkeys(members))
    dead = found.where(listed)
    return [m for m in listed if as_bytes(m) in dead], [
        m for m in listed if as_bytes(m) not in dead
    ]


def no_dead_letter(name: str, others: list[str]) -> NotFound:
    shown = ", ".join(repr(text(m)) for m in others)
    return NotFound(f"Ick {name!r} has no dead letter {shown}")


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
    if not found:
        print(f"Ick {args.name!r}: no dead letters")
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
        return 0
    for row in shards:
        dead_ = plural(row["dead"], "dead letter")
        print(f"shard {row['shard']}: {dead_}, {row['retrying']} retrying")
    dead_ = plural(sum(dead), "dead letter")
    print(f"Ick {args.name!r}: {dead_}, {sum(retrying)} waiting for a retry")
    return 0


def apply(client: Client, args: argparse.Namespace, mode: str, did: str) -> int:
    """Re-drive or purge (``mode``) the dead letters named, or all; the members named that
    are no dead letter are NotFound, after the others are done."""
    found = letters(client, args)
    dead, others = named(found, args.members) if args.members else ([], [])
    if args.members and not dead:
        raise no_dead_letter(args.name, others)
    if mode == "purge" and not args.members and not args.yes:
        total = sum(found.count())
        ask(f"Purge all {plural(total, 'dead letter')} of Ick {args.name!r}?", "not purged")
    done = found.redrive(dead or None) if mode == "redrive" else found.purge(dead or None)
    print(f"Ick {args.name!r}: {plural(done, 'dead letter')} {did}")
    if others:
        raise no_dead_letter(args.name, others)
    return 0


def cmd_dead_redrive(client: Client, args: argparse.Namespace) -> int:
    return apply(client, args, "redrive", "re-driven (queued again, attempts from 0)")


def cmd_dead_purge(client: Client, args: argparse.Namespace) -> int:
    return apply(client, args, "purge", "purged")
