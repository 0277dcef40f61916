"""Fault injection of the crash tests: crash at a named point of the streaming protocol.

The product calls ``pyspark_ick.spark.source.protocol_point(point)`` at each point of its
protocol, a no-op unless the environment variable PYSPARK_ICK_HOOK names a function:
``arm(env)`` points it at ``fault`` here, for every Python process Spark starts (the
JVM passes the environment, PYTHONPATH included, to its Python workers).

``fault(point)`` does nothing unless a fault is armed for ``point``: the environment
variable ``PYSPARK_ICK_FAULT`` names it (with ``PYSPARK_ICK_FAULT_AFTER``, default 1, and
``PYSPARK_ICK_FAULT_KILL``), or the file named by ``PYSPARK_ICK_FAULT_FILE`` holds
``point after kill`` (a crash test re-arms it between queries without restarting Spark,
whose Python workers inherit their environment from the JVM). On the Nth hit (counted in
the file ``PYSPARK_ICK_FAULT_COUNTER`` when set, so Spark's Python processes share one
count, else per process) it acts by ``kill``:

- ``exit`` (default): ``os._exit(137)``: the process at the point dies (a Python worker or
  the reader's driver-side process: Spark fails the query).
- ``raise``: raises FaultInjected (for points in the query's own driver process, such as a
  foreachBatch function: the query fails there).
- a process group id: SIGKILL to that group first (a crash test's child makes itself a
  group leader, so the JVM and every Python process die at once, like ``kill -9``).

Points of the stream readers: ``after_reserve`` (reserved, before Spark writes the offset
log), ``before_read`` (offset log written, planning the batch), ``during_read`` (after the
first RecordBatch of a partition), ``before_commit`` (Spark wrote the commit log and
calls the source's commit). Tests hit ``after_sink`` in their own foreachBatch.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any

_hits: Counter[str] = Counter()
HERE = Path(__file__).resolve().parent


def arm(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """``env`` with the product's hook pointing at ``fault`` (module ``faults`` on the
    PYTHONPATH of Spark's Python processes)."""
    path = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env.update(PYTHONPATH=path, PYSPARK_ICK_HOOK="faults:fault")
    return env


class FaultInjected(RuntimeError):
    """Raised by ``fault`` when the armed fault says ``raise``."""


def armed() -> tuple[str, int, str] | None:
    """(point, after, kill) of the armed fault, or None."""
    path = os.environ.get("PYSPARK_ICK_FAULT_FILE")
    if path:
        try:
            with open(path) as f:
                words = f.read().split()
        except FileNotFoundError:
            return None
        if not words:
            return None
        words += ["1", "exit"][len(words) - 1 :]
        return words[0], int(words[1]), words[2]
    point = os.environ.get("PYSPARK_ICK_FAULT")
    if not point:
        return None
    return (
        point,
        int(os.environ.get("PYSPARK_ICK_FAULT_AFTER", "1")),
        os.environ.get("PYSPARK_ICK_FAULT_KILL") or "exit",
    )


def fault(point: str) -> None:
    """Crash here if a fault is armed for ``point`` (see the module docstring)."""
    spec = armed()
    if spec is None or spec[0] != point:
        return
    _, after, kill = spec
    counter = os.environ.get("PYSPARK_ICK_FAULT_COUNTER")
    if counter:
        with open(counter, "ab") as f:
            f.write(b".")
        hits = os.path.getsize(counter)
    else:
        _hits[point] += 1
        hits = _hits[point]
    if hits != after:
        return
    if kill == "raise":
        raise FaultInjected(f"fault injected at {point}")
    if kill != "exit":
        os.killpg(int(kill), signal.SIGKILL)
    os._exit(137)


def run_until_fault(
    start: Callable[[], Any], fault_file: str | Path, counter: str | Path, spec: str, timeout: float
) -> bool:
    """A crash test's cycle: arm ``spec`` (``"point after kill"``) in ``fault_file`` with a
    fresh hit ``counter``, run the query ``start()`` returns until the fault ends it, then
    disarm. False when it ran ``timeout`` seconds without failing (it is stopped); raises
    when the query failed before the fault was hit (that failure is a finding)."""
    Path(counter).write_bytes(b"")
    Path(fault_file).write_text(spec)
    query = start()
    failure: Exception | None = None
    try:
        finished = query.awaitTermination(timeout)
    except Exception as exc:  # noqa: BLE001 - the injected fault failed the query
        finished, failure = True, exc
    Path(fault_file).write_text("")
    if not finished:
        query.stop()
    if failure is not None and Path(counter).stat().st_size < int(spec.split()[1]):
        raise RuntimeError(f"the query failed before fault {spec!r} was hit") from failure
    return bool(finished)


def run_cycles(
    start: Callable[[], Any],
    fault_file: str | Path,
    counter: str | Path,
    specs: Iterable[str],
    timeout: float,
) -> bool:
    """A crash test child's schedule: ``run_until_fault`` for each spec in turn, printing
    ``CYCLE point`` after each and ``FAULTS DONE`` at the end; False (after printing
    ``NOFAULT point``) at the first whose fault did not come within ``timeout`` seconds."""
    for spec in specs:
        point = spec.split()[0]
        if not run_until_fault(start, fault_file, counter, spec, timeout):
            print(f"NOFAULT {point}", flush=True)
            return False
        print(f"CYCLE {point}", flush=True)
    print("FAULTS DONE", flush=True)
    return True


def drain_then_stop(
    query: Any, drain_file: str | Path, empty: Callable[[], bool], timeout: float
) -> int:
    """After the faults: once ``drain_file`` exists (the test stopped producing) and
    ``empty()``, stop ``query`` and print ``DRAINED`` (returns 0); ``FAILED error`` (4)
    when the query dies first, ``NOT DRAINED`` (5) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not query.isActive:
            print(f"FAILED {query.exception()}", flush=True)
            return 4
        if Path(drain_file).exists() and empty():
            query.stop()
            print("DRAINED", flush=True)
            return 0
        time.sleep(0.1)
    print("NOT DRAINED", flush=True)
    return 5
