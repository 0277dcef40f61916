"""The soak's producers: threads adding members (and, with --dehydrator, parking ids), each
acknowledged write recorded."""

from __future__ import annotations

import contextlib
import random
import time
from typing import Any

from faults_support import Add, Loop, add_recorded

from nemesis.records import Journal
from nemesis.settings import ICK, Settings
from pyspark_ick import IckConnectionError, lua, replication
from pyspark_ick.ick import queue_add
from pyspark_ick.keys import IckKeys, shard_names, shard_of


class _Queued:
    """Stands for a redis-py pipeline: collects the commands ``queue_add`` puts on it."""

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any, **_: Any) -> None:
        self.commands.append(args)


def add_replicated(client: Any, ick: str, shards: int, member: str, score: float) -> Any:
    """``faults_support.add_recorded`` that waits for a replica: its MULTI (the add and the
    read of the shard's last reservation number) and then WAIT run on one connection of
    ``client`` (``pyspark_ick.replication.write``; ``client`` configured for 1 replica).
    Returns the Add, ``kept`` False when EXEC answered but no replica confirmed it (WAIT
    timed out, or the connection was lost before WAIT); raises when the add was not
    acknowledged. A write the connector ran again (a new connection, a demoted primary)
    is recorded as its last run."""
    shard = shard_of(member, shards)
    keys = IckKeys(shard_names(ick, shards)[shard])
    queued = _Queued()
    queue_add(queued, keys, [member], [score])
    done: list[Add] = []

    def transaction(c: Any) -> Add:
        done.clear()
        try:
            c.execute_command("MULTI")
            for command in queued.commands:
                c.execute_command(*command)
            c.execute_command("HGET", keys.rlog, "reserved")
            replies = c.execute_command("EXEC")
        except BaseException:
            with contextlib.suppress(Exception):  # a MULTI left open would nest the next
                c.connection.disconnect()
            raise
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        done.append(Add(member, score, shard, int(replies[-1] or 0), time.monotonic()))
        return done[-1]

    try:
        return replication.write(client, transaction, what="nemesis add")
    except IckConnectionError:  # ReplicationError, or lost before WAIT: ran, not kept
        if not done:
            raise
        return done[-1]._replace(kept=False)


def make_producer(
    client: Any, journal: Journal, settings: Settings, index: int, adder: Any = None
) -> Any:
    """A faults_support.Loop adding one member a tick (``hot`` one time in ten, else one
    of ``m0..``), recording each acknowledged add in ``journal`` (``--sentinel``: with
    ``kept``, add_replicated; ``adder`` instead when given: --cluster's)."""

    class Producer(Loop):
        def __init__(self) -> None:
            super().__init__(f"producer-{index}", settings.producers / settings.rate)
            self.rng = random.Random(settings.seed * 1000 + index)
            self.last = 0.0
            self.acked = 0

        def tick(self) -> None:
            n = self.rng.randrange(settings.members)
            member = "hot" if self.rng.random() < 0.1 else f"m{n}"
            self.last = score = max(time.time(), self.last + 1e-6)
            add = (adder or (add_replicated if settings.sentinel else add_recorded))(
                client, ICK, settings.shards, member, score
            )
            journal.write(add._asdict(), sync=False)
            self.acked += 1

        def recover(self) -> None:
            """The server may be new (restarted): load ickadd again, or pause."""
            try:
                client.script_load(lua.source("ickadd"))
            except Exception:  # noqa: BLE001 - still away: the next tick tries again
                time.sleep(0.2)

    return Producer()


def make_parker(dehydrator: Any, journal: Journal, settings: Settings, park: Any = None) -> Any:
    """A Loop parking one new id ``d<n>`` a tick (delay 0-2 s), ~rate/6 a second,
    recording each acknowledged park (id, delay, ack time; ``kept``: what ``park(id,
    element, delay)`` returned, --cluster's that waits for a replica)."""

    class Parker(Loop):
        def __init__(self) -> None:
            super().__init__("parker", 6.0 / settings.rate)
            self.rng = random.Random(settings.seed * 1000 + 999)
            self.next = 0

        def tick(self) -> None:
            ident, delay = f"d{self.next}", self.rng.randrange(0, 2000)
            self.next += 1
            sent = time.monotonic()
            if park is None:
                dehydrator.park([ident], [f"dh:{ident}"], [delay])
                kept = True
            else:
                kept = park(ident, f"dh:{ident}", delay)
            record = {"id": ident, "delay_ms": delay, "sent": sent, "at": time.monotonic()}
            journal.write({**record, "kept": kept}, sync=False)

    return Parker()
