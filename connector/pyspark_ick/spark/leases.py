"""The stream reader's leases: one per shard, held by the driver while the query runs.

``Leases.take`` acquires every shard's lease with a new fencing token (a live holder
refuses, a gone one is taken over), a heartbeat thread renews them, a lease found lost is
raised by ``check`` on the next driver call, and ``release`` gives them back. In Spark's
Python stream runner, ``stop_on_sigterm`` makes ``query.stop()``'s SIGTERM leave the
runner time to run the reader's ``stop()``, which releases them.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import LeaseBusy, LeaseError
from ..lease import Fence, Lease

logger = logging.getLogger("pyspark_ick.stream")

RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
GRACE_S = 30.0  # how long a runner told to stop may take to release its leases

_terminating = False  # SIGTERM came: a plain flag, since a signal handler must take no lock


def _on_sigterm(signum: int, frame: Any) -> None:
    # Spark closes the runner's socket right after its SIGTERM (and sends a second one):
    # the call in progress ends, the runner reads EOF and runs its finally: reader.stop().
    # Raising SystemExit here instead could land anywhere, even in stop() before the
    # release; taking a lock (an Event's) deadlocked when the second SIGTERM came while
    # the first held it. SIGALRM's default action ends a runner still alive GRACE_S later,
    # and the heartbeat stops renewing, so a successor can take the leases over.
    global _terminating
    if not _terminating:
        _terminating = True
        signal.setitimer(signal.ITIMER_REAL, GRACE_S)


def stop_on_sigterm() -> None:
    """In Spark's Python stream runner, let ``query.stop()``'s SIGTERM run the reader's
    ``stop()``.

    Its default action ended the runner at once, skipping its ``finally: reader.stop()``,
    so the leases stayed in Redis and the next query waited to take them over. Now the
    runner finishes the call in progress and stops on the EOF that follows, within
    ``GRACE_S``. Only in that process's main thread, and only if nobody handles SIGTERM
    or SIGALRM already.
    """
    main = sys.modules.get("__main__")
    if (
        getattr(getattr(main, "__spec__", None), "name", None) == RUNNER
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        and signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, _on_sigterm)


class Leased(Protocol):
    """What has a lease: a shard log (``driver.ShardLog``)."""

    label: str
    lease: Lease


def heartbeat_ms(lease_ms: int) -> int:
    """How often the heartbeat renews leases of ``lease_ms``."""
    return max(50, min(lease_ms // 4, 1000))


def acquire(shard_log: Leased, owner: str, lease_ms: int) -> Fence:
    """The shard's lease with a new fencing token. A holder that renews its lease while we
    look is a live query: refused within about one of its renewal periods. One that does
    not is gone (a crashed query restarting from its checkpoint): taken over once it has
    been idle for 3 of its renewal periods and a second (lua/lease.lua)."""
    seen: int | None = None
    while True:
        try:
            return shard_log.lease.acquire(owner, lease_ms, heartbeat_ms(lease_ms))
        except LeaseBusy as busy:
            if seen is not None and busy.renewed_at != seen:
                raise LeaseError(
                    f"{shard_log.label} is consumed by another query: consumer "
                    f"{busy.owner!r} holds its lease and renewed it {busy.idle_ms} ms ago. "
                    "Stop that query first (one consumer per shard)"
                ) from None
            if seen is None:
                logger.warning(
                    "%s: consumer %r holds the lease, last renewed %d ms ago: "
                    "taking it over unless it renews it within %d ms",
                    shard_log.label,
                    busy.owner,
                    busy.idle_ms,
                    busy.gone_after_ms - busy.idle_ms,
                )
            seen = busy.renewed_at
            beat = (busy.gone_after_ms - 1000) / 3
            wait = min(busy.gone_after_ms - busy.idle_ms, 1.5 * beat)
            time.sleep(max(wait, 10) / 1000 + 0.02)


class Leases:
    """The leases of every shard of one reader (``fences[i]`` fences shard ``i``'s calls),
    renewed by a heartbeat thread until ``release``."""

    def __init__(self, logs: Sequence[Leased], fences: list[Fence], lease_ms: int) -> None:
        self.logs, self.fences, self.lease_ms = logs, fences, lease_ms
        self.lost: LeaseError | None = None
        self._stopping = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._beat, daemon=True, name="pyspark-ick-lease-heartbeat"
        )
        self._heartbeat.start()

    @classmethod
    def take(cls, logs: Sequence[Leased], owner: str, lease_ms: int) -> Leases:
        """Every shard's lease (``acquire``), or none: those taken are released when one
        fails."""
        fences: list[Fence] = []
        try:
            for shard_log in logs:
                fences.append(acquire(shard_log, owner, lease_ms))
        except BaseException:
            for shard_log, fence in zip(logs, fences, strict=False):
                shard_log.lease.release(fence)
            raise
        return cls(logs, fences, lease_ms)

    def check(self) -> None:
        """Raise the LeaseError of a lease the heartbeat found lost."""
        if self.lost is not None:
            raise self.lost

    def _beat(self) -> None:
        while not self._stopping.wait(heartbeat_ms(self.lease_ms) / 1000) and not _terminating:
            for shard_log, fence in zip(self.logs, self.fences, strict=True):
                try:
                    shard_log.lease.renew(fence)
                except LeaseError as exc:
                    self.lost = exc
                    logger.error("%s", exc)
                    return
                except Exception as exc:  # noqa: BLE001 - Redis away for a moment: retry
                    logger.warning("%s: lease renewal failed: %s", shard_log.label, exc)

    def halt(self) -> None:
        """Stop renewing (the leases then expire unless released)."""
        self._stopping.set()
        self._heartbeat.join(timeout=5)

    def release(self) -> None:
        """Stop renewing and release every lease (one that fails expires by itself)."""
        self.halt()
        for shard_log, fence in zip(self.logs, self.fences, strict=True):
            try:
                shard_log.lease.release(fence)
            except Exception as exc:  # noqa: BLE001 - it expires by itself anyway
                logger.warning("%s: could not release the lease: %s", shard_log.label, exc)
