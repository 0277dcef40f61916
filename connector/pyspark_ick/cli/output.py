"""What the CLI prints: rich tables (extra ``cli``), JSON lines, the watch loop, and
NotFound (exit code 3)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from ..errors import IckError
from ..freshness import SLOTS
from ..lanes import is_time, lane_of, time_of
from ..words import plural


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
    """A score: a Unix time (``lanes.is_time``) as UTC text, "(backfill)" after one of the
    backfill lane; any other score as a number."""
    if score is None:
        return "-"
    if is_time(score):
        own = time_of(score)
        shown = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(own)) + "Z"
        return shown + (" (backfill)" if lane_of(score) == "backfill" else "")
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
    return owner if expires is None else f"{owner} (expires in {expires / 1000:.1f}s)"


TEXT_COLUMNS = frozenset({"member", "id", "element", "error"})
"""Columns shown left-aligned (the others are numbers, right-aligned)."""


def table(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    total: Sequence[str] | None = None,
    dimmed: Collection[int] = (),
    caption: str | None = None,
) -> Any:
    """A rich table of ``rows`` (the rows of index ``dimmed`` dim: shards that do not
    exist), a bold ``total`` row under a rule, and a ``caption`` line under it all."""
    shown = _rich().table.Table(title=title, caption=caption, caption_justify="left")
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
    return f"{kind} {report['name']} ({plural(shards, 'shard')})"


Column = tuple[str, Callable[[dict[str, Any]], str]]
"""A column of a per-shard report: its heading and how a row (or the totals) shows in it."""


def field(name: str, fmt: Callable[[Any], str] = str) -> Callable[[dict[str, Any]], str]:
    """A report's column showing ``fmt(row[name])`` ("" where the row has no such field)."""
    return lambda row: fmt(row[name]) if name in row else ""


def leases(report: dict[str, Any]) -> str:
    """The line under a per-shard table: each lease held, by shard (owner, expiry)."""
    held = [f"shard {r['shard']}: {fmt_lease(r)}" for r in report["rows"] if r.get("lease_owner")]
    return "leases: " + ("; ".join(held) if held else "none held")


def shard_report(kind: str, report: dict[str, Any], columns: Sequence[Column]) -> Any:
    """A per-shard report as a table of ``columns`` (the shard first): a row per shard (dim
    when it does not exist), the totals, and the leases on a line under it."""

    def cells(row: dict[str, Any]) -> list[str]:
        if not row.get("exists", True):
            return [str(row["shard"]), *["-"] * (len(columns) - 1)]
        return [show(row) for _, show in columns]

    missing = [i for i, row in enumerate(report["rows"]) if not row.get("exists", True)]
    total = cells({**report["totals"], "shard": "total"})
    headings = [name for name, _ in columns]
    rows = map(cells, report["rows"])
    return table(of_shards(kind, report), headings, rows, total, missing, leases(report))


def fmt_oldest(row: dict[str, Any]) -> str:
    """The oldest score: its age when it is a Unix time of the past, else the score."""
    if row.get("age_s") is not None:
        return fmt_age(row["age_s"])
    return fmt_score(row.get("oldest_score"))


ICK_STATS: tuple[Column, ...] = (
    ("shard", field("shard")),
    *((name, field(name)) for name in ("queued", "reserved", "retrying", "dead")),
    ("open", field("open_reservations", fmt_count)),
    ("oldest", fmt_oldest),
)
"""The columns of ``stats`` (80 columns wide, with room for one more: test_cli)."""


FRESH_STATS: tuple[Column, ...] = (
    ("shard", field("shard")),
    ("committed", field("fresh_count", fmt_count)),
    ("p50", field("fresh_p50_s", fmt_age)),
    ("p99", field("fresh_p99_s", fmt_age)),
    ("live p99", field("live_p99_s", fmt_age)),
    ("untimed", field("untimed", fmt_count)),
)
"""The second table of stats: how long the members committed in the last window waited
(freshness.py), and the members committed with a score that is no time, in all."""


def stats_table(report: dict[str, Any]) -> Any:
    """The Ick's per-shard table; under it, while a backfill waits, each lane's backlog
    and oldest age (the live lane first: what users wait for); then how long the
    members committed in the last window waited (a table of its own, so both fit 80
    columns)."""
    shown: list[Any] = [shard_report("Ick", report, ICK_STATS)]
    lanes = report["totals"].get("lanes")
    if lanes and lanes["backfill"]["queued"]:
        line = "; ".join(
            f"{name}: {lane['queued']} queued, oldest {fmt_age(lane['age_s'])}"
            for name, lane in lanes.items()
        )
        shown.append(f"lanes: {line}")
    return _rich().console.Group(*shown, fresh_table(report))


def fresh_table(report: dict[str, Any]) -> Any:
    """Per shard and in total: members committed in the last window, their waits' p50
    and p99, the live lane's p99, and the untimed members committed in all."""

    def cells(row: dict[str, Any]) -> list[str]:
        if not row.get("exists", True):
            return [str(row["shard"]), *["-"] * (len(FRESH_STATS) - 1)]
        return [show(row) for _, show in FRESH_STATS]

    missing = [i for i, row in enumerate(report["rows"]) if not row.get("exists", True)]
    return table(
        f"{of_shards('Ick', report)}: waits of members committed, last {SLOTS} min",
        [name for name, _ in FRESH_STATS],
        map(cells, report["rows"]),
        cells({**report["totals"], "shard": "total"}),
        missing,
    )


def peek_tables(found: dict[str, list[tuple[str, float, int]]]) -> list[Any]:
    """A table per part (queued, reserved) of its lowest members; "reserved: none" for an
    empty part."""
    return [
        table(
            f"{part}: lowest scores",
            ("member", "score", "shard"),
            [(member, fmt_score(score), str(shard)) for member, score, shard in rows],
        )
        if rows
        else f"{part}: none"
        for part, rows in found.items()
    ]


def fmt_ms(ms: int) -> str:
    """A wait in ms (-1: nothing)."""
    return "-" if ms < 0 else fmt_age(ms / 1000)


DEHYDRATOR_STATS: tuple[Column, ...] = (
    ("shard", field("shard")),
    *((name, field(name)) for name in ("parked", "due")),
    ("next due in", field("next_due_ms", fmt_ms)),
    *((name.replace("_", " "), field(name)) for name in ("open_claims", "claimed")),
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
