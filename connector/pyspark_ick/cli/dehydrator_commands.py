"""The CLI's commands on dehydrators: ReDe's look, ttn, push and pull; stats, peek and
release."""

from __future__ import annotations

import argparse
from typing import Any

from ..clients import Client
from ..dehydrator import Dehydrator
from ..dehydrator_view import peek, stats
from ..registry import shards_to_use
from ..release import release
from ..values import text
from ..words import plural
from .found import existing
from .output import NotFound, console, dehydrator_peek_table, dehydrator_table, emit, watch


def dehydrator(client: Client, args: argparse.Namespace, new: bool = False) -> Any:
    """The dehydrator of ``args``; NotFound when it does not exist, unless ``new``."""
    if new:
        shards = shards_to_use(client, args.name, args.shards, "dehydrator")
    else:
        shards = existing(client, args, "dehydrator")
    return Dehydrator(client, args.name, shards=shards)


def show_element(element: Any, args: argparse.Namespace) -> int:
    """Print the element of ``args.id`` (NotFound when None)."""
    if element is None:
        raise NotFound(f"dehydrator {args.name!r} holds no id {args.id!r}")
    print(text(element))
    return 0


def cmd_look(client: Client, args: argparse.Namespace) -> int:
    return show_element(dehydrator(client, args).look(args.id), args)


def cmd_ttn(client: Client, args: argparse.Namespace) -> int:
    print(int(dehydrator(client, args).ttn()))
    return 0


def cmd_push(client: Client, args: argparse.Namespace) -> int:
    dehydrator(client, args, new=True).push(args.id, args.element, args.ttl)
    print(f"dehydrator {args.name!r}: pushed {args.id!r}, due in {args.ttl} ms")
    return 0


def cmd_pull(client: Client, args: argparse.Namespace) -> int:
    return show_element(dehydrator(client, args).pull(args.id), args)


def cmd_dh_stats(client: Client, args: argparse.Namespace) -> int:
    shards = existing(client, args, "dehydrator")

    def show() -> Any:
        report = stats(client, args.name, shards)
        return report if args.json else dehydrator_table(report)

    if args.watch is not None:
        return watch(show, args.watch, args.json)
    report = stats(client, args.name, shards)  # empty is a state: its zeros are shown
    emit(
        report if args.json else dehydrator_table(report),
        args.json,
        None if args.json else console(),
    )
    return 0


def cmd_dh_peek(client: Client, args: argparse.Namespace) -> int:
    shards = existing(client, args, "dehydrator")
    found = peek(client, args.name, shards, args.n)
    if args.json:
        emit([list(row) for row in found], True, None)
    elif not found:
        print(f"dehydrator {args.name!r}: nothing parked")
    else:
        console().print(dehydrator_peek_table(args.name, found))
    return 0


def cmd_dh_release(client: Client, args: argparse.Namespace) -> int:
    shards = existing(client, args, "dehydrator")
    done = release(client, args.name, shards, kind="dehydrator")
    for i, owner in enumerate(done.owners):
        print(
            f"shard {i}: "
            + (f"lease of {owner!r} dropped" if owner else "no lease held")
            + f", {plural(done.open_claims[i], 'open claim')} kept"
        )
    left = sum(done.open_claims)
    print(
        f"dehydrator {args.name!r} released: the next query starts at once"
        + (f" and delivers the {plural(left, 'open claim')} first" if left else "")
        + " (give it a new checkpointLocation if the old one is lost)"
    )
    return 0
