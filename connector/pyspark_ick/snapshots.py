"""Non-destructive reads of one Ick shard, the snapshot reader's (docs/design.md §5): all
of it, given members, or a score range, of the pset, the cset or both, with the open
reservation holding each reserved member; in bounded calls (§9), changing nothing.

Paged, not atomic: a member queued or reserved for the whole read appears once; one
reserved during the read appears as queued or as reserved (the pset is read first),
unless it was committed too before the cset was read; adds during the read may show.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial
from math import inf
from typing import Any

from . import bounds, scripts
from .clients import Client
from .ick import Ick
from .keys import IckKeys, check_name
from .reservations import ReservationLog
from .values import text


@dataclass(frozen=True)
class Query:
    """What a read of one shard takes: ``members`` (None: every member), scores from
    ``low`` to ``high`` (``low_open``, ``high_open``: the bound itself excluded), the pset
    (``queued``), the cset (``reserved``), and whether to find the reservation holding
    each reserved member (``holders``)."""

    members: Sequence[bytes] | None = None
    low: float = -inf
    high: float = inf
    low_open: bool = False
    high_open: bool = False
    queued: bool = True
    reserved: bool = True
    holders: bool = True

    @property
    def ranged(self) -> bool:
        """Whether the range leaves any score out."""
        return self.low != -inf or self.high != inf or self.low_open or self.high_open

    def bounds(self) -> tuple[str, str]:
        """The range as ZRANGE BYSCORE takes it: ``("(1.5", "+inf")``."""
        return (
            ("(" if self.low_open else "") + repr(float(self.low)),
            ("(" if self.high_open else "") + repr(float(self.high)),
        )

    def keeps(self, score: float) -> bool:
        """Whether ``score`` is in the range."""
        above = score > self.low if self.low_open else score >= self.low
        return above and (score < self.high if self.high_open else score <= self.high)


def snapshot(
    client: Client, master_key: str, query: Query = Query()
) -> tuple[list[Any], list[Any], dict[str, int]]:
    """(pset flat, cset flat, member -> highest open reservation holding it) of Ick shard
    ``master_key`` as ``query`` selects, each set ``[member, score, ...]`` by score."""
    k = IckKeys(check_name(master_key))
    what = f"Ick {master_key!r}"
    if query.members is not None and not query.members:
        return [], [], {}
    if Ick(client, master_key).stats() is None:  # checks the version flag
        return [], [], {}

    def read(key: str) -> list[Any]:
        if query.members is not None:
            found = scores_of(client, key, query.members, what)
            return by_score({m: s for m, s in found.items() if query.keeps(s)})
        if query.ranged:
            return score_range(client, key, *query.bounds(), what)
        return scan_sorted_set(client, key, what)

    pset = read(k.pset) if query.queued else []
    cset = read(k.cset) if query.reserved else []
    holder = holders(client, master_key, cset[0::2]) if query.holders and cset else {}
    return pset, cset, holder


def by_score(found: dict[Any, float]) -> list[Any]:
    """``[member, score, ...]`` of ``found`` by score, then member."""
    flat: list[Any] = []
    for member, score in sorted(found.items(), key=lambda item: (item[1], item[0])):
        flat += (member, score)
    return flat


def scan_sorted_set(client: Client, key: str, what: str) -> list[Any]:
    """``[member, score, ...]`` of sorted set ``key`` by score, read with ZSCAN pages of
    about ``bounds.ITEMS_PER_CALL`` (each member once)."""
    found: dict[Any, float] = {}
    cursor = 0
    while True:
        cursor, page = scripts.command(
            client, partial(client.zscan, key, cursor, count=bounds.ITEMS_PER_CALL), what=what
        )
        found.update(page)
        if int(cursor) == 0:
            break
    return by_score(found)


def scores_of(client: Client, key: str, members: Sequence[bytes], what: str) -> dict[bytes, float]:
    """member -> score of those of ``members`` that sorted set ``key`` holds: ZMSCORE of
    at most ``bounds.ITEMS_PER_CALL`` members a call."""
    found: dict[bytes, float] = {}
    step = bounds.ITEMS_PER_CALL
    for first in range(0, len(members), step):
        chunk = list(members[first : first + step])
        scores = scripts.command(client, partial(client.zmscore, key, chunk), what=what)
        found.update((m, s) for m, s in zip(chunk, scores, strict=True) if s is not None)
    return found


def score_range(client: Client, key: str, low: str, high: str, what: str) -> list[Any]:
    """``[member, score, ...]`` of sorted set ``key`` with scores from ``low`` to
    ``high`` (ZRANGE BYSCORE's syntax), by score: pages of at most
    ``bounds.ITEMS_PER_CALL`` (lua/ick_range.lua), each starting after the member that
    ended the one before, so members leaving the set meanwhile make no other one skipped."""
    found: dict[Any, float] = {}
    after: list[Any] = []
    while True:
        page = scripts.run(
            client, "ick_range", [key], [low, high, bounds.ITEMS_PER_CALL, *after], what=what
        )
        found.update((page[i], float(page[i + 1])) for i in range(0, len(page), 2))
        if len(page) < 2 * bounds.ITEMS_PER_CALL:
            return by_score(found)
        after = [page[-1], page[-2]]


def holders(client: Client, master_key: str, members: Collection[Any]) -> dict[str, int]:
    """member (as ``text``) -> the highest open reservation holding it, for ``members``.

    Up to ``bounds.ITEMS_PER_CALL`` members, lua/ick_holders.lua looks for them in the
    open manifests and sends back only those it finds; more, and every open manifest is
    read (one LRANGE each: at most ``bounds.MOVES_PER_CALL`` members) and filtered here,
    so both ways answer for ``members`` only."""
    k = IckKeys(master_key)
    what = f"Ick {master_key!r}"
    reserved, committed = ReservationLog(client, master_key).counters()
    found: dict[str, int] = {}
    if len(members) > bounds.ITEMS_PER_CALL:
        wanted_text = {text(member) for member in members}
        for r in range(committed + 1, reserved + 1):
            flat = scripts.command(
                client, partial(client.lrange, k.reservation(r), 0, -1), what=what
            )
            found.update((t, r) for t in map(text, flat[0::2]) if t in wanted_text)
        return found
    number, wanted = committed, list(members)
    while number < reserved:
        last = min(reserved, number + bounds.KEYS_PER_CALL)
        manifests = [k.reservation(r) for r in range(number + 1, last + 1)]
        reply = scripts.run(
            client,
            "ick_holders",
            [k.rlog, *manifests],
            [number, bounds.ITEMS_PER_CALL, *wanted],
            what=what,
        )
        pairs = reply[1]
        found.update((text(pairs[i]), int(pairs[i + 1])) for i in range(0, len(pairs), 2))
        number = int(reply[0])
    return found
