"""What every task of the connector does first, in the Python worker that runs it."""

from __future__ import annotations

import gc

_started = False


def start_task() -> None:
    """Once per worker process: move what the worker holds so far (pyspark, pyarrow,
    redis, this package) out of the cyclic garbage collector's reach (``gc.freeze``).

    pyspark's daemon runs ``gc.collect()`` after every task of a reused worker, and
    walking that heap cost about as much as a task's read and Arrow building together
    (docs/sizing.md). Objects made later, by this task or the next, are collected as
    ever; only cyclic garbage present now would stay, once.
    """
    global _started
    if not _started:
        _started = True
        gc.freeze()
