"""The checker of --poison and --writer: every acknowledged add ends processed or a dead
letter, and only poison becomes one (pure functions over the records).

Records, besides nemesis.check's: each sink call's ``failed`` members (handed back with
``retry_later``) and its ``wall`` time (``time.time()`` when its record was written, before
the sink returned); ``dead_letters.jsonl``, the Ick's dead letters read after the drain
(``member, shard, dead_at_ms, attempts, error``; Redis's clock, the same machine's).

An add is *processed* when a sink call delivered its member (from a reservation after
the add's, ending after the ack: I1's rules but the score, since an add that folds into a
member waiting for its retry is delivered with its own score) and did not fail it. It is
*dead-lettered* when such a call failed it, the member is a dead letter after the drain,
and it became one after the member's last failed delivery (so no later add of it waits
in a retry that was dropped). A dead letter of a member that is not poison, one without
an error, or one with fewer attempts than ``maxAttempts`` fails the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from math import inf
from typing import Any, NamedTuple

from nemesis.check import Add, Delivery, covering


class DeadLetter(NamedTuple):
    member: str
    shard: int
    dead_at_ms: int
    attempts: int
    error: str


def dead_letter_of(record: dict[str, Any]) -> DeadLetter:
    return DeadLetter(
        str(record["member"]),
        int(record["shard"]),
        int(record["dead_at_ms"]),
        int(record["attempts"]),
        str(record["error"]),
    )


def split(deliveries: Iterable[Delivery]) -> tuple[list[Delivery], list[Delivery]]:
    """Each sink call as (its processed rows, its failed rows)."""
    done, failed = [], []
    for d in deliveries:
        bad = set(d.failed)
        done.append(d._replace(rows=[r for r in d.rows if r[0] not in bad]))
        failed.append(d._replace(rows=[r for r in d.rows if r[0] in bad]))
    return done, failed


def fates(
    adds: Sequence[Add],
    deliveries: Sequence[Delivery],
    dead: Sequence[DeadLetter],
    poison: Callable[[str], bool],
    max_attempts: int,
) -> dict[str, Any]:
    """Each kept add processed or dead-lettered; the dead letters poison only, each with
    an error and ``max_attempts`` attempts. ``ok`` when all of that holds."""
    kept = [a for a in adds if a.kept]
    done, failed = split(deliveries)
    processed = covering(kept, done, by_score=False)  # a retry may carry a later add's
    failed_at = covering(kept, failed, by_score=False)  # score (it folded into the retry)
    letters = {d.member: d for d in dead}
    last_failure: dict[str, float] = {}  # member -> wall time of its last failed delivery
    for d in deliveries:
        for member in d.failed:
            last_failure[member] = max(last_failure.get(member, -inf), d.wall)
    buried = {
        m
        for m, letter in letters.items()
        if letter.dead_at_ms / 1000 + 0.01 >= last_failure.get(m, inf)
    }
    lost, by_dead = [], 0
    for add, ok, bad in zip(kept, processed, failed_at, strict=True):
        if ok != inf:
            continue
        if bad != inf and add.member in buried:
            by_dead += 1
        else:
            lost.append(add)
    wrong = [d for d in dead if not poison(d.member)]
    no_error = [d for d in dead if not d.error.strip()]
    few = [d for d in dead if d.attempts != max_attempts]
    poison_done = sorted({r[0] for d in done for r in d.rows if poison(r[0])})
    return {
        "ok": not (lost or wrong or no_error or few or poison_done),
        "adds": len(kept),
        "processed": len(kept) - by_dead - len(lost),
        "dead_lettered": by_dead,
        "lost": len(lost),
        "lost_examples": [a._asdict() for a in lost[:5]],
        "failed_rows": sum(len(d.failed) for d in deliveries),
        "dead_letters": len(dead),
        "dead_good_members": [d.member for d in wrong[:5]],
        "dead_without_error": len(no_error),
        "dead_attempts_not_max": len(few),
        "poison_processed": poison_done[:5],
        "dead_error_example": dead[0].error if dead else None,
    }


# --- --writer -----------------------------------------------------------------------------


def writer_members(rate: int, start: int | None, end: int) -> list[str]:
    """The members of a streaming-writer batch whose rate source read seconds (start,
    end]: ``w<value>`` for the rate source's values ``rate * start`` to ``rate * end - 1``
    (no ramp-up: value n is made at second n / rate)."""
    return [f"w{v}" for v in range(rate * (start or 0), rate * end)]


def writer_adds(
    writes: Iterable[dict[str, Any]], rate: int, shard_of: Callable[[str], int]
) -> tuple[list[Add], list[int]]:
    """The adds of each writer batch the query committed (recorded from its progress, after
    the commit): score = the rate source's value; reservation 0 and ack time 0, since no
    one else adds a ``w`` member (any delivery of it is after its add). Also the batch ids
    whose row count does not match the member function (the checker cannot trust them)."""
    adds: dict[str, Add] = {}
    wrong = []
    for w in writes:
        members = writer_members(rate, w["start"], w["end"])
        if len(members) != w["rows"]:
            wrong.append(int(w["batch"]))
        for m in members:
            adds[m] = Add(m, float(m[1:]), shard_of(m), 0, 0.0)
    return list(adds.values()), wrong
