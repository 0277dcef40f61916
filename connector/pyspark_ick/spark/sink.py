"""The Arrow sink of both formats, written once: batch and stream writers, the helper
thread that sends, commit messages and their totals.

A format module validates its options and schema on the driver into a picklable plan (the
``SinkPlan`` protocol) and hands it to ``BatchWriter`` or ``StreamWriter``. In each task,
``write_batches`` converts every Arrow batch on the task's thread (``plan.convert``: bad
rows fail the task before anything of the batch is written) and sends it on a helper
thread (``plan.send``), so the task converts the next batch while Redis works on the last
one (at most two batches in memory). The tasks' commit messages add up, and the writer's
commit logs the total; abort logs what the tasks that finished wrote, how many failed,
and why running the write again is safe.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, astuple, dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..connection import ConnectionSpec
from ..words import plural
from .compat import ARROW_STREAM_WRITER, StreamWriterBase, arrow_from_rows
from .task import start_task

logger = logging.getLogger("pyspark_ick")


C = TypeVar("C", bound="Counts")


@dataclass
class Counts(WriterCommitMessage):
    """A task's commit message: counts that add up field by field; the first is ``rows``
    and the message reads "10 rows: 3 new, 7 already parked" (a field's name, spaced)."""

    rows: int = 0

    def __str__(self) -> str:
        counts = [f"{value} {name.replace('_', ' ')}" for name, value in asdict(self).items()]
        return f"{counts[0]}: {', '.join(counts[1:])}"

    def __add__(self: C, other: C) -> C:
        return type(self)(*map(operator.add, astuple(self), astuple(other)))

    def warning(self) -> str | None:
        """What operators must hear about these counts (a WARNING of the commit), if
        anything."""
        return None


@dataclass(frozen=True)
class Target:
    """Where a sink writes (the head of a format's plan): logical Ick or dehydrator
    ``name`` of ``shards`` shards through ``connection``, ``chunk`` rows per call."""

    connection: ConnectionSpec
    name: str
    shards: int
    chunk: int

    kind: ClassVar[str]  # "Ick", "dehydrator": names the target in logs and errors

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name!r} ({plural(self.shards, 'shard')})"


class SinkPlan(Protocol):
    """What a format gives the sink (a picklable plan, validated on the driver)."""

    @property
    def label(self) -> str:
        """Names the target in logs: "Ick 'q' (4 shards)"."""

    @property
    def replay(self) -> str:
        """Why writing the same rows again (a retried task, a replayed batch) is safe."""

    @property
    def message(self) -> type[Any]:
        """The commit message type: counts that add up, ``message()`` is zero."""

    def convert(self, batch: pa.RecordBatch) -> Any:
        """The batch's rows, checked and converted (IckError naming the column)."""

    def send(self, converted: Any) -> Any:
        """Write one converted batch through this process's client; its commit message."""


def write_batches(plan: SinkPlan, batches: Iterable[pa.RecordBatch]) -> Any:
    """Write every row of ``batches``: one round of bounded calls per Arrow batch, sent
    by a helper thread while this one converts the next batch."""
    start_task()
    done = plan.message()
    with ThreadPoolExecutor(1, thread_name_prefix="pyspark-ick-sender") as sender:
        last: Future[Any] | None = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            sent = sender.submit(plan.send, plan.convert(batch))
            if last is not None:
                done += last.result()
            last = sent
        if last is not None:
            done += last.result()
    return done


def totals(plan: SinkPlan, messages: Sequence[WriterCommitMessage | None]) -> tuple[Any, int]:
    """The sum of the tasks' messages and how many tasks sent none (failed)."""
    total, failed = plan.message(), 0
    for message in messages:
        if isinstance(message, plan.message):
            total += message
        else:
            failed += 1
    return total, failed


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format(...)`` of a validated plan."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self.plan, iterator)  # type: ignore[no-any-return]

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total, _ = totals(self.plan, messages)
        logger.info("wrote to %s in %s: %s", self.plan.label, plural(len(messages), "task"), total)
        if total.warning():
            logger.warning("write to %s: %s", self.plan.label, total.warning())

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total, failed = totals(self.plan, messages)
        logger.warning(
            "write to %s aborted, %d of %d tasks failed; the others wrote %s (%s)",
            self.plan.label,
            failed,
            len(messages),
            total,
            self.plan.replay,
        )


class StreamWriter(StreamWriterBase):  # type: ignore[misc]
    """``df.writeStream.format(...)`` of a validated plan: a micro-batch replayed after a
    failure or a restart from the checkpoint writes the same rows again (``plan.replay``
    says why that is harmless). On pyspark 4.0, which has no streaming Arrow writer, it
    gets Rows and makes Arrow batches of ``schema`` of them (compat.py)."""

    def __init__(self, plan: SinkPlan, schema: StructType) -> None:
        self.plan, self.schema = plan, schema

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        batches = iterator if ARROW_STREAM_WRITER else arrow_from_rows(iterator, self.schema)
        return write_batches(self.plan, batches)  # type: ignore[no-any-return]

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, _ = totals(self.plan, messages)
        logger.info(
            "batch %d wrote to %s in %s: %s",
            batchId,
            self.plan.label,
            plural(len(messages), "task"),
            total,
        )
        if total.warning():
            logger.warning("batch %d to %s: %s", batchId, self.plan.label, total.warning())

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, failed = totals(self.plan, messages)
        logger.warning(
            "batch %d to %s aborted, %d of %d tasks failed; the others wrote %s (%s)",
            batchId,
            self.plan.label,
            failed,
            len(messages),
            total,
            self.plan.replay,
        )
