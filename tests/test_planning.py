"""The reader's batch planning (spark/planning.py) as pure functions: no Spark session, no
Redis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pyspark_ick.spark.planning import (
    ShardRange,
    ShardRanges,
    backlogged,
    cap,
    group,
    partitions,
    ranges,
    shares,
    split,
    top_ups,
)


def test_shares_split_evenly_and_rotate_the_remainder() -> None:
    assert shares(10, 4) == [3, 3, 2, 2]
    assert shares(10, 4, first=1) == [2, 3, 3, 2]
    assert shares(10, 4, first=3) == [3, 2, 2, 3]
    assert shares(3, 1) == [3]
    assert shares(2, 4) == [1, 1, 0, 0]


@given(st.integers(0, 10_000), st.integers(1, 64), st.integers(0, 63))
def test_shares_add_up_and_differ_by_at_most_one(total: int, shards: int, first: int) -> None:
    split_ = shares(total, shards, first % shards)
    assert sum(split_) == total
    assert max(split_) - min(split_) <= 1


def test_cap_keeps_a_share_within_the_available_now_budget() -> None:
    assert cap(30, None) == 30  # no budget
    assert cap(None, None) is None  # all available, no budget
    assert cap(30, 12) == 12
    assert cap(None, 12) == 12
    assert cap(30, -5) == 0  # an overdrawn budget (re-added members reserved) allows none
    assert cap(30, 0, held=7) == 7  # what the job ahead reserved is budgeted already
    assert cap(5, 0, held=7) == 5


def test_top_ups_hand_the_spare_to_the_shards_that_filled_their_share() -> None:
    assert top_ups(30, [10, 10, 10], [10, 4, 10]) == {0: 13, 2: 13}
    assert top_ups(30, [10, 10, 10], [10, 0, 0]) == {0: 30}
    assert top_ups(30, [10, 10, 10], [10, 10, 10]) == {}  # no spare
    assert top_ups(30, [10, 10, 10], [3, 4, 5]) == {}  # no shard full: nothing more waits
    assert top_ups(31, [11, 10, 10], [11, 0, 10]) == {0: 16, 2: 15}
    assert top_ups(4, [1, 1, 1, 1], [0, 0, 0, 0]) == {}  # empty shards get nothing


def test_backlogged_is_a_full_batch_with_budget_left() -> None:
    assert backlogged([10, 20], 30, None)
    assert not backlogged([10, 19], 30, None)
    assert not backlogged([10, 20], None, None)  # ReadAllAvailable
    assert backlogged([10, 20], 30, [0, 1])
    assert not backlogged([10, 20], 30, [0, -2])  # AvailableNow: all delivered


def test_group_balances_and_never_splits_a_piece() -> None:
    assert group({0: 10, 1: 10, 2: 10, 3: 10}, 100) == [[0, 1, 2, 3]]
    assert group({0: 60, 1: 60, 2: 60, 3: 60}, 100) == [[0, 2], [1, 3]]
    assert group({0: 500, 1: 10, 2: 10}, 100) == [[0], [1], [2]]
    assert group({}, 100) == []


def test_split_cuts_a_big_range_between_reservations_unless_it_folds() -> None:
    whole = ShardRange(2, 10, 20)
    assert split(whole, 100, 30) == [
        ShardRange(2, 10, 13),
        ShardRange(2, 13, 16),
        ShardRange(2, 16, 20),
    ]
    assert split(whole, 100, 30, folds=lambda r: True) == [whole]
    assert split(whole, 50, 30) == [whole]  # one piece's worth: never asks folds
    assert split(ShardRange(0, 5, 7), 1000, 10) == [ShardRange(0, 5, 6), ShardRange(0, 6, 7)]
    asked: list[ShardRange] = []
    split(whole, 59, 30, folds=lambda r: bool(asked.append(r)))
    assert asked == []


def test_ranges_are_the_shards_that_moved() -> None:
    assert ranges({"0": 3, "1": 5, "2": 1}, {"0": 3, "1": 8, "2": 4}, 3) == {
        1: ShardRange(1, 5, 8),
        2: ShardRange(2, 1, 4),
    }
    assert ranges({}, {"1": 2}, 2) == {1: ShardRange(1, 0, 2)}


def test_partitions_group_small_ranges_and_split_big_ones() -> None:
    moved = {0: ShardRange(0, 0, 1), 1: ShardRange(1, 0, 1), 2: ShardRange(2, 0, 10)}
    assert partitions(moved, None, 30) == list(moved.values())  # a replay: sizes unknown
    small = partitions(moved, [10, 10, 10], 30)
    assert small == [ShardRanges((ShardRange(0, 0, 1), ShardRange(1, 0, 1), ShardRange(2, 0, 10)))]
    # shard 2's 90 items in pieces of 27, 27 and 36, the largest alone, a small shard
    # joining each of the others
    assert partitions(moved, [5, 5, 90], 30) == [
        ShardRange(2, 6, 10),
        ShardRanges((ShardRange(0, 0, 1), ShardRange(2, 0, 3))),
        ShardRanges((ShardRange(1, 0, 1), ShardRange(2, 3, 6))),
    ]


@given(
    st.lists(st.integers(1, 50), min_size=1, max_size=8), st.integers(0, 2000), st.integers(1, 200)
)
def test_partitions_cover_every_reservation_once(
    numbers: list[int], extra: int, minimum: int
) -> None:
    moved = {i: ShardRange(i, 7, 7 + n) for i, n in enumerate(numbers)}
    sizes = [n + extra for n in numbers]
    parts = partitions(moved, sizes, minimum)
    pieces = [r for p in parts for r in (p.ranges if isinstance(p, ShardRanges) else (p,))]
    for i, n in enumerate(numbers):
        mine = sorted((r.start, r.end) for r in pieces if r.shard == i)
        assert [a for a, _ in mine] == [7, *[b for _, b in mine][:-1]]
        assert mine[-1][1] == 7 + n
    assert len(parts) <= max(1, sum(sizes) // minimum)
