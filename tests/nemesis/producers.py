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
from pyspark_ick import lua, replication, retry
from pyspark_ick.clients import settings as client_settings
from pyspark_ick.ick import queue_add
from pyspark_ick.keys import IckKeys, shard_names, shard_of
from pyspark_ick.pinned import PinnedCluster


class _Queued:
    """Stands for a redis-py pipeline: collects the commands ``queue_add`` puts on it."""

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any, **_: Any) -> None:
        self.commands.append(args)


def add_waited(client: Any, ick: str, shards: int, member: str, score: float) -> Add:
    """``faults_support.add_recorded`` through the connector's replicated writes: its MULTI
    (the add and the read of the shard's last reservation number, one atomic step) runs on
    a connection ``pyspark_ick.replication.write`` pins (on Redis Cluster, the one to the
    primary of the shard's slot: ``PinnedCluster.on``), which then WAITs for the replicas
    of ``client`` (``connect(url, wait_replicas=1)``) as the client's own adds do.
    Returns the Add once a replica confirmed it; raises when not acknowledged (a
    ReplicationError, an IckConnectionError: the add is on the primary at most). A
    redirect (MOVED, ASK, TRYAGAIN) or a lost connection before EXEC ran nothing and is
    retried (pyspark_ick.retry); a write the connector ran again is recorded as its
    last run."""
    shard = shard_of(member, shards)
    keys = IckKeys(shard_names(ick, shards)[shard])
    queued = _Queued()
    queue_add(queued, keys, [member], [score])

    def transaction(pinned: Any) -> Add:
        c = pinned.on(keys.rlog) if isinstance(pinned, PinnedCluster) else pinned
        try:
            c.execute_command("MULTI")
            for command in queued.commands:
                c.execute_command(*command)
            c.execute_command("HGET", keys.rlog, "reserved")
            replies = c.execute_command("EXEC")
        except BaseException:
            with contextlib.suppress(Exception):  # a MULTI left open would nest the next
                c.connection.disconnect()
            if isinstance(pinned, PinnedCluster):
                pinned.stale()  # MOVED, ASK, a lost node: read the slots again
            raise
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        node = getattr(getattr(c, "connection", None), "port", 0) or 0
        return Add(member, score, shard, int(replies[-1] or 0), time.monotonic(), node=int(node))

    return retry.call(
        lambda: replication.write(client, transaction, what="nemesis add"),
        client_settings(client).retry_timeout,
        what="nemesis add",
    )


def make_producer(client: Any, journal: Journal, settings: Settings, index: int) -> Any:
    """A faults_support.Loop adding one member a tick (``hot`` one time in ten, else one
    of ``m0..``), recording each acknowledged add in ``journal`` (--sentinel, --cluster:
    add_waited, so each recorded add is on a replica, except the first
    ``settings.unwaited`` producers': on the primary only, recorded unkept; a failed tick
    records nothing)."""

    class Producer(Loop):
        def __init__(self) -> None:
            super().__init__(f"producer-{index}", settings.producers / settings.rate)
            self.rng = random.Random(settings.seed * 1000 + index)
            self.last = 0.0
            self.acked = 0
            self.unwaited = index < settings.unwaited

        def tick(self) -> None:
            n = self.rng.randrange(settings.members)
            member = "hot" if self.rng.random() < 0.1 else f"m{n}"
            self.last = score = max(time.time(), self.last + 1e-6)
            if self.unwaited:  # the control: on the primary only, counted apart
                add = add_recorded(client, ICK, settings.shards, member, score)
                add = add._replace(kept=False)
            elif settings.sentinel or settings.cluster:
                add = add_waited(client, ICK, settings.shards, member, score)
            else:
                add = add_recorded(client, ICK, settings.shards, member, score)
            journal.write(add._asdict(), sync=False)
            self.acked += 1

        def recover(self) -> None:
            """The server may be new (restarted): load ickadd again, or pause."""
            try:
                client.script_load(lua.source("ickadd"))
            except Exception:  # noqa: BLE001 - still away: the next tick tries again
                time.sleep(0.2)

    return Producer()


def make_parker(dehydrator: Any, journal: Journal, settings: Settings) -> Any:
    """A Loop parking one new id ``d<n>`` a tick (delay 0-2 s), ~rate/6 a second with
    ``dehydrator.park``, recording each acknowledged park (id, delay, ack time): one that
    returned (--sentinel, --cluster: its client waits for a replica, so it is on one);
    one that raised is not recorded."""

    class Parker(Loop):
        def __init__(self) -> None:
            super().__init__("parker", 6.0 / settings.rate)
            self.rng = random.Random(settings.seed * 1000 + 999)
            self.next = 0

        def tick(self) -> None:
            ident, delay = f"d{self.next}", self.rng.randrange(0, 2000)
            self.next += 1
            sent = time.monotonic()
            dehydrator.park([ident], [f"dh:{ident}"], [delay])
            record = {"id": ident, "delay_ms": delay, "sent": sent, "at": time.monotonic()}
            journal.write(record, sync=False)

    return Parker()
