"""How the stream reader plans a micro-batch, as pure functions (no Spark session, no
Redis): each shard's share of a read limit, rotated per batch; that share within the
Trigger.AvailableNow budget; what full shards get of the spare others left; whether a
backlog drains; and the batch's partitions: shards' ranges of reservations, a big range
split between reservations, grouped into tasks of at least ``min_per_partition`` items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from pyspark.sql.datasource import InputPartition


@dataclass(frozen=True)
class ShardRange(InputPartition):
    """One partition: reservations ``start < r <= end`` of ``shard``."""

    shard: int
    start: int
    end: int


@dataclass(frozen=True)
class ShardRanges(InputPartition):
    """One partition of several shards' ranges, read one after the other."""

    ranges: tuple[ShardRange, ...]


def shares(total: int, shards: int, first: int = 0) -> list[int]:
    """``total`` split over ``shards`` as evenly as possible; the remainder goes to the
    shards from ``first`` on (rotated per batch so no shard is always short)."""
    base, extra = divmod(total, shards)
    return [base + (1 if (i - first) % shards < extra else 0) for i in range(shards)]


def cap(share: int | None, left: int | None, held: int = 0) -> int | None:
    """``share`` (None: all) within a Trigger.AvailableNow budget of ``left`` items
    (None: no budget), ``held`` items of the share being budgeted already."""
    if left is None:
        return share
    room = max(left, 0) + held
    return room if share is None else min(share, room)


def top_ups(max_rows: int, share: Sequence[int], sizes: Sequence[int]) -> dict[int, int]:
    """What the limit's spare (``max_rows`` less the items reserved, ``sizes``) adds to the
    shards that filled their ``share``: the new size to reserve, by shard."""
    spare = max_rows - sum(sizes)
    full = [i for i in range(len(sizes)) if sizes[i] == share[i] and sizes[i] > 0]
    extras = shares(spare, len(full)) if full else []
    return {i: sizes[i] + extra for i, extra in zip(full, extras, strict=True) if extra > 0}


def backlogged(sizes: Sequence[int], max_rows: int | None, budget: Sequence[int] | None) -> bool:
    """Whether a batch of ``sizes`` items per shard was cut by a limit of ``max_rows``
    (None: no limit) with more to deliver (within the AvailableNow ``budget``, if any)."""
    if max_rows is None or sum(sizes) < max_rows:
        return False
    return budget is None or any(b > 0 for b in budget)


def group(sizes: Mapping[int, int], min_per_partition: int) -> list[list[int]]:
    """Pieces (keys of ``sizes``: items each; whole shards or runs of a shard's
    reservations) in ``max(1, total // min_per_partition)`` groups (at most one per piece),
    balanced greedily, largest first."""
    count = max(1, min(len(sizes), sum(sizes.values()) // max(min_per_partition, 1)))
    groups: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for shard in sorted(sizes, key=lambda i: (-sizes[i], i)):
        j = loads.index(min(loads))
        groups[j].append(shard)
        loads[j] += sizes[shard]
    return [sorted(g) for g in groups if g]


def split(
    whole: ShardRange,
    size: int,
    min_per_partition: int,
    folds: Callable[[ShardRange], bool] = lambda _: False,
) -> list[ShardRange]:
    """``whole`` (``size`` items) in consecutive pieces of about ``min_per_partition``
    items, so that one shard's big batch is read by several tasks; whole when ``folds``
    (asked only then): an item of it repeats, and one reader folds the copies."""
    numbers = whole.end - whole.start
    count = min(numbers, size // max(min_per_partition, 1))
    if count < 2 or folds(whole):
        return [whole]
    cuts = [whole.start + numbers * k // count for k in range(count + 1)]
    return [ShardRange(whole.shard, a, b) for a, b in pairwise(cuts)]


def ranges(start: Mapping[str, int], end: Mapping[str, int], shards: int) -> dict[int, ShardRange]:
    """The ranges of the shards whose number moved from ``start`` to ``end``."""
    moved: dict[int, ShardRange] = {}
    for i in range(shards):
        first, last = int(start.get(str(i), 0)), int(end.get(str(i), 0))
        if last > first:
            moved[i] = ShardRange(i, first, last)
    return moved


def partitions(
    moved: Mapping[int, ShardRange],
    sizes: Sequence[int] | None,
    min_per_partition: int,
    folds: Callable[[ShardRange], bool] = lambda _: False,
) -> list[InputPartition]:
    """The partitions of a batch of ranges ``moved``: with the items of each shard's
    range known (``sizes``), split and grouped; unknown (a replay), one per shard."""
    if sizes is None:
        return list(moved.values())
    pieces: list[ShardRange] = []
    weights: dict[int, int] = {}
    for i, whole in moved.items():
        for piece in split(whole, sizes[i], min_per_partition, folds):
            weights[len(pieces)] = sizes[i] * (piece.end - piece.start) // (whole.end - whole.start)
            pieces.append(piece)
    return [
        pieces[g[0]] if len(g) == 1 else ShardRanges(tuple(pieces[j] for j in g))
        for g in group(weights, min_per_partition)
    ]
