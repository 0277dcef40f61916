"""Members a consumer failed on: retried later with a backoff that grows with their
attempts, then set aside as dead letters (docs/design.md §11).

An Ick shard keeps, per failed member, an *attempt record* (``attempts`` hash): how many
attempts failed, when the last one did, the score of that delivery and its error. A
member waits for its retry in the ``retry`` sorted set (member -> due ms); a retry that
is due goes back into the pset with that score (lua/_prelude.lua ``release_due``), a
member that succeeds loses its record and any pending retry, and after
``RetryPolicy.max_attempts`` failed attempts it moves to the dead letters (``dead``,
``deadinfo``). The stream reader's sink hands members back per reservation (``hand_back``,
lua/rlog_fail.lua); the commit of that reservation decides their fate in the same call.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import bounds, replication, scripts
from .carry import sweep
from .clients import Client
from .errors import IckConfigError
from .keys import IckKeys
from .values import as_bytes, text

MAX_ERROR_BYTES = 1000
"""The most bytes of an error kept with a failed member (its end is cut)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How failed members are retried (``from pyspark_ick import RetryPolicy``).

    - ``max_attempts`` (25): attempts in all; the last failure makes a dead letter.
    - ``backoff_ms`` (1000): the wait before the first retry; it doubles per attempt.
    - ``backoff_max_ms`` (3,600,000): the longest wait.

    The n-th retry comes ``min(backoff_max_ms, backoff_ms * 2**(n-1))`` ms after the
    failure, a random half of it jitter. Each value is an integer >= 1 (else
    IckConfigError). ``Ick.fail`` and ``ShardedIck.fail`` take one; a Spark stream builds
    its own from the reader's options ``maxAttempts``, ``retryBackoff`` and
    ``retryBackoffMax``."""

    max_attempts: int = 25
    backoff_ms: int = 1000
    backoff_max_ms: int = 3_600_000

    def __post_init__(self) -> None:
        for name in ("max_attempts", "backoff_ms", "backoff_max_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise IckConfigError(f"RetryPolicy.{name} must be an integer >= 1, got {value!r}")

    def arg(self) -> str:
        """The policy as the scripts take it, one ARGV: "<max attempts> <first backoff ms>
        <longest backoff ms> <jitter seed>" (lua/_prelude.lua ``policy_of``)."""
        seed = os.urandom(8).hex()
        return f"{self.max_attempts} {self.backoff_ms} {self.backoff_max_ms} {seed}"


@dataclass(frozen=True)
class AttemptRecord:
    """What an Ick keeps of a member's failed attempts (and of a dead letter)."""

    attempts: int
    failed_at_ms: int
    score: float
    error: str

    @classmethod
    def parse(cls, raw: Any) -> AttemptRecord:
        """A record as Redis holds it: ``"<attempts> <failed_at_ms> <score> <error>"``."""
        attempts, failed_at, score, error = text(raw).split(" ", 3)
        return cls(int(attempts), int(failed_at), float(score), error)


def errors_of(failures: Mapping[Any, Any]) -> list[bytes]:
    """``{member: error}`` as the scripts' ARGV: member, error, ... (an error as text,
    ``str(exception)`` for an exception)."""
    out: list[bytes] = []
    for member, error in failures.items():
        if member is None:
            raise IckConfigError("a failed member must not be None")
        out += (as_bytes(member), as_bytes(error if isinstance(error, str | bytes) else str(error)))
    return out


def hand_back(
    client: Client,
    keys: IckKeys,
    reservation: int,
    delivery: int,
    failures: Mapping[Any, Any],
    label: str,
) -> tuple[int, int, int]:
    """Record ``{member: error}`` of open reservation ``reservation`` of the shard of
    ``keys``, failed in ``delivery``, for its commit to retry or bury (lua/rlog_fail.lua),
    in calls of at most ``bounds.ITEMS_PER_CALL`` members. Returns (recorded, not in the
    reservation, late: the reservation was committed, or redelivered since). With
    redis.waitReplicas, returns once the replicas have them (replication.write): the
    commit would take a member whose hand-back a failover lost for processed."""
    flat = errors_of(failures)
    step = 2 * bounds.ITEMS_PER_CALL
    script_keys = [keys.rlog, keys.reservation(reservation), keys.failed]

    def record(c: Client) -> list[int]:
        totals = [0, 0, 0]
        for i in range(0, len(flat), step):
            args = [reservation, delivery, MAX_ERROR_BYTES, *flat[i : i + step]]
            reply = scripts.run(c, "rlog_fail", script_keys, args, what=label)
            totals = [t + int(r) for t, r in zip(totals, reply, strict=True)]
        return totals

    recorded, stray, late = replication.write(client, record, what=label)  # one WAIT
    return recorded, stray, late


def group_failures(
    rows: Iterable[tuple[Any, int, int, int, Any]],
) -> dict[tuple[int, int, int], dict[Any, Any]]:
    """``(member, shard, reservation, delivery, error)`` rows grouped for ``hand_back``:
    ``{(shard, reservation, delivery): {member: error}}``."""
    groups: dict[tuple[int, int, int], dict[Any, Any]] = {}
    for member, shard, reservation, delivery, error in rows:
        groups.setdefault((int(shard), int(reservation), int(delivery)), {})[member] = error
    return groups


@dataclass(frozen=True)
class Released:
    """What ``release_due`` did on a logical Ick: retries due moved into the queue, and
    pending retries dropped because their member is queued or reserved already."""

    released: int
    dropped: int
    calls: int


def release_due(
    client: Client, keys: Iterable[IckKeys], label: str, now_ms: int | None = None
) -> Released:
    """Move the due retries of every shard of ``keys`` into its queue and drop the pending
    retries of members queued or reserved meanwhile (lua/retry_due.lua), in calls of at most
    ``bounds.ITEMS_PER_CALL`` members (half moved, half looked at): what Python's reserve
    does before it reserves, for consumers that do not (the redis-ick gem). ``keys``: every
    shard, in order. A retry (or attempt record) that a reshard before this release left
    in a shard that is not its member's is carried to its member's shard first (carry.py),
    so each is released there only. ``now_ms``: a test clock."""
    step = bounds.ITEMS_PER_CALL // 2
    released = dropped = calls = 0
    shards = list(keys)
    masters = [shard.master for shard in shards]
    for master in masters:
        sweep(client, master, masters, label, ("retry", "attempts"))
    for shard in shards:
        start = 0
        while True:
            args = [step, "" if now_ms is None else now_ms, start]
            moved, gone, start = map(
                int,
                scripts.run(
                    client,
                    "retry_due",
                    [*shard.base, shard.retry, shard.attempts],
                    args,
                    what=label,
                ),
            )
            released, dropped, calls = released + moved, dropped + gone, calls + 1
            if start < 0 and moved < step:
                break
            start = max(start, 0)
    return Released(released, dropped, calls)
