"""Plots as inline SVG drawn on the server (no script, no CDN): a line over the last hour
and the bars of a histogram. Only numbers reach the SVG; titles go through the
templates' autoescape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .history import HOUR_S


class Line(NamedTuple):
    """A line plot: its size, polyline points ("x,y x,y ..."), how many, the latest and
    highest values (None: no sample), and the seconds its x axis spans."""

    width: int
    height: int
    points: str
    samples: int
    latest: float | None
    peak: float | None
    span_s: float


def line(
    series: Sequence[tuple[float, float | None]], now: float, width: int = 240, height: int = 48
) -> Line:
    """The values of ``series`` ((time s, value or None), oldest first) up to ``now``,
    over the last hour or since the first sample if later: x is time, y from 0 to the
    highest value; a None leaves a gap."""
    shown = [(t, v) for t, v in series if t >= now - HOUR_S]
    values = [v for _, v in shown if v is not None]
    if not values:
        return Line(width, height, "", 0, None, None, 0.0)
    start = max(now - HOUR_S, shown[0][0])
    span = max(now - start, 1.0)
    peak = max(max(values), 1e-9)
    pad = 2
    coords = []
    for t, v in shown:
        if v is None:
            continue
        x = pad + (t - start) / span * (width - 2 * pad)
        y = height - pad - v / peak * (height - 2 * pad)
        coords.append(f"{x:.1f},{y:.1f}")
    return Line(width, height, " ".join(coords), len(coords), values[-1], max(values), span)


class Bar(NamedTuple):
    x: float
    y: float
    width: float
    height: float
    value: int


def bars(counts: Sequence[int], width: int = 520, height: int = 120) -> list[Bar]:
    """One bar per count, heights relative to the largest."""
    if not counts:
        return []
    top = max(max(counts), 1)
    step = width / len(counts)
    out = []
    for k, count in enumerate(counts):
        tall = count / top * (height - 4)
        out.append(Bar(k * step + 1, height - tall, step - 2, tall, count))
    return out
