"""The nemesis's faults of a Sentinel set (--sentinel): kill -9 of the primary, SENTINEL
FAILOVER, SIGSTOP of the primary, and SIGSTOP until a new primary is named then SIGCONT
(a stale primary, issue 46), each timed until the primary answers a write again."""

from __future__ import annotations

import contextlib
import random
import signal
import time
from collections.abc import Callable
from typing import Any

import redis
from redis_faults import kill, replicas_behind, restart, wait_promoted

from nemesis.processes import signal_pid
from pyspark_ick import IckError
from pyspark_ick.testing import role, wait_until


def promotion(old: Any, new: Any, answered: float, **more: Any) -> dict[str, Any]:
    """The record of a failover that promoted ``new`` in place of ``old``."""
    return {
        "hit": True,
        "promoted": True,
        "old": old.port,
        "new": new.port,
        "answered_after": answered,
        **more,
    }


class Failovers:
    """The failover kinds of ``Nemesis``, whose ``sentinels``, ``rng`` and ``_hold`` they
    use. Each records ``answered_after``: seconds from the fault until the primary the
    sentinels name answered a write; ``promoted``: another node is primary."""

    sentinels: Any  # --sentinel: a testing.SentinelSet
    rng: random.Random  # how long each fault lasts
    _hold: Callable[[float], None]  # waits, less when the soak ends

    def _answered(self, began: float, old: int | None = None, timeout: float = 90.0) -> float:
        """Seconds from ``began`` until the primary the sentinels name (another than port
        ``old`` if given) takes a write (SET nemesis:probe)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError, IckError, StopIteration, OSError):
                port = self.sentinels.primary_port()
                if port != old:
                    node = self.sentinels.by_port(port)
                    with node.client(socket_timeout=0.5, socket_connect_timeout=0.5) as c:
                        c.set("nemesis:probe", time.time())
                    return round(time.monotonic() - began, 2)
            time.sleep(0.02)
        raise TimeoutError(f"no primary took a write within {timeout:.0f} s")

    def _pause(self, pid: int, seconds: float) -> float:
        """SIGSTOP ``pid`` for ``seconds`` (less when the soak ends), then SIGCONT;
        returns when it was stopped (time.monotonic())."""
        began = time.monotonic()
        signal_pid(pid, signal.SIGSTOP)
        try:
            self._hold(seconds)
        finally:
            signal_pid(pid, signal.SIGCONT)
        return began

    def _revive(self, node: Any) -> None:
        """Restart a killed data node once the sentinels name another primary: it has no
        data (nothing persisted), so it must come back as a replica, never as the primary;
        then until the set is healthy (it replicates the primary)."""
        wait_until(
            lambda: self.sentinels.primary_port() != node.port,
            timeout=90,
            interval=0.1,
            what=f"a primary other than the dead {node.port}",
        )
        restart(node, timeout=60)
        self.sentinels.wait_healthy(90)

    def sentinel_kill(self) -> dict[str, Any]:
        """kill -9 of the primary; Sentinel promotes a replica; the old one restarted
        2-6 s after the promotion rejoins as a replica."""
        old = self.sentinels.primary()
        began = time.monotonic()
        kill(old)
        return self._promoted_then_revived(old, began, "down_after_promotion")

    def sentinel_failover(self) -> dict[str, Any]:
        """SENTINEL FAILOVER (graceful): a replica is promoted, the old primary demoted."""
        old = self.sentinels.primary()
        sentinel = next(x for x in self.sentinels.sentinels if x.alive)
        began = time.monotonic()
        with sentinel.client(socket_timeout=5) as c:
            c.execute_command("SENTINEL", "FAILOVER", self.sentinels.service)
        answered = self._answered(began, old.port)
        new = wait_promoted(self.sentinels, old, 60)
        self.sentinels.wait_healthy(90)  # the old primary replicates the new one
        return promotion(old, new, answered)

    def sentinel_stop(self) -> dict[str, Any]:
        """SIGSTOP of the primary for 0.5-8 s: Sentinel fails over when it is down longer
        than down-after (1 s), and turns the old primary into a replica once it is back."""
        old = self.sentinels.primary()
        assert old.process is not None
        seconds = self.rng.uniform(0.5, 8)
        began = self._pause(old.process.pid, seconds)
        answered = self._answered(began)
        self.sentinels.wait_healthy(90)
        new = self.sentinels.primary_port()
        return {
            "hit": True,
            "promoted": new != old.port,
            "old": old.port,
            "new": new,
            "seconds": round(seconds, 2),
            "answered_after": answered,
        }

    def _named_other(self, port: int) -> bool:
        """Whether the sentinels name a primary other than ``port`` (False: none answers)."""
        with contextlib.suppress(redis.RedisError, IckError, OSError):
            return self.sentinels.primary_port() != port
        return False

    def sentinel_stale(self) -> dict[str, Any]:
        """SIGSTOP of the primary until the sentinels name another, 2 s more, then SIGCONT:
        it runs on as a master (clients' old connections reach it, and it lacks every write
        made since) until Sentinel turns it into a replica, seconds later (issue 46)."""
        old = self.sentinels.primary()
        assert old.process is not None
        began = self._pause_until(old.process.pid, lambda: self._named_other(old.port), 2.0)
        stopped = time.monotonic() - began
        master = role(old) == "master"  # right after SIGCONT: a stale primary
        answered = self._answered(began, old.port)
        new = wait_promoted(self.sentinels, old, 60)
        self.sentinels.wait_healthy(90)  # the old one demoted, replicating the new one
        return promotion(
            old, new, answered, stopped=round(stopped, 2), master_when_continued=master
        )

    def _pause_until(self, pid: int, done: Callable[[], bool], more: float) -> float:
        """SIGSTOP ``pid`` until ``done()`` (90 s at most), ``more`` seconds more, then
        SIGCONT; returns when it was stopped (time.monotonic())."""
        began = time.monotonic()
        signal_pid(pid, signal.SIGSTOP)
        try:
            wait_until(done, timeout=90, interval=0.05, what="a new primary named")
            self._hold(more)
        finally:
            signal_pid(pid, signal.SIGCONT)
        return began

    def sentinel_lagging(self) -> dict[str, Any]:
        """A lagging replica promoted: the replicas stopped and the primary's buffers to
        them filled (redis_faults.replicas_behind), adds and reserves going on 0.3-0.8 s
        (under the sentinels' down-after), kill -9 of the primary, the replicas continued:
        Sentinel promotes one that lacks what the primary took since. Writers that wait for
        a replica had nothing acknowledged in that time (issue 40)."""
        lag = self.rng.uniform(0.3, 0.8)
        with replicas_behind(self.sentinels) as old:
            self._hold(lag)
            began = time.monotonic()
            kill(old)
        return {**self._promoted_then_revived(old, began), "lag": round(lag, 2)}

    def _promoted_then_revived(self, old: Any, began: float, down_key: str = "") -> dict[str, Any]:
        """After a kill -9 of primary ``old`` at ``began``: wait for the promotion, restart
        ``old`` 2-6 s later (it rejoins as a replica); the promotion's record, the wait
        under ``down_key`` if given."""
        answered = self._answered(began, old.port)
        new = wait_promoted(self.sentinels, old, 60)
        down = self.rng.uniform(2, 6)
        self._hold(down)
        self._revive(old)
        extra = {down_key: round(down, 2)} if down_key else {}
        return promotion(old, new, answered, **extra)
