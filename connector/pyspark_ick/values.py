"""Values on their way to Redis: members, ids and elements as the bytes a script gets, and
back as text; scores, times and sizes checked before anything reaches Redis, with errors
that name the value."""

from __future__ import annotations

from collections.abc import Sequence
from math import isfinite, isnan
from typing import Any

from . import bounds
from .errors import IckConfigError
from .words import plural

Pairs = list[tuple[str, float]]

NUMBERS = frozenset({float, int})  # scores converted by float() in C, no check of each
TEXTS = frozenset({str, bytes})  # members packed as they are (str: UTF-8, surrogate escapes)

MAX_TTL_MS = 2**52
"""The largest delay or due time in ms: due times are doubles of ms, exact up to 2**53
(142,000 years out)."""


def text(value: Any) -> str:
    """A member as ``str`` (Redis replies are bytes unless decode_responses is set); bytes
    that are not UTF-8 surrogate-escaped, so that ``as_bytes`` gives them back."""
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def as_bytes(value: Any) -> bytes:
    """A member, id or element as the bytes a script gets: bytes (bytearray, memoryview:
    Spark's binary values) as they are, anything else its UTF-8 text (surrogate escapes
    round trip with ``text``)."""
    kind = type(value)
    if kind is bytes:
        return value
    if kind is str:
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogateescape")


def plain(values: Sequence[Any]) -> list[Any]:
    """``values`` as str or bytes (``as_bytes`` for other types)."""
    if set(map(type, values)) <= TEXTS:
        return list(values)
    return [v if type(v) in TEXTS else as_bytes(v) for v in values]


def pairs(flat: Sequence[Any]) -> Pairs:
    """``[m1, s1, m2, s2, ...]`` -> ``[(m1, s1), ...]`` with str members, float scores."""
    return list(zip(map(text, flat[::2]), map(float, flat[1::2]), strict=True))


def check_pairs(
    members: Sequence[Any], scores: Sequence[Any]
) -> tuple[list[str | bytes], list[float]]:
    """Members as str or bytes and scores as floats, checked before anything reaches
    Redis: IckConfigError for a None member, or a score that is not a number (a bool is
    not) or is NaN. Infinite scores are kept: ZADD takes them (``inf``, ``-inf``), as the
    gem's ickadd does. Members and scores of the common types are checked in C (map), not
    per pair."""
    if len(members) != len(scores):
        raise IckConfigError(f"{plural(len(members), 'member')} but {plural(len(scores), 'score')}")
    floats: list[float] | None = None
    if set(map(type, scores)) <= NUMBERS:
        try:
            floats = list(map(float, scores))
        except OverflowError:  # an int beyond a double: named below
            floats = None
    if floats is None or any(map(isnan, floats)):
        floats = [score_of(m, s) for m, s in zip(members, scores, strict=True)]
    texts = members if type(members) is list else list(members)
    if not set(map(type, texts)) <= TEXTS:
        texts = [member_of(m) for m in texts]
    return texts, floats


def score_of(member: Any, score: Any) -> float:
    """``score`` as a float; IckConfigError naming ``member`` unless it is a number (not a
    bool: ``True`` is no score) and not NaN."""
    try:
        if isinstance(score, str | bytes | bool):
            raise TypeError(score)
        value = float(score)
        if value != value:
            raise ValueError(score)
    except (TypeError, ValueError, ArithmeticError) as exc:
        why = " (a bool is no score)" if isinstance(score, bool) else ""
        raise IckConfigError(
            f"the score of member {member!r} must be a number (not NaN), got {score!r}{why}"
        ) from exc
    return value


def member_of(member: Any) -> str | bytes:
    """A member as str or bytes (``as_bytes``); IckConfigError for None."""
    if member is None:
        raise IckConfigError("a member must not be None (it would be stored as the text 'None')")
    return member if type(member) in TEXTS else as_bytes(member)


def number_text(value: Any) -> bytes:
    """A finite number as the text the scripts pass on to Redis (``repr`` of the float:
    exact); TypeError or ValueError for anything else."""
    if isinstance(value, str | bytes) or value - value != 0:  # NaN or infinite
        raise ValueError(f"not a finite number: {value!r}")
    return repr(float(value)).encode()


def check_chunk(chunk: Any) -> int:
    """``chunk`` if it is a positive integer, at most ``bounds.ITEMS_PER_CALL``."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise IckConfigError(f"chunk must be a positive integer, got {chunk!r}")
    return min(chunk, bounds.ITEMS_PER_CALL)


def check_times(times: Sequence[Any]) -> list[float]:
    """``times`` (ms) as floats; IckConfigError unless each is a number (not a bool) of at
    most ``MAX_TTL_MS`` in size."""
    if any(isinstance(t, bool) for t in times):
        raise IckConfigError("times must be numbers of milliseconds, got a bool")
    try:
        out = list(map(float, times))
    except (TypeError, ValueError) as exc:
        raise IckConfigError(f"times must be numbers of milliseconds: {exc}") from None
    if not all(map(isfinite, out)) or any(abs(t) > MAX_TTL_MS for t in out):
        raise IckConfigError(
            f"times must be finite numbers of milliseconds of at most {MAX_TTL_MS} "
            "(a double of ms is exact up to there)"
        )
    return out


def check_ttl(ttl_ms: Any, what: str = "ttl_ms") -> int:
    """``ttl_ms`` if it is an integer from 0 to MAX_TTL_MS, else IckConfigError."""
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 0 <= ttl_ms <= MAX_TTL_MS:
        raise IckConfigError(
            f"{what} must be an integer from 0 to {MAX_TTL_MS} (milliseconds), got {ttl_ms!r}"
        )
    return ttl_ms
