"""The benchmark pair harness (bench/pairs.py) tells a change from noise: two identical
sides give a median ratio whose spread holds 1.0, a side 2x slower is told apart. The
sides return given timings, as a loaded machine gives them: each round slowed by its own
load (both sides alike: they run back to back), each call by its own jitter. Real timing
is bench/'s (a test that timed CPU loops failed on an idle 2-core machine)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from pairs import MIN_ROUNDS, Spread, run_rounds

ROUNDS = 11  # two identical sides: every round on one side of 1.0 by chance is 2/2**11
LOAD = [1.0, 1.8, 1.1, 2.5, 1.0, 1.3, 3.0, 1.0, 1.2, 1.6, 1.1]  # each round's slowdown
JITTER_A = [1.04, 0.93, 1.12, 0.97, 1.01, 1.09, 0.95, 1.00, 1.15, 0.92, 1.03]
JITTER_B = [0.98, 1.07, 0.94, 1.05, 1.10, 0.96, 1.02, 1.13, 0.99, 1.04, 0.91]


def side(cost: float, jitter: list[float]) -> Callable[[], float]:
    """A side whose call ``i`` takes ``cost`` seconds, slowed by round i's load and its
    own jitter."""
    timings: Iterator[float] = iter(
        [cost * load * noise for load, noise in zip(LOAD, jitter, strict=True)]
    )
    return lambda: next(timings)


def test_identical_sides_give_one_within_the_spread() -> None:
    sides = {"a": side(0.01, JITTER_A), "b": side(0.01, JITTER_B)}
    ratio = run_rounds("same", sides, ROUNDS, verbose=False).ratio("a", "b")
    assert len(ratio.values) == ROUNDS
    assert not ratio.excludes(1.0), ratio.text()
    assert abs(ratio.median - 1.0) <= ratio.max - ratio.min, ratio.text()
    assert 0.9 < ratio.median < 1.1, ratio.text()


def test_a_side_twice_as_slow_is_told_apart() -> None:
    """Though the loads swing 3x, more than the change: each round's ratio cancels them."""
    sides = {"a": side(0.02, JITTER_A), "b": side(0.01, JITTER_B)}
    ratio = run_rounds("slower", sides, ROUNDS, verbose=False).ratio("a", "b")
    assert ratio.excludes(1.0), ratio.text()
    assert 1.8 < ratio.median < 2.2, ratio.text()
    assert max(LOAD) / min(LOAD) > ratio.median  # unpaired timings would overlap


def test_rounds_alternate_and_keep_the_load() -> None:
    rounds = run_rounds("order", {"a": lambda: 1.0, "b": lambda: 2.0}, MIN_ROUNDS, verbose=False)
    assert rounds.orders == [["a", "b"], ["b", "a"]] * 2 + [["a", "b"]]
    assert len(rounds.loads) == MIN_ROUNDS and all(len(load) == 3 for load in rounds.loads)
    assert rounds.ratio("a", "b") == Spread.of([0.5] * MIN_ROUNDS)
    assert rounds.json()["loadavg"][0] == list(rounds.loads[0])


def test_spread_quartiles() -> None:
    spread = Spread.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (spread.median, spread.q1, spread.q3, spread.min, spread.max) == (3, 2, 4, 1, 5)
    assert spread.excludes(0.5) and spread.excludes(5.5) and not spread.excludes(1.0)
    with pytest.raises(ValueError, match="at least one round"):
        Spread.of([])


def test_the_records_page_shows_median_spread_and_load(tmp_path: Path) -> None:
    import json

    import report
    from common import Report

    rounds = run_rounds(
        "pair", {"raw": lambda: 1.0, "ours": lambda: 2.0}, MIN_ROUNDS, verbose=False
    )
    rep = Report("pair_test")
    rep.add("raw", 1.0, "s")
    rep.pair("ours", 2.0, "s", "raw", rounds, rounds.ratio("ours", "raw"), maximum=1.5)
    path = tmp_path / "pair_test.json"
    rows = [{**vars(r)} for r in rep.rows]
    path.write_text(
        json.dumps({"name": rep.name, "rows": rows, "rounds": [rounds.json()], "params": {}})
    )
    page = report.render([path])
    assert "| ours | 2.000 | s | 2.000 | 2.000-2.000 | 2.000-2.000 | <= 1.5 **missed** |" in page
    load = "/".join(f"{x:.2f}" for x in rounds.loads[1])
    assert f"| 2 | reversed | {load} | 1 | 2 |" in page
    # a result no longer on disk keeps its section; the same name is replaced
    old = page.replace("## pair_test", "## pair_gone")
    merged = report.render([path], old)
    assert merged.count("## pair_test") == 1 and merged.count("## pair_gone") == 1
    assert merged.index("## pair_gone") < merged.index("## pair_test")
