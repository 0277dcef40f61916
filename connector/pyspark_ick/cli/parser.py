"""The CLI's command line: argparse with the connection options before or after the
command, and argument types that say what they expect."""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from .. import __version__
from ..connection import DEFAULT_URL
from ..errors import IckConfigError
from ..keys import MAX_SHARDS, check_name, check_shards
from ..lanes import LANES
from ..listen import port_arg
from ..options import parse_duration_ms
from ..web.command import cmd_web, web_options
from .dead_commands import cmd_dead_count, cmd_dead_list, cmd_dead_purge, cmd_dead_redrive
from .dehydrator_commands import (
    cmd_dh_peek,
    cmd_dh_release,
    cmd_dh_stats,
    cmd_look,
    cmd_pull,
    cmd_push,
    cmd_ttn,
)
from .ick_commands import (
    cmd_add,
    cmd_del,
    cmd_metrics,
    cmd_peek,
    cmd_release,
    cmd_reshard,
    cmd_retry_due,
    cmd_stats,
)
from .layout_commands import add_layout_command


def name_arg(value: str) -> str:
    try:
        return check_name(value)
    except IckConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def shards_arg(value: str) -> int:
    try:
        return check_shards(int(value))
    except (ValueError, IckConfigError):
        raise argparse.ArgumentTypeError(
            f"expected an integer from 1 to {MAX_SHARDS}, got {value!r}"
        ) from None


def positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return int(value)


def score_arg(value: str) -> float:
    """A score: a number, ``inf`` or ``-inf`` (as ZADD and the gem take them), not NaN."""
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if math.isnan(score):
        raise argparse.ArgumentTypeError(f"expected a number, inf or -inf, got {value!r}")
    return score


def seconds_arg(value: str) -> float:
    """A number of seconds above 0 (not inf, not NaN)."""
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not 0 < score < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {value!r}")
    return score


def duration_arg(value: str) -> int:
    ms = parse_duration_ms(value)
    if ms is None:
        raise argparse.ArgumentTypeError(
            f'expected a duration such as "500ms", "30s", "2m" or "1h", got {value!r}'
        )
    return ms


def watched(sub: argparse.ArgumentParser) -> None:
    """``--watch [SECONDS]`` and ``--json`` (a report, again and again)."""
    sub.add_argument(
        "--watch",
        nargs="?",
        type=seconds_arg,
        const=2.0,
        default=None,
        metavar="SECONDS",
        help="refresh every SECONDS (default 2) until Ctrl-C",
    )
    sub.add_argument("--json", action="store_true", help="JSON (one line per refresh)")


def listed(sub: argparse.ArgumentParser) -> None:
    """``-n`` and ``--json`` (the first N of a list)."""
    sub.add_argument("-n", type=positive_int, default=10, help="how many (default 10)")
    sub.add_argument("--json", action="store_true", help="JSON output")


RETRY_TIMEOUT_ENV = "PYSPARK_ICK_RETRY_TIMEOUT"
CLI_RETRY_TIMEOUT = 2.0
"""Seconds the CLI retries an unanswered Redis by default: an operator waits for it."""


