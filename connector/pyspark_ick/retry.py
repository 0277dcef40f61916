"""Transient Redis errors, retried with exponential backoff and jitter until a deadline.

Redis restarts, fails over, migrates slots and loads its data set: for a while it refuses
or resets connections or answers LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN,
READONLY, MOVED or ASK. ``call`` rides such an outage out for ``redis.retryTimeout``
seconds (per client: ``clients.settings(client).retry_timeout``), then raises the last
error. Which errors are retried is error_kinds.retryable.

A retried call may already have run on the server when its reply was lost (a timeout, a
connection reset). Every script of the connector tolerates that (ickadd keeps the lower
score; a reserve or claim names the log number it expects, and a replay finds the log moved
and is told so; commits are idempotent). The few that remove data and return it in one
phase (poll, pull, xack: ReDe's own semantics) pass ``replay_safe=False``: they are retried
only when the error proves the command never ran.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import TypeVar

from .error_kinds import retryable
from .redis_errors import brief

logger = logging.getLogger("pyspark_ick.retry")

T = TypeVar("T")

FIRST_DELAY = 0.05
MAX_DELAY = 2.0
LAST_ATTEMPT = 0.05  # the least time left worth another attempt

_deadline: ContextVar[float | None] = ContextVar("pyspark_ick_retry_deadline", default=None)


def time_left() -> float | None:
    """Seconds left before the deadline of the retried call this thread is in (None: it
    is in none, or in one that never retries): bounded.py caps a cluster's waits by it."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


@contextmanager
def _until(deadline: float) -> Iterator[None]:
    """Make ``deadline`` this thread's (an enclosing call's earlier one stays)."""
    outer = _deadline.get()
    token = _deadline.set(deadline if outer is None else min(outer, deadline))
    try:
        yield
    finally:
        _deadline.reset(token)


def call(
    fn: Callable[[], T],
    timeout: float,
    *,
    replay_safe: bool = True,
    what: str = "Redis",
    final: Callable[[Exception], bool] | None = None,
    error: Exception | None = None,
    started: float | None = None,
) -> T:
    """``fn()``, retried on transient errors for up to ``timeout`` seconds.

    Backoff: exponential from 50 ms to 2 s, full jitter. With ``replay_safe=False`` only
    errors that prove the command did not run are retried; ``final(error)`` true: not
    retried either. ``error``: the first attempt was made already (at ``started``, by
    ``time.monotonic``; by the caller's fast path or pipeline) and raised it. While
    ``fn`` runs, ``time_left()`` is the time until the deadline.
    """
    deadline = (time.monotonic() if started is None else started) + timeout
    attempt = 0
    while True:
        if error is None:
            try:
                with _until(deadline) if timeout > 0 else nullcontext():
                    result = fn()
            except Exception as exc:  # noqa: BLE001 (raised below unless retried)
                error = exc
            else:
                if attempt:
                    logger.warning("%s: answered again after %d attempts", what, attempt + 1)
                return result
        retry = retryable(error, replay_safe) and not (final and final(error))
        left = deadline - time.monotonic()
        if not retry or left <= 0:
            raise error
        if attempt == 0:
            logger.warning(
                "%s: %s: %s; retrying for up to %.0f s (redis.retryTimeout)",
                what,
                type(error).__name__,
                brief(str(error)).lstrip("-"),
                left,
            )
        pause = min(max(random.uniform(0, min(MAX_DELAY, FIRST_DELAY * 2**attempt)), 0.01), left)
        time.sleep(pause)
        if left - pause < LAST_ATTEMPT:  # an attempt cut at the deadline would only hide
            raise error  # the last real error (bounded.py cuts a cluster's waits there)
        attempt += 1
        error = None
