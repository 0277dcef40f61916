"""--poison SHARE: which members the consumer's sink fails on (seeded, by a hash of the
member), and the sink's verdict on a batch's rows.

A member is *poison* when its hash falls below SHARE: the sink fails on it at every
attempt, so it ends a dead letter after ``maxAttempts``. It is *flaky* when its hash falls
in the next 2 x SHARE: the sink fails on it at its first attempt only (it succeeds on the
retry). Any other member never fails. The checker (nemesis.fates) uses ``is_poison`` too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

ERROR = "nemesis poison: the sink refuses {member} at attempt {attempt}"


def share_of(seed: int, member: str) -> float:
    """The member's hash as a number in [0, 1), the same in every process."""
    digest = hashlib.sha1(f"{seed}:{member}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_poison(seed: int, share: float, member: str) -> bool:
    return share_of(seed, member) < share


def is_flaky(seed: int, share: float, member: str) -> bool:
    return share <= share_of(seed, member) < 3 * share


def refusal(seed: int, share: float, member: str, attempt: int) -> str | None:
    """The sink's error for ``member`` at ``attempt``, or None when it processes it."""
    if is_poison(seed, share, member) or (attempt == 1 and is_flaky(seed, share, member)):
        return ERROR.format(member=member, attempt=attempt)
    return None


def failures(seed: int, share: float, rows: Iterable[Any]) -> list[tuple[Any, str]]:
    """``(row, error)`` of the batch rows (``member``, ``attempt``) the sink fails on: what
    ``pyspark_ick.spark.retry_later`` takes on the driver."""
    found = []
    for row in rows:
        error = refusal(seed, share, row.member, row.attempt)
        if error is not None:
            found.append((row, error))
    return found
