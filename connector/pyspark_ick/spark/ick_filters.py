"""The filters of a snapshot read of format("ick") that Redis can answer, as a
``Selection``; Spark applies the others (docs/design.md §5).

Pushed: on ``member``, ``=``, ``<=>`` and ``IN`` (a lookup of each member in the shard it
hashes to); on ``shard`` and ``state``, ``=``, ``<=>``, ``IN`` and their negations; on
``score``, ``=``, ``<``, ``<=``, ``>``, ``>=`` (range calls); ``IS NOT NULL`` (and ``IS
NULL``) of any of them, which are never null; Spark hands over a top-level AND as one
filter per operand. Not pushed: anything on ``reservation``, ``LIKE``, ``OR``, ``IN`` on
``score``, a comparison with NaN, a member of the other type than the column's (a string
for ``memberType=binary``, bytes for a string column: Spark casts such a literal itself).
A string member is looked up as its UTF-8 bytes, which is what a string column's
``=`` compares: a Redis member that is not UTF-8 never equals one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from math import inf, isnan
from typing import Any

from ..keys import shard_of
from ..snapshots import Query
from .compat import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
)

STATES = frozenset({"queued", "reserved"})
NEVER_NULL = frozenset({"member", "score", "shard", "state"})


@dataclass(frozen=True)
class Selection:
    """The rows a snapshot read keeps: every constraint is an AND; None: no constraint."""

    members: frozenset[bytes] | None = None
    shards: frozenset[int] | None = None
    states: frozenset[str] = STATES
    low: float = -inf
    high: float = inf
    low_open: bool = False
    high_open: bool = False
    nothing: bool = False  # a pushed filter no row passes (IS NULL of a column never null)

    def empty(self) -> bool:
        """Whether no row can pass."""
        return (
            self.nothing
            or not self.states
            or self.members == frozenset()
            or self.shards == frozenset()
            or self.low > self.high
            or (self.low == self.high and (self.low_open or self.high_open))
        )

    def plan(self, shards: int) -> list[tuple[int, tuple[bytes, ...] | None]]:
        """``(shard, members to look up or None: the whole shard)`` of each shard to read;
        a shard no row of can pass is left out."""
        if self.empty():
            return []
        wanted = [i for i in range(shards) if self.shards is None or i in self.shards]
        if self.members is None:
            return [(i, None) for i in wanted]
        by_shard: dict[int, list[bytes]] = {}
        for member in sorted(self.members):
            by_shard.setdefault(shard_of(member, shards), []).append(member)
        return [(i, tuple(by_shard[i])) for i in wanted if i in by_shard]

    def query(self, members: tuple[bytes, ...] | None, holders: bool) -> Query:
        """What to read of one shard (``members``: of ``plan``)."""
        return Query(
            members=members,
            low=self.low,
            high=self.high,
            low_open=self.low_open,
            high_open=self.high_open,
            queued="queued" in self.states,
            reserved="reserved" in self.states,
            holders=holders,
        )


def push(filters: Iterable[Any], binary: bool, shards: int) -> tuple[Selection, list[Any]]:
    """The selection of the filters Redis can answer, and the others (the same objects:
    Spark wants them back by reference)."""
    selection, rest = Selection(), []
    for f in filters:
        narrowed = narrow(selection, f, binary, shards)
        if narrowed is None:
            rest.append(f)
        else:
            selection = narrowed
    return selection, rest


def narrow(s: Selection, f: Any, binary: bool, shards: int) -> Selection | None:
    """``s`` with filter ``f`` too, or None when Redis cannot answer ``f``."""
    if isinstance(f, Not):
        return _negated(s, f.child, shards)
    column = _column(f)
    if column is None:
        return None
    if isinstance(f, IsNotNull | IsNull):
        if column not in NEVER_NULL:
            return None
        return replace(s, nothing=True) if isinstance(f, IsNull) else s
    if isinstance(f, LessThan | LessThanOrEqual | GreaterThan | GreaterThanOrEqual):
        score = _score(f.value)
        if column != "score" or score is None:
            return None
        if isinstance(f, GreaterThan | GreaterThanOrEqual):
            return _above(s, score, isinstance(f, GreaterThan))
        return _below(s, score, isinstance(f, LessThan))
    values = _values(f)
    if values is None:
        return None
    if column == "member":
        members = _members(values, binary)
        if members is None:
            return None
        return replace(s, members=members if s.members is None else s.members & members)
    if column == "shard":
        numbers = _shards(values)
        if numbers is None:
            return None
        return replace(s, shards=numbers if s.shards is None else s.shards & numbers)
    if column == "state":
        states = _states(values)
        return None if states is None else replace(s, states=s.states & states)
    if column == "score" and isinstance(f, EqualTo | EqualNullSafe):
        score = _score(values[0])
        return None if score is None else _below(_above(s, score, False), score, False)
    return None


def _column(f: Any) -> str | None:
    attribute = getattr(f, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1:
        return None
    return str(attribute[0]).lower()


def _values(f: Any) -> list[Any] | None:
    """The values of ``=``, ``<=>`` or ``IN`` (a null in an ``IN`` list matches nothing),
    or None for another filter or a null ``=``."""
    if isinstance(f, In):
        return [v for v in f.value if v is not None]
    if isinstance(f, EqualTo | EqualNullSafe) and f.value is not None:
        return [f.value]
    return None


def _negated(s: Selection, child: Any, shards: int) -> Selection | None:
    """``s`` with ``NOT child``: pushed for ``=`` and ``IN`` of ``shard`` and ``state``."""
    column = _column(child)
    if not isinstance(child, EqualTo | In) or column not in ("shard", "state"):
        return None
    values = list(child.value) if isinstance(child, In) else [child.value]
    if None in values:  # NOT (x IN (.., NULL)) is never true
        return None
    if column == "state":
        states = _states(values)
        return None if states is None else replace(s, states=s.states - states)
    numbers = _shards(values)
    if numbers is None:
        return None
    kept = frozenset(range(shards)) - numbers
    return replace(s, shards=kept if s.shards is None else s.shards & kept)


def _members(values: list[Any], binary: bool) -> frozenset[bytes] | None:
    out = set()
    for v in values:
        if binary and isinstance(v, bytes | bytearray):
            out.add(bytes(v))
        elif not binary and isinstance(v, str):
            try:
                out.add(v.encode("utf-8"))
            except UnicodeEncodeError:  # a lone surrogate: Spark compares, not Redis
                return None
        else:
            return None
    return frozenset(out)


def _shards(values: list[Any]) -> frozenset[int] | None:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return frozenset(values)


def _states(values: list[Any]) -> frozenset[str] | None:
    if not all(isinstance(v, str) for v in values):
        return None
    return frozenset(values) & STATES


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or isnan(value):
        return None
    return float(value)


def _above(s: Selection, score: float, opened: bool) -> Selection:
    """``s`` with ``score > score`` (``opened``) or ``>=``."""
    if score > s.low or (score == s.low and opened):
        return replace(s, low=score, low_open=opened)
    return s


def _below(s: Selection, score: float, opened: bool) -> Selection:
    """``s`` with ``score < score`` (``opened``) or ``<=``."""
    if score < s.high or (score == s.high and opened):
        return replace(s, high=score, high_open=opened)
    return s
