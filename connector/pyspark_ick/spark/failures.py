"""What a sink does with members it cannot process (docs/design.md §11, README's delivery
semantics): hand them back for a retry later (``retry_later``), or run a batch that keeps
coming back in pieces that isolate a member which kills the Python worker or the
executor (``in_pieces``).

A batch of ``readStream.format("ick")`` carries, per row, its ``shard``, ``reservation``
and ``deliveries``: what a hand-back names, so that the batch's commit, and only the
commit of that delivery, sends each handed-back member to a retry (after a backoff that
grows with its ``attempt``) or, after ``maxAttempts``, to the Ick's dead letters. A crash
before the commit replays the batch as the next delivery: the hand-back is made again or
not, and no attempt is counted twice.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pyarrow as pa

from ..connection import ConnectionSpec
from ..errors import IckConfigError
from ..keys import IckKeys, shard_names
from ..option_table import ICK_STREAM
from ..options import Options
from ..retries import group_failures, hand_back
from ..words import plural
from .ick_reader import retry_policy

logger = logging.getLogger("pyspark_ick.failures")

COLUMNS = ("member", "shard", "reservation", "deliveries")
"""The columns of a stream batch that a hand-back needs (and an error)."""

ROWS_PER_ROUND = 10_000  # rows a task groups and hands back at a time (bounded memory)


@dataclass(frozen=True)
class Target:
    """Where members go back (picklable): logical Ick ``ick`` of ``shards`` shards."""

    connection: ConnectionSpec
    ick: str
    shards: int

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Target:
        """From the options of the stream (``readStream.format("ick")``'s own dict). Its
        retry options are checked, not used: the stream reader's decide, at the commit."""
        o = Options(options, "ick", ICK_STREAM)
        retry_policy(o)
        return cls(o.connection(), o.get("ick"), o.shards())

    def hand_back(self, rows: Iterable[tuple[Any, int, int, int, Any]]) -> list[int]:
        """Hand back ``(member, shard, reservation, deliveries, error)`` rows; returns
        [recorded, not in their reservation, late]."""
        client, totals = self.connection.client(), [0, 0, 0]
        rows = iter(rows)
        while chunk := list(islice(rows, ROWS_PER_ROUND)):
            for (shard, reservation, delivery), failures in group_failures(chunk).items():
                if not 0 <= shard < self.shards:
                    raise IckConfigError(
                        f"Ick {self.ick!r} has {plural(self.shards, 'shard')}; a failed row names "
                        f"shard {shard}: hand back the rows of this Ick's batch"
                    )
                master = shard_names(self.ick, self.shards)[shard]
                done = hand_back(
                    client, IckKeys(master), reservation, delivery, failures, f"Ick {master!r}"
                )
                totals = [t + d for t, d in zip(totals, done, strict=True)]
        return totals


def retry_later(failed: Any, options: Mapping[str, Any], *, error: str = "error") -> list[int]:
    """Hand back the members a sink failed on: each gets a retry after a backoff, or is a
    dead letter after ``maxAttempts`` (decided by the batch's commit).

    ``failed``: rows of the batch (its columns ``member, shard, reservation,
    deliveries``) with the error text in column ``error``: a DataFrame (handed back by
    its tasks), or on the driver an iterable of such Rows or dicts, or of ``(row,
    error)`` pairs. ``options``: the stream's options; it uses ``ick``, ``shards`` (the
    recorded count when left out) and ``redis.*``. Its ``maxAttempts``, ``retryBackoff``
    and ``retryBackoffMax`` are checked but not used: the stream reader's decide, at the
    batch's commit. Call it from ``foreachBatch`` before it returns. Returns [recorded,
    not in their reservation, late] (late: the batch was committed or delivered again
    meanwhile).
    """
    target = Target.of(options)
    if hasattr(failed, "mapInArrow"):  # a DataFrame
        missing = [c for c in (*COLUMNS, error) if c not in failed.columns]
        if missing:
            raise IckConfigError(
                f"retry_later: the failed rows lack column(s) {', '.join(missing)}: keep the "
                f"batch's {', '.join(COLUMNS)} and add the error as column {error!r}"
            )
        counts = (
            failed.select(*COLUMNS, error)
            .mapInArrow(
                lambda batches: _hand_back_batches(target, batches),
                "recorded long, stray long, late long",
            )
            .collect()
        )
        totals = [sum(int(c[i]) for c in counts) for i in range(3)]
    else:
        totals = target.hand_back(_rows(failed, error))
    if totals[1] or totals[2]:
        logger.warning(
            "Ick %r: %d failed member(s) handed back, %d not in the reservation named, %d "
            "late (their batch was committed or delivered again)",
            target.ick,
            totals[0],
            totals[1],
            totals[2],
        )
    return totals


def _hand_back_batches(target: Target, batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
    """mapInArrow's function: hand back every row of the task; one row of counts."""

    def rows() -> Iterator[tuple[Any, int, int, int, Any]]:
        for batch in batches:
            yield from zip(*(batch.column(i).to_pylist() for i in range(5)), strict=True)

    recorded, stray, late = target.hand_back(rows())
    yield pa.RecordBatch.from_pydict(
        {"recorded": [recorded], "stray": [stray], "late": [late]},
        pa.schema([("recorded", pa.int64()), ("stray", pa.int64()), ("late", pa.int64())]),
    )


def _rows(failed: Iterable[Any], error: str) -> Iterator[tuple[Any, int, int, int, Any]]:
    """(member, shard, reservation, deliveries, error) of driver-side failed rows."""
    for item in failed:
        row, why = item if isinstance(item, tuple) and len(item) == 2 else (item, None)
        fields = row.asDict() if hasattr(row, "asDict") else dict(row)
        if why is None:
            why = fields.get(error)
        missing = [c for c in COLUMNS if fields.get(c) is None] + ([error] if why is None else [])
        if missing:
            raise IckConfigError(
                f"retry_later: a failed row lacks {', '.join(missing)}: pass the batch's rows "
                f"({', '.join(COLUMNS)}) with an error"
            )
        yield (
            fields["member"],
            fields["shard"],
            fields["reservation"],
            fields["deliveries"],
            why if isinstance(why, str | bytes) else str(why),
        )


def job_error(exc: BaseException) -> str:
    """What failed a Spark job, in a line: the cause of the task's last failure (a Python
    worker that crashed, an executor lost, the sink's own exception), else the first line
    of the error."""
    text = str(exc)
    cause = re.search(r"most recent failure: Lost task [^)]*\)[^:]*: ([^\n]+)", text)
    line = cause.group(1) if cause else (text.strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {line}"


def in_pieces(
    batch: Any,
    process: Callable[[Any], None],
    options: Mapping[str, Any],
    *,
    pieces: int = 8,
    max_jobs: int = 64,
) -> int:
    """``process(piece)`` over ``batch`` as Spark jobs small enough that a member which
    kills the Python worker or the executor every time is isolated, and handed back
    until it is a dead letter, while the rest of its batch is processed.

    Rows seen for the first time (``deliveries`` and ``attempt`` both 1) run as one job;
    if it fails, they are split into ``pieces`` jobs by a hash of the member. Rows that
    came back (a replay after a crash, or a retry) start split, finer the more often they
    came back. A failing piece is split again while it is the only failing one of its
    split (the mark of one killer, not of a downstream outage), up to ``max_jobs`` jobs in
    all; the pieces that still fail are handed back with their job's error
    (``retry_later``). Returns how many members were handed back.
    """
    from pyspark.sql import functions as F

    if pieces < 2:
        raise IckConfigError(f"in_pieces: pieces must be 2 or more, got {pieces!r}")
    level = F.col("deliveries") + F.col("attempt") - 1
    levels = sorted(r[0] for r in batch.select(level.alias("level")).distinct().collect())
    jobs, handed = [0], [0]

    def run(rows: Any) -> str | None:
        jobs[0] += 1
        try:
            process(batch.where(rows))
        except Exception as exc:  # noqa: BLE001 - the piece is handed back with it
            return job_error(exc)
        return None

    def split(rows: Any, depth: int) -> None:
        piece = F.abs(F.xxhash64("member", F.lit(depth))) % pieces
        sizes = dict(batch.where(rows).groupBy(piece.alias("p")).count().collect())
        failures = []
        for k, size in sorted(sizes.items()):
            part = rows & (piece == k)
            why = run(part)
            if why is not None:
                failures.append((part, size, why))
        if len(failures) == 1 and failures[0][1] > 1 and jobs[0] < max_jobs:
            split(failures[0][0], depth + 1)
            return
        for part, size, why in failures:
            retry_later(batch.where(part).withColumn("error", F.lit(why)), options)
            handed[0] += size

    for n in levels:
        rows = level == n
        if n <= 1:
            why = run(rows)
            if why is not None:
                split(rows, 1)
        else:
            split(rows, n)
    return handed[0]
