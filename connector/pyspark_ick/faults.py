"""Test-only fault hook: kill the process (or a whole process group) at a named point.

``fault(point)`` does nothing unless the environment variable ``PYSPARK_ICK_FAULT`` equals
``point``. Then, on the Nth hit (``PYSPARK_ICK_FAULT_AFTER``, default 1; hits are counted
in the file ``PYSPARK_ICK_FAULT_COUNTER`` when set, so Spark's Python workers share one
count, else per process), it sends SIGKILL to process group ``PYSPARK_ICK_FAULT_KILL``
when set (a crash test's child makes itself a group leader, so its JVM and every Python
worker die at once, like ``kill -9`` of the driver) and then calls ``os._exit(137)``.

Points of the streaming readers: ``after_reserve`` (reserved, before Spark writes the
offset log), ``before_read`` (offset log written, planning the batch), ``during_read``
(after the first RecordBatch of a partition), ``before_commit`` (Spark wrote the commit
log and calls the source's commit). Points inside Spark (after the sink ran, before the
commit log) are hit from the test's own foreachBatch.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_hits: Counter[str] = Counter()


def fault(point: str) -> None:
    """Crash here if the environment asks for it (see the module docstring)."""
    if os.environ.get("PYSPARK_ICK_FAULT") != point:
        return
    counter = os.environ.get("PYSPARK_ICK_FAULT_COUNTER")
    if counter:
        with open(counter, "ab") as f:
            f.write(b".")
        hits = os.path.getsize(counter)
    else:
        _hits[point] += 1
        hits = _hits[point]
    if hits < int(os.environ.get("PYSPARK_ICK_FAULT_AFTER", "1")):
        return
    group = os.environ.get("PYSPARK_ICK_FAULT_KILL")
    if group:
        os.killpg(int(group), signal.SIGKILL)
    os._exit(137)
