"""What the CLI prints: rich tables (extra ``cli``), JSON lines, the watch loop, and
NotFound (exit code 3)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from ..errors import IckError


class NotFound(Exception):
    """Nothing to show or do (or the operator declined): printed on stderr, exit code 3."""


class Declined(NotFound):
    """The operator answered no: nothing was done (exit code 3)."""


def ask(question: str, declined: str) -> None:
    """Ask ``question`` on stderr; NotFound(``declined``) unless the answer is yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise Declined(declined)


def _rich() -> Any:
    """The rich package (extra ``cli``), or a one-line error that names the extra."""
    try:
        import rich.console
        import rich.live
        import rich.table
    except ModuleNotFoundError:
        raise IckError(
            "tables need the rich package (the cli extra): python3 -m pip install rich, or "
            "'.[cli]' in a clone of pyspark-ick (or use --json)"
        ) from None
    return rich


def console() -> Any:
    """A rich console whose closed pipe ends as every other output's (cli.main: 141)."""

    class Console(_rich().console.Console):  # type: ignore[misc]
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return Console(highlight=False)


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


TEXT_COLUMNS = frozenset({"key", "member", "id", "element", "lease", "lease owner", "error"})
"""Columns shown left-aligned (the others are numbers, right-aligned)."""


def table(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    total: Sequence[str] | None = None,
    dimmed: Collection[int] = (),
) -> Any:
    """A rich table of ``rows`` (the rows of index ``dimmed`` dim: shards that do not
    exist) and a bold ``total`` row under a rule."""
    shown = _rich().table.Table(title=title)
    for column in columns:
        shown.add_column(column, justify="left" if column in TEXT_COLUMNS else "right")
    for i, row in enumerate(rows):
        shown.add_row(*row, style="dim" if i in dimmed else None)
    if total is not None:
        shown.add_section()
        shown.add_row(*total, style="bold")
    return shown


def of_shards(kind: str, report: dict[str, Any]) -> str:
    """The title of a per-shard report: "Ick docs (4 shards)"."""
    shards = report["shards"]
    return f"{kind} {report['name']} ({shards} shard{'s' if shards > 1 else ''})"


Column = tuple[str, Callable[[dict[str, Any]], str]]
"""A column of a per-shard report: its heading and how a row (or the totals) shows in it."""


def field(name: str, fmt: Callable[[Any], str] = str) -> Callable[[dict[str, Any]], str]:
    """A report's column showing ``fmt(row[name])`` ("" where the row has no such field)."""
    return lambda row: fmt(row[name]) if name in row else ""


def shard_report(kind: str, report: dict[str, Any], columns: Sequence[Column]) -> Any:
    """A per-shard report as a table: a row per shard (dim when it does not exist), then
    the totals."""

    def cells(row: dict[str, Any]) -> list[str]:
        if not row.get("exists", True):
            return [str(row["shard"]), row["key"], *["-"] * (len(columns) - 2)]
        return [show(row) for _, show in columns]

    missing = [i for i, row in enumerate(report["rows"]) if not row.get("exists", True)]
    total = cells({**report["totals"], "shard": "total"})
    headings = [name for name, _ in columns]
    return table(of_shards(kind, report), headings, map(cells, report["rows"]), total, missing)


def lease_of(row: dict[str, Any]) -> str:
    return fmt_lease(row) if "lease_owner" in row else ""


SHARD = (("shard", field("shard")), ("key", field("key")))
"""The first columns of every per-shard report."""

ICK_STATS: tuple[Column, ...] = (
    *SHARD,
    *((name, field(name)) for name in ("queued", "reserved", "retrying", "dead")),
    ("open res.", field("open_reservations", fmt_count)),
    ("oldest score", field("oldest_score", fmt_score)),
    ("age", field("age_s", fmt_age)),
    ("lease owner", lease_of),
)


def stats_table(report: dict[str, Any]) -> Any:
    return shard_report("Ick", report, ICK_STATS)


def peek_tables(found: dict[str, list[tuple[str, float, int]]]) -> list[Any]:
    return [
        table(
            f"{part}: lowest scores",
            ("member", "score", "shard"),
            [(member, fmt_score(score), str(shard)) for member, score, shard in rows],
        )
        for part, rows in found.items()
    ]


def fmt_ms(ms: int) -> str:
    """A wait in ms (-1: nothing)."""
    return "-" if ms < 0 else fmt_age(ms / 1000)


DEHYDRATOR_STATS: tuple[Column, ...] = (
    *SHARD,
    *((name, field(name)) for name in ("parked", "due")),
    ("next due in", field("next_due_ms", fmt_ms)),
    *((name.replace("_", " "), field(name)) for name in ("open_claims", "claimed")),
    ("lease", lease_of),
)


def dehydrator_table(report: dict[str, Any]) -> Any:
    return shard_report("dehydrator", report, DEHYDRATOR_STATS)


def dehydrator_peek_table(name: str, rows: list[tuple[str, int, str, int]]) -> Any:
    def when(due: int) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(due / 1000)) + f".{due % 1000:03d}Z"

    return table(
        f"dehydrator {name}: due first",
        ("id", "due", "element", "shard"),
        [(id, when(due), element, str(shard)) for id, due, element, shard in rows],
    )


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
