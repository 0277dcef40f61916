"""pyspark-ick: the operator's command line for Icks and dehydrators.

    pyspark-ick stats NAME [--shards N] [--watch [SECONDS]] [--json]
    pyspark-ick add NAME MEMBER [MEMBER ...] [--score S] [--shards N]
    pyspark-ick peek NAME [--shards N] [-n 10] [--json]
    pyspark-ick del NAME [--shards N] [--yes]
    pyspark-ick metrics --port PORT [--bind ADDRESS]
    pyspark-ick dehydrator look|ttn|push|pull NAME ...

Connection: ``--url`` or ``REDIS_URL`` (default ``redis://localhost:6379/0``; ``rediss://``
for TLS, with ``?ssl_ca_certs=/path/ca.crt`` for a private CA; ``redis+sentinel://h1,h2/SERVICE``
for the primary that Sentinel names), ``--cluster``. Without
``--shards`` the count recorded in Redis is used. Exit codes: 0 done, 1 error (one line on
stderr, never a traceback or a password), 2 bad usage, 3 not found (or deletion declined).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from .clients import Client
from .connection import DEFAULT_URL, connect, redact
from .errors import IckConfigError, IckError
from .keys import MAX_SHARDS, check_name, check_shards
from .observe import peek, server_time, stats
from .options import parse_duration_ms
from .redis_errors import translate
from .registry import shards_to_use
from .sharded import ShardedIck
from .urls import secrets
from .values import text

EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND = 1, 2, 3


class NotFound(Exception):
    """Nothing to show or do: printed on stderr, exit code 3."""


# --- output -------------------------------------------------------------------------------


def _rich() -> Any:
    """The rich package (extra ``cli``), or a one-line error that names the extra."""
    try:
        import rich.console
        import rich.live
        import rich.table
    except ModuleNotFoundError:
        raise IckError(
            "tables need the rich package: pip install 'pyspark-ick[cli]' (or use --json)"
        ) from None
    return rich


def console() -> Any:
    return _rich().console.Console(highlight=False)


def fmt_score(score: float | None) -> str:
    if score is None:
        return "-"
    return f"{score:.3f}".rstrip("0").rstrip(".")


def fmt_age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
    return f"{hours // 24}d{hours % 24:02d}h"


def fmt_count(value: int | None) -> str:
    return "-" if value is None else str(value)


def fmt_lease(row: dict[str, Any]) -> str:
    owner = row["lease_owner"]
    if not owner:
        return "-"
    expires = row["lease_expires_in_ms"]
    return owner if expires is None else f"{owner} ({expires / 1000:.1f}s)"


def stats_table(report: dict[str, Any]) -> Any:
    Table = _rich().table.Table
    shards = report["shards"]
    table = Table(title=f"Ick {report['name']} ({shards} shard{'s' if shards > 1 else ''})")
    for column in (
        "shard",
        "key",
        "queued",
        "reserved",
        "open res.",
        "oldest score",
        "age",
        "lease owner",
    ):
        table.add_column(
            column, justify="right" if column not in ("key", "lease owner") else "left"
        )
    for row in report["rows"]:
        if not row["exists"]:
            table.add_row(str(row["shard"]), row["key"], "-", "-", "-", "-", "-", "-", style="dim")
            continue
        table.add_row(
            str(row["shard"]),
            row["key"],
            str(row["queued"]),
            str(row["reserved"]),
            fmt_count(row["open_reservations"]),
            fmt_score(row["oldest_score"]),
            fmt_age(row["age_s"]),
            fmt_lease(row),
        )
    table.add_section()
    t = report["totals"]
    table.add_row(
        "total",
        "",
        str(t["queued"]),
        str(t["reserved"]),
        fmt_count(t["open_reservations"]),
        fmt_score(t["oldest_score"]),
        fmt_age(t["age_s"]),
        "",
        style="bold",
    )
    return table


def peek_tables(found: dict[str, list[tuple[str, float, int]]]) -> list[Any]:
    Table = _rich().table.Table
    tables = []
    for part, rows in found.items():
        table = Table(title=f"{part}: lowest scores")
        for column in ("member", "score", "shard"):
            table.add_column(column, justify="left" if column == "member" else "right")
        for member, score, shard in rows:
            table.add_row(member, fmt_score(score), str(shard))
        tables.append(table)
    return tables


def watch(show: Callable[[], Any], interval: float, json_lines: bool) -> int:
    """Show ``show()`` every ``interval`` seconds until Ctrl-C (in place on a terminal)."""
    out = None if json_lines else console()
    try:
        if out is not None and out.is_terminal:
            with _rich().live.Live(show(), console=out, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(show(), refresh=True)
        while True:  # a pipe or a log file: one report after the other
            emit(show(), json_lines, out)
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0


def emit(item: Any, as_json: bool, out: Any) -> None:
    if as_json:
        print(json.dumps(item), flush=True)
    else:
        out.print(item)
        sys.stdout.flush()


# --- commands -----------------------------------------------------------------------------


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
    try:
        from .metrics import serve

        server = serve(client, args.port, args.bind)
    except ImportError:
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


def dehydrator(client: Client, args: argparse.Namespace) -> Any:
    from .dehydrator import Dehydrator

    shards = shards_to_use(client, args.name, args.shards, "dehydrator")
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
    dehydrator(client, args).push(args.id, args.element, args.ttl)
    print(f"dehydrator {args.name!r}: pushed {args.id!r}, due in {args.ttl} ms")
    return 0


def cmd_pull(client: Client, args: argparse.Namespace) -> int:
    return show_element(dehydrator(client, args).pull(args.id), args)


# --- argument parsing ---------------------------------------------------------------------


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
    score = score_arg(value)
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
        const="yes",
        default=argparse.SUPPRESS,
        choices=["auto", "yes", "no"],
        help="Redis Cluster: auto (default) detects it; yes or no forces it",
    )
    common.add_argument(
        "--timeout",
        type=seconds_arg,
        default=argparse.SUPPRESS,
        help="socket timeout in seconds (default 5)",
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
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(parent: Any, name: str, run: Any, help: str) -> argparse.ArgumentParser:
        sub = parent.add_parser(name, parents=[common, shards], help=help, description=help)
        sub.set_defaults(run=run)
        return sub

    sub = command(commands, "stats", cmd_stats, "per-shard sizes, oldest score, reservations")
    sub.add_argument("name", type=name_arg, metavar="NAME")
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

    sub = command(commands, "add", cmd_add, "mark members dirty (keeps the lower score)")
    sub.add_argument("name", type=name_arg, metavar="NAME")
    sub.add_argument("members", nargs="+", metavar="MEMBER")
    sub.add_argument(
        "--score",
        type=score_arg,
        default=None,
        help="score of every member (default: Redis server time)",
    )

    sub = command(commands, "peek", cmd_peek, "lowest queued and reserved members (read-only)")
    sub.add_argument("name", type=name_arg, metavar="NAME")
    sub.add_argument("-n", type=positive_int, default=10, help="how many (default 10)")
    sub.add_argument("--json", action="store_true", help="JSON output")

    sub = command(
        commands,
        "metrics",
        cmd_metrics,
        "serve Prometheus metrics of every Ick and dehydrator at /metrics",
    )
    sub.add_argument("--port", type=positive_int, required=True, help="HTTP port")
    sub.add_argument("--bind", default="127.0.0.1", help="address (default 127.0.0.1)")

    sub = command(commands, "del", cmd_del, "delete an Ick, every shard and its bookkeeping")
    sub.add_argument("name", type=name_arg, metavar="NAME")
    sub.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    dh = commands.add_parser(
        "dehydrator",
        parents=[common],
        help="look, ttn, push, pull on a dehydrator",
        description="ReDe's commands on a dehydrator",
    )
    dh_commands = dh.add_subparsers(dest="dh_command", required=True, metavar="COMMAND")
    for name, run, help in (
        ("look", cmd_look, "show the element of ID, leaving it"),
        ("pull", cmd_pull, "remove ID and show its element"),
    ):
        sub = command(dh_commands, name, run, help)
        sub.add_argument("name", type=name_arg, metavar="NAME")
        sub.add_argument("id", metavar="ID")
    sub = command(dh_commands, "ttn", cmd_ttn, "ms to the next release (0: one is due, -1: empty)")
    sub.add_argument("name", type=name_arg, metavar="NAME")
    sub = command(dh_commands, "push", cmd_push, "park ELEMENT under ID until TTL has passed")
    sub.add_argument("name", type=name_arg, metavar="NAME")
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


# --- main ---------------------------------------------------------------------------------


def scrub(message: str, url: str) -> str:
    """``message`` without the password of ``url`` (belt and braces: errors never hold it)."""
    message = message.replace(url, redact(url))
    for value in secrets(url):  # the primary's and the sentinels' passwords
        message = message.replace(value, "***")
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    # errors are one line on stderr: the library's retry warnings stay out of it
    logging.getLogger("pyspark_ick").addHandler(logging.NullHandler())
    url = getattr(args, "url", None) or os.environ.get("REDIS_URL") or DEFAULT_URL
    try:
        client = connect(
            url,
            cluster=getattr(args, "cluster", "auto"),
            timeout=getattr(args, "timeout", 5.0),
            retry_timeout=2.0,
        )
        try:
            return int(args.run(client, args))
        finally:
            client.close()
    except NotFound as exc:
        print(f"pyspark-ick: {scrub(str(exc), url)}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except (IckError, redis.RedisError) as exc:
        if isinstance(exc, redis.RedisError):
            exc = translate(exc)
        print(f"pyspark-ick: error: {scrub(str(exc), url)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
