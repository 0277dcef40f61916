"""The benchmark harness: time things, compare against a baseline of the same run,
print a table and write JSON to bench/results/<name>.json.

Machines here are shared and drift 1.5-2x within a day, so every figure that matters is a
ratio against a raw-Redis baseline measured in the same run, in alternating rounds
(pairs.py): ``Report.pair`` adds a row with the median ratio and its spread, and the
rounds (each side's values, the order, the load average) go into the JSON.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pairs import Rounds, Spread

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def best_of(
    fn: Callable[[], Any], repeat: int = 3, setup: Callable[[], Any] | None = None
) -> float:
    """The fastest of ``repeat`` timed calls (``setup`` runs untimed before each)."""
    times = []
    for _ in range(repeat):
        if setup:
            setup()
        times.append(timed(fn))
    return min(times)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


@dataclass
class Row:
    name: str
    value: float
    unit: str
    baseline: str | None = None  # name of the row this one is compared with
    ratio: float | None = None  # value / baseline value (throughput: higher is better)
    target: str | None = None  # e.g. ">= 0.85"
    ok: bool | None = None
    spread: dict[str, Any] | None = None  # the ratio's Spread over the rounds (pairs.py)
    rounds: str | None = None  # the name of those rounds in the JSON's "rounds"


@dataclass
class Report:
    """Rows of one benchmark; ``show()`` prints the table and writes the JSON."""

    name: str
    rows: list[Row] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    rounds: list[Rounds] = field(default_factory=list)

    def add(self, name: str, value: float, unit: str) -> Row:
        row = Row(name, value, unit)
        self.rows.append(row)
        return row

    def compare(
        self,
        name: str,
        value: float,
        unit: str,
        baseline: str,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> Row:
        """A row with its ratio to row ``baseline``; ``minimum``/``maximum`` bound the ratio."""
        base = next(r for r in self.rows if r.name == baseline)
        row = self.add(name, value, unit)
        row.baseline = baseline
        row.ratio = value / base.value if base.value else float("nan")
        if minimum is not None:
            row.target, row.ok = f">= {minimum}", row.ratio >= minimum
        if maximum is not None:
            row.target, row.ok = f"<= {maximum}", row.ratio <= maximum
        return row

    def pair(
        self,
        name: str,
        value: float,
        unit: str,
        baseline: str,
        rounds: Rounds,
        ratio: Spread,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> Row:
        """A row whose ratio is the median of ``ratio`` over ``rounds`` (pairs.py), with its
        spread; the target holds for the median (``ok``)."""
        if rounds not in self.rounds:
            self.rounds.append(rounds)
        row = self.add(name, value, unit)
        row.baseline, row.ratio = baseline, ratio.median
        row.spread, row.rounds = ratio.json(), rounds.name
        if minimum is not None:
            row.target, row.ok = f">= {minimum}", ratio.median >= minimum
        if maximum is not None:
            row.target, row.ok = f"<= {maximum}", ratio.median <= maximum
        return row

    def show(self) -> Path:
        width = max(len(r.name) for r in self.rows) if self.rows else 10
        print(f"\n== {self.name} ==")
        print(f"{'what':<{width}}  {'value':>14}  {'unit':<10}  {'ratio':>7}  target")
        for r in self.rows:
            ratio = f"{r.ratio:7.3f}" if r.ratio is not None else " " * 7
            mark = "" if r.ok is None else ("ok" if r.ok else "MISSED")
            print(
                f"{r.name:<{width}}  {r.value:>14,.3f}  {r.unit:<10}  {ratio}  "
                f"{r.target or ''} {mark}"
            )
            if r.spread:
                print(f"{'':<{width}}    ratio over {r.spread['rounds']} rounds: {spread_text(r)}")
        for rounds in self.rounds:
            print(rounds.table())
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"{self.name}.json"
        path.write_text(
            json.dumps(
                {
                    "name": self.name,
                    "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                    "python": sys.version.split()[0],
                    "command": " ".join(["python", *sys.argv]),
                    "machine": platform.machine(),
                    "cpus": os.cpu_count(),
                    "params": self.params,
                    "rows": [asdict(r) for r in self.rows],
                    "rounds": [r.json() for r in self.rounds],
                },
                indent=2,
            )
        )
        print(f"(written to {path})")
        return path


def median(values: list[float]) -> float:
    return statistics.median(values)


def spread_text(row: Row) -> str:
    """``median [q1-q3] (min-max)`` of a pair row's ratio."""
    s = row.spread or {}
    return f"{s['median']:.3f} [{s['q1']:.3f}-{s['q3']:.3f}] ({s['min']:.3f}-{s['max']:.3f})"
