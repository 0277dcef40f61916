"""Carrying a member's retry, attempt record and dead letter from the shard that holds them
to its own shard (``shard_of`` under the count): what a reshard does for every member
whose shard changes, and what re-drive and retry-due do for strays, the retries and dead
letters that a reshard before this release left in a shard that is not their member's.

Each page is read (lua/ick_fates.lua), copied into the member's shard (lua/ick_carry.lua,
folding with what it holds: the earlier retry, the record with more attempts, the dead
letter already there) and removed where it was, as it was read (lua/ick_carried.lua). A
crash between the copy and the removal leaves a copy, which the next carry folds: a
member's state is in one shard at the end, never lost. Every call is bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, TypeVar

from . import bounds, scripts
from .clients import Client
from .keys import IckKeys, shard_of
from .packing import pack_values
from .values import as_bytes

T = TypeVar("T")

PER_CALL = bounds.ITEMS_PER_CALL // 4
"""Members one read, copy or removal names: each may hold two records of up to a 1,000
byte error, as a re-drive call (dead_letters.PER_CALL)."""

PARTS = ("retry", "attempts", "dead", "deadinfo")
"""The keys of a shard that hold a member's state besides its queue (keys.IckKeys)."""

Caller = Callable[[str, int, Callable[[], Any]], Any]
"""Runs one bounded call: (script, members it names, the call); reshard.py times them."""


def direct(what: str, items: int, fn: Callable[[], T]) -> T:
    """A Caller that only runs the call."""
    return fn()


def carry(
    client: Client,
    source: IckKeys,
    target: IckKeys,
    members: Sequence[Any],
    label: str,
    call: Caller = direct,
) -> int:
    """Move what shard ``source`` keeps of ``members`` (retry, attempt record, dead letter)
    into shard ``target``; returns how many members had something moved."""
    moved = 0
    for first in range(0, len(members), PER_CALL):
        chunk = [as_bytes(m) for m in members[first : first + PER_CALL]]
        found = call(
            "ick_fates",
            len(chunk),
            partial(scripts.run, client, "ick_fates", list(source.fates), chunk, what=label),
        )
        rows: list[Any] = []
        for k, member in enumerate(chunk):
            held = found[4 * k : 4 * k + 4]
            if any(held):
                rows += [member, *held]
        if not rows:
            continue
        packed = pack_values(rows)
        call(
            "ick_carry",
            len(rows) // 5,
            partial(
                scripts.run,
                client,
                "ick_carry",
                [*target.base, *target.fates],
                [packed],
                what=label,
            ),
        )
        moved += int(
            call(
                "ick_carried",
                len(rows) // 5,
                partial(
                    scripts.run, client, "ick_carried", list(source.fates), [packed], what=label
                ),
            )
        )
    return moved


def strays(
    client: Client, source: str, targets: Sequence[str], parts: Iterable[str], label: str
) -> dict[str, list[bytes]]:
    """The members of shard ``source``'s keys ``parts`` (of PARTS) whose shard among
    ``targets`` (master keys, by index: ``shard_of`` under their count) is another, by that
    master key; read in SCAN pages of at most ``bounds.ITEMS_PER_CALL``."""
    keys, away = IckKeys(source), dict[str, dict[bytes, None]]()
    for part in parts:
        key = getattr(keys, part)
        scan = client.zscan if part in ("retry", "dead") else client.hscan
        cursor: Any = 0
        while True:
            cursor, page = scripts.command(
                client, partial(scan, key, cursor, count=bounds.ITEMS_PER_CALL), what=label
            )
            for member in page if isinstance(page, dict) else (m for m, _ in page):
                home = targets[shard_of(member, len(targets))]
                if home != source:
                    away.setdefault(home, {})[member] = None
            if int(cursor) == 0:
                break
    return {home: list(members) for home, members in away.items()}


def sweep(
    client: Client,
    source: str,
    targets: Sequence[str],
    label: str,
    parts: Iterable[str] = PARTS,
    call: Caller = direct,
) -> int:
    """Carry every stray of shard ``source`` (in its keys ``parts``) to its shard among
    ``targets`` (master keys: keys.shard_names); returns how many members were carried."""
    moved = 0
    for home, members in strays(client, source, targets, tuple(parts), label).items():
        moved += carry(client, IckKeys(source), IckKeys(home), members, label, call)
    return moved
