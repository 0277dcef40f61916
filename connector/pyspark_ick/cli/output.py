"""What the CLI prints: rich tables (extra ``cli``), JSON lines, the watch loop, and
NotFound (exit code 3)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from ..errors import IckError


class NotFound(Exception):
    """Nothing to show or do (or the operator declined): printed on stderr, exit code 3."""


def ask(question: str, declined: str) -> None:
    """Ask ``question`` on stderr; NotFound(``declined``) unless the answer is yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise NotFound(declined)


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


def fmt_ms(ms: int) -> str:
    """A wait in ms (-1: nothing)."""
    return "-" if ms < 0 else fmt_age(ms / 1000)


def dehydrator_table(report: dict[str, Any]) -> Any:
    Table = _rich().table.Table
    shards = report["shards"]
    table = Table(title=f"dehydrator {report['name']} ({shards} shard{'s' if shards > 1 else ''})")
    heads = ("shard", "key", "parked", "due", "next due in", "open claims", "claimed", "lease")
    for column in heads:
        table.add_column(column, justify="left" if column in ("key", "lease") else "right")
    for row in report["rows"]:
        table.add_row(
            str(row["shard"]),
            row["key"],
            str(row["parked"]),
            str(row["due"]),
            fmt_ms(row["next_due_ms"]),
            str(row["open_claims"]),
            str(row["claimed"]),
            fmt_lease(row),
        )
    table.add_section()
    t = report["totals"]
    table.add_row(
        "total",
        "",
        str(t["parked"]),
        str(t["due"]),
        fmt_ms(t["next_due_ms"]),
        str(t["open_claims"]),
        str(t["claimed"]),
        "",
        style="bold",
    )
    return table


def dehydrator_peek_table(name: str, rows: list[tuple[str, int, str, int]]) -> Any:
    Table = _rich().table.Table
    table = Table(title=f"dehydrator {name}: due first")
    for column in ("id", "due", "element", "shard"):
        table.add_column(column, justify="right" if column == "shard" else "left")
    for id, due, element, shard in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(due / 1000))
        table.add_row(id, f"{when}.{due % 1000:03d}Z", element, str(shard))
    return table


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
