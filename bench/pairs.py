"""One way to run a benchmark pair: the connector and its baselines in alternating rounds.

A round runs every side once, in the given order in even rounds and reversed in odd ones
(A/B, B/A, ...), so drift and order effects fall on both sides alike. Each round's ratio
is kept; what a benchmark reports is the median ratio over the rounds with its spread
(quartiles and min-max), the 1-minute load average after each round, and whether Redis
had a core of its own (``--own-core``). A change is told from noise when 1.0 (or the
value compared with) lies outside the min-max of the rounds: every round agrees.

    rounds = run_rounds("drain", {"raw": raw_seconds, "ick": ick_seconds}, 5)
    ratio = rounds.ratio("raw", "ick")  # seconds raw / seconds ick: throughput ick / raw
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

MIN_ROUNDS = 5


@dataclass(frozen=True)
class Spread:
    """The median of per-round values with their quartiles and min-max."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        """The spread of ``values`` (at least one)."""
        if not values:
            raise ValueError("a spread needs at least one round")
        ordered = sorted(values)
        if len(ordered) > 1:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(statistics.median(ordered), q1, q3, ordered[0], ordered[-1], tuple(values))

    def excludes(self, value: float = 1.0) -> bool:
        """Whether every round lies on one side of ``value``: a difference, not noise."""
        return value < self.min or value > self.max

    def text(self, fmt: str = ".3f") -> str:
        """``median [q1-q3] (min-max)``."""
        return (
            f"{self.median:{fmt}} [{self.q1:{fmt}}-{self.q3:{fmt}}] "
            f"({self.min:{fmt}}-{self.max:{fmt}})"
        )

    def json(self) -> dict[str, Any]:
        """The spread for a JSON file."""
        return {**asdict(self), "values": list(self.values), "rounds": len(self.values)}


@dataclass
class Rounds:
    """The values every side measured in each round, the order it ran in, the load."""

    name: str
    sides: list[str]
    values: list[dict[str, float]] = field(default_factory=list)
    orders: list[list[str]] = field(default_factory=list)
    loads: list[tuple[float, float, float]] = field(default_factory=list)
    cpus: dict[str, Any] = field(default_factory=dict)  # layout(): Redis's own core or not

    def add(self, values: Mapping[str, float], order: list[str]) -> None:
        """Record one round (the load average is read now)."""
        self.values.append(dict(values))
        self.orders.append(list(order))
        self.loads.append(os.getloadavg())

    def side(self, name: str) -> Spread:
        """The spread of side ``name``'s own values."""
        return Spread.of([v[name] for v in self.values])

    def ratio(self, a: str, b: str) -> Spread:
        """The spread of ``a / b`` per round."""
        return self.ratios(lambda v: v[a] / v[b])

    def ratios(self, fn: Callable[[dict[str, float]], float]) -> Spread:
        """The spread of ``fn(values of a round)`` over the rounds."""
        return Spread.of([fn(v) for v in self.values])

    def json(self) -> dict[str, Any]:
        """The rounds for a JSON file."""
        return {
            "name": self.name,
            "sides": self.sides,
            "values": self.values,
            "orders": self.orders,
            "loadavg": [list(load) for load in self.loads],
            "cpus": self.cpus,
        }

    def table(self) -> str:
        """One line per round: order, load, every side's value."""
        lines = [f"-- rounds of {self.name} --"]
        for i, (values, order, load) in enumerate(
            zip(self.values, self.orders, self.loads, strict=True)
        ):
            sides = "  ".join(f"{s} {values[s]:.4g}" for s in self.sides)
            lines.append(
                f"  {i + 1:>2} {'AB' if order == self.sides else 'BA'} load {load[0]:5.2f}  {sides}"
            )
        return "\n".join(lines)


def run_rounds(
    name: str,
    sides: Mapping[str, Callable[[], float]],
    rounds: int = MIN_ROUNDS,
    cpus: dict[str, Any] | None = None,
    verbose: bool = True,
) -> Rounds:
    """Run every side once per round, forward then reversed in turn; each side returns
    the value it measured (seconds, members/s: the caller's unit)."""
    result = Rounds(name, list(sides), cpus=dict(cpus or {}))
    for i in range(rounds):
        order = list(sides) if i % 2 == 0 else list(reversed(list(sides)))
        values = {side: float(sides[side]()) for side in order}
        result.add(values, order)
        if verbose:
            shown = "  ".join(f"{s} {values[s]:.4g}" for s in result.sides)
            print(
                f"  {name} round {i + 1}/{rounds} ({'/'.join(order)}, load "
                f"{result.loads[-1][0]:.2f}): {shown}",
                flush=True,
            )
    return result


def timed(fn: Callable[[], Any]) -> Callable[[], float]:
    """A side that returns the seconds one call of ``fn`` takes."""

    def side() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return side


def layout(redis_pid: int | None, own: bool) -> dict[str, Any]:
    """With ``own``, give process ``redis_pid`` (our redis-server) the first CPU of this
    process's and move this process (and so the workers and Spark it starts later) to the
    others: the core a production Redis has to itself. Returns what was done."""
    cpus = sorted(os.sched_getaffinity(0))
    if not own:
        return {"own_core": False, "cpus": cpus}
    if redis_pid is None or len(cpus) < 2:
        return {"own_core": False, "cpus": cpus, "left alone": f"pid {redis_pid}, CPUs {cpus}"}
    os.sched_setaffinity(redis_pid, {cpus[0]})
    os.sched_setaffinity(0, set(cpus[1:]))
    return {"own_core": True, "redis-server": [cpus[0]], "the rest": cpus[1:]}


def add_arguments(parser: argparse.ArgumentParser, rounds: int = MIN_ROUNDS) -> None:
    """``--rounds`` and ``--own-core``, as every benchmark pair takes them."""
    parser.add_argument(
        "--rounds",
        type=int,
        default=rounds,
        help=f"alternating rounds of every pair (default {rounds}; at least {MIN_ROUNDS} "
        "for a median with its spread)",
    )
    parser.add_argument(
        "--own-core",
        action="store_true",
        help="redis-server on a CPU of its own, this process and Spark on the others",
    )
