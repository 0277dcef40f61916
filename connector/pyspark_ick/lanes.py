"""The two lanes of an Ick: live work first, the backfill behind it.

A backfill member is queued with its time plus ``BACKFILL_OFFSET``, in the same pset as
live members: every live score (a Unix time in seconds, or a user's own priority below
the offset) sorts before every backfill score, and write-folding (the lower score wins)
serves a member marked dirty in both lanes as live, once. Nothing else marks the lane, so
every command that moves, counts or deletes an Ick's members carries both lanes as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .errors import IckConfigError

Lane = Literal["live", "backfill"]
LANES: tuple[Lane, ...] = ("live", "backfill")

BACKFILL_OFFSET = 1e13
"""Added to a backfill member's time. A time in milliseconds (about 1.8e12 today) stays
below it, and a double near it still resolves a few milliseconds."""


def lane_of(score: float) -> Lane:
    """The lane of a queued score."""
    return "backfill" if score >= BACKFILL_OFFSET else "live"


def backfill_score(time: float) -> float:
    """The score that queues a member dirty since ``time`` in the backfill lane."""
    return time + BACKFILL_OFFSET


def time_of(score: float) -> float:
    """The member's own score (its first-dirty time, for a time score), lane removed."""
    return score - BACKFILL_OFFSET if score >= BACKFILL_OFFSET else score


TIME_MIN, TIME_MAX = 1e9, 1e10
"""A score whose own time lies in [TIME_MIN, TIME_MAX) seconds (2001-09-09 to 2286-11-20)
is a Unix time: the writer's default and a timestamp column give one. Anything else
(a user's own priorities, milliseconds) is not read as a time."""


def is_time(score: float) -> bool:
    """Whether ``score`` (either lane) reads as a Unix time in seconds."""
    return TIME_MIN <= time_of(score) < TIME_MAX


def check_lane(lane: str) -> Lane:
    """``lane`` if it names a lane; IckConfigError naming the choices otherwise."""
    if lane not in LANES:
        raise IckConfigError(f"lane {lane!r} is not one of {' | '.join(LANES)}")
    return lane  # type: ignore[return-value]


def band_error(lane: Lane, score: float, where: str, option: str) -> str | None:
    """Why ``score`` may not be written to ``lane`` (None: it may); ``where`` names the
    column or member, ``option`` the setting that chose the lane.

    A live score may be anything but a finite one at or above the offset, which would be
    read as the backfill's (``+inf`` and ``-inf`` stay: ZADD and the gem take them). A
    backfill score is the member's own: finite, in ``[0, BACKFILL_OFFSET)``.
    """
    if lane == "live":
        if score >= BACKFILL_OFFSET and score != float("inf"):
            return (
                f"{where} has score {score!r}, at or above {BACKFILL_OFFSET:g}: it would be "
                f"read as the backfill lane's. Give the member's own score and set "
                f"{option} to backfill, or a score below {BACKFILL_OFFSET:g}"
            )
        return None
    if not 0 <= score < BACKFILL_OFFSET:
        return (
            f"{where} has score {score!r}: the backfill lane ({option} backfill) takes a "
            f"finite score in [0, {BACKFILL_OFFSET:g}), e.g. a Unix time; this one would not "
            "be read as the backfill's"
        )
    return None


def to_lane(
    scores: Sequence[float], members: Sequence[Any], lane: Lane, option: str
) -> list[float]:
    """``scores`` as queued in ``lane`` (the backfill's moved into its band), every one
    checked first (``band_error``: IckConfigError naming the member and ``option``)."""
    if lane == "live":
        if max(scores, default=0.0) < BACKFILL_OFFSET:
            return list(scores)
    for member, score in zip(members, scores, strict=True):
        error = band_error(lane, score, f"member {member!r}", option)
        if error:
            raise IckConfigError(error)
    return list(scores) if lane == "live" else [s + BACKFILL_OFFSET for s in scores]
