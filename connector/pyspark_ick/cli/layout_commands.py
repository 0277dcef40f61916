"""The CLI's ``layout`` command: the layout version an Ick or dehydrator was written with,
whether the release before could read it now (the rollback runbook's condition), and the
rollback itself (``--rollback-to``; docs/operations.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import layout
from ..clients import Client
from ..existence import shards_of
from ..registry import KINDS, mismatch, recorded
from .found import not_found
from .output import NotFound


def cmd_layout(client: Client, args: argparse.Namespace) -> int:
    kind = "dehydrator" if args.dehydrator else "ick"
    label = f"{KINDS[kind]} {args.name!r}"
    count = recorded(client, args.name, kind, label)
    if count is None:
        if shards_of(client, args.name, kind, args.shards) is None:
            raise not_found(client, args, kind)
        raise NotFound(f"{label} has no shard count recorded: no release wrote it")
    if args.shards is not None and args.shards != count:
        raise mismatch(kind, args.name, count, f"--shards {args.shards}")
    if args.rollback_to is not None:
        was = layout.rollback(client, args.name, kind, count, args.rollback_to, label)
        print(
            f"{label}: layout {args.rollback_to} recorded (was {was}): "
            f"{layout.release_of(args.rollback_to)} may run it now"
        )
        return 0
    found = layout.recorded(client, args.name, kind, label)
    report: dict[str, Any] = {"name": args.name, "kind": kind, "layout": found}
    report["release_knows"] = layout.LAYOUT
    if found > layout.LAYOUT:
        report["refused"] = str(layout.newer(args.name, kind, label, found))
    elif found > 1:
        left = layout.blockers(client, args.name, kind, count, label)
        report["rollback_to"] = found - 1
        report["rollback_blocked_by"] = [str(b) for b in left]
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        f"{label}: layout {found} ({layout.release_of(found)}); this release writes "
        f"layout {layout.LAYOUT}"
    )
    if "refused" in report:
        print(report["refused"])
    if "rollback_to" in report:
        to = report["rollback_to"]
        blocked = report["rollback_blocked_by"]
        print(
            f"a rollback to layout {to} ({layout.release_of(to)}) "
            + ("is blocked by:\n  " + "\n  ".join(blocked) if blocked else "is safe now")
        )
    return 0


def add_layout_command(command: Any, commands: Any) -> None:
    """Register ``pyspark-ick layout`` with the parser's ``command`` helper."""
    sub = command(
        commands,
        "layout",
        cmd_layout,
        "the layout version an Ick or dehydrator was written with; whether the release "
        "before could read it; --rollback-to records an older one once nothing would strand",
    )
    sub.add_argument("--dehydrator", action="store_true", help="a dehydrator, not an Ick")
    sub.add_argument("--json", action="store_true", help="JSON output")
    sub.add_argument(
        "--rollback-to",
        type=int,
        default=None,
        metavar="V",
        help="record layout V once nothing is left that its release would strand "
        "(stop the queries first; docs/operations.md)",
    )
