"""The two lanes of an Ick: live work first, the backfill behind it.

A backfill member is queued with its time plus ``BACKFILL_OFFSET``, in the same pset as
live members: every live score (a Unix time in seconds, or a user's own priority below
the offset) sorts before every backfill score, and write-folding (the lower score wins)
serves a member marked dirty in both lanes as live, once. Nothing else marks the lane, so
every command that moves, counts or deletes an Ick's members carries both lanes as it is.
"""

from __future__ import annotations

from typing import Literal

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