def retry_timeout(args: argparse.Namespace) -> float:
    """``--retry-timeout``, else ``$PYSPARK_ICK_RETRY_TIMEOUT``, else 2 seconds;
    IckConfigError for an environment value that is no number of seconds."""
    given = getattr(args, "retry_timeout", None)
    if given is not None:
        return float(given)
    raw = os.environ.get(RETRY_TIMEOUT_ENV, "").strip()
    if not raw:
        return CLI_RETRY_TIMEOUT
    try:
        return seconds_arg(raw)
    except argparse.ArgumentTypeError as exc:
        raise IckConfigError(f"${RETRY_TIMEOUT_ENV}: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    # Connection options are accepted before or after the command (SUPPRESS keeps a value
    # given before the command from being overwritten by the subcommand's default).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", default=argparse.SUPPRESS, help=f"Redis URL (default: $REDIS_URL or {DEFAULT_URL})"
    )
    common.add_argument(
        "--cluster",
        nargs="?",
        const="true",
        default=argparse.SUPPRESS,
        type=str.lower,
        choices=["auto", "true", "false", "yes", "no"],
        help="Redis Cluster, as option redis.cluster: auto (default) detects it; true or "
        "false forces it (yes and no too)",
    )
    common.add_argument(
        "--timeout",
        type=seconds_arg,
        default=argparse.SUPPRESS,
        help="socket timeout in seconds (default 5)",
    )
    common.add_argument(
        "--retry-timeout",
        type=seconds_arg,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help=f"how long to retry while Redis does not answer (restarting, failing over), as "
        f"option redis.retryTimeout (default: ${RETRY_TIMEOUT_ENV} or {CLI_RETRY_TIMEOUT:g})",
    )
    shards = argparse.ArgumentParser(add_help=False)
    shards.add_argument(
        "--shards",
        type=shards_arg,
        default=None,
        help="shard count (default: the count recorded in Redis, else 1)",
    )

    parser = argparse.ArgumentParser(
        prog="pyspark-ick",
        parents=[common],
        description="Inspect and change Icks (indexing queues) and dehydrators in Redis.",
    )
    parser.add_argument("--version", action="version", version=f"pyspark-ick {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        parent: Any, name: str, run: Any, help: str, named: bool = True
    ) -> argparse.ArgumentParser:
        """A subcommand (with the Ick's or dehydrator's NAME and ``--shards`` unless ``named``
        is false: web and metrics read every name's recorded count)."""
        parents = [common, shards] if named else [common]
        sub = parent.add_parser(name, parents=parents, help=help, description=help)
        sub.set_defaults(run=run)
        if named:
            sub.add_argument("name", type=name_arg, metavar="NAME")
        return sub

    sub = command(commands, "stats", cmd_stats, "per-shard sizes, oldest score, reservations")
    watched(sub)

    sub = command(commands, "add", cmd_add, "mark members dirty (keeps the lower score)")
    sub.add_argument("members", nargs="+", metavar="MEMBER")
    sub.add_argument(
        "--score",
        type=score_arg,
        default=None,
        help="score of every member (default: Redis server time)",
    )
    sub.add_argument(
        "--lane",
        choices=LANES,
        default="live",
        help="backfill: queue them behind every live member (default: live)",
    )

    sub = command(commands, "peek", cmd_peek, "lowest queued and reserved members (read-only)")
    listed(sub)

    sub = command(
        commands,
        "metrics",
        cmd_metrics,
        "serve Prometheus metrics of every Ick and dehydrator at /metrics",
        named=False,
    )
    sub.add_argument("--port", type=port_arg, required=True, help="HTTP port")
    sub.add_argument(
        "--bind", default="127.0.0.1", metavar="ADDRESS", help="address (default 127.0.0.1)"
    )

    sub = command(
        commands,
        "del",
        cmd_del,
        "delete an Ick: every key of every shard (queue, reservations, retries, dead "
        "letters, leases), its recorded shard count and layout, its registry entry (refused "
        "while a consumer holds a lease)",
    )
    sub.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    sub.add_argument(
        "--force",
        action="store_true",
        help="delete even while a consumer holds a lease (the query goes on, on an empty "
        "Ick; the leases stay)",
    )

    sub = command(
        commands,
        "reshard",
        cmd_reshard,
        "move every member to its shard under a new shard count (stop its queries and the "
        "producers that do not read the recorded count first)",
    )
    sub.add_argument("--to", type=shards_arg, required=True, metavar="N", help="new shard count")
    sub.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    sub = command(
        commands,
        "release",
        cmd_release,
        "hand a dead query's reservations back to the queue and drop its leases",
    )
    sub = command(
        commands,
        "retry-due",
        cmd_retry_due,
        "queue the retries that are due and drop those of members queued or reserved "
        "again, as Python's reserve does (for redis-ick gem consumers; safe on a schedule)",
    )
    sub.add_argument(
        "--every",
        type=seconds_arg,
        default=None,
        metavar="SECONDS",
        help="run again every SECONDS until Ctrl-C",
    )
    add_layout_command(command, commands)

    sub = command(commands, "web", cmd_web, "serve the operator's console", named=False)
    web_options(sub)

    def group(name: str, help: str, description: str) -> Any:
        """A command of commands (``dead list``, ``dehydrator look``)."""
        found = commands.add_parser(name, parents=[common], help=help, description=description)
        return found.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")

    dead_commands = group(
        "dead",
        "an Ick's dead letters: list, count, redrive, purge",
        "The dead letters of an Ick: members set aside after their last attempt",
    )
    sub = command(dead_commands, "list", cmd_dead_list, "the dead letters, oldest first")
    sub.add_argument("-n", type=positive_int, default=20, help="how many (default 20)")
    sub.add_argument(
        "--json",
        action="store_true",
        help='a JSON line per dead letter: {"member", "shard", "attempts", "failed_at_ms", '
        '"dead_at_ms", "score", "error"}',
    )
    sub = command(
        dead_commands, "count", cmd_dead_count, "dead letters and retries waiting, per shard"
    )
    sub.add_argument(
        "--json",
        action="store_true",
        help='one JSON line: {"name", "dead", "retrying", "shards": [{"shard", "dead", '
        '"retrying"}, ...]}',
    )
    for name, run, help in (
        ("redrive", cmd_dead_redrive, "queue dead letters again, attempts from 0 (all or MEMBERs)"),
        ("purge", cmd_dead_purge, "drop dead letters for good (all or MEMBERs; all asks first)"),
    ):
        sub = command(dead_commands, name, run, help)
        sub.add_argument("members", nargs="*", metavar="MEMBER")
    sub.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    dh_commands = group(
        "dehydrator",
        "stats, peek, look, ttn, push, pull, release on a dehydrator",
        "A dehydrator: ReDe's commands, stats, peek and release",
    )
    for name, run, help in (
        ("look", cmd_look, "show the element of ID, leaving it"),
        ("pull", cmd_pull, "remove ID and show its element"),
    ):
        sub = command(dh_commands, name, run, help)
        sub.add_argument("id", metavar="ID")
    sub = command(dh_commands, "ttn", cmd_ttn, "ms to the next release (0: one is due, -1: empty)")
    sub = command(
        dh_commands, "stats", cmd_dh_stats, "per-shard parked, due, next due time, claims, lease"
    )
    watched(sub)
    sub = command(dh_commands, "peek", cmd_dh_peek, "the elements due first (read-only)")
    listed(sub)
    help = "drop a dead query's leases (its open claims stay: the next query delivers them)"
    sub = command(dh_commands, "release", cmd_dh_release, help)
    sub = command(dh_commands, "push", cmd_push, "park ELEMENT under ID until TTL has passed")
    sub.add_argument("id", metavar="ID")
    sub.add_argument("element", metavar="ELEMENT")
    sub.add_argument(
        "--ttl",
        "--delay",
        type=duration_arg,
        required=True,
        help='time until due: "500ms", "30s", "2m", "1h"',
    )
    return parser
