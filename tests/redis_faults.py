"""The project's own fault tools, on top of pyspark_ick.testing's servers: a durable server
(its AOF keeps every acknowledged write through ``kill()`` and ``restart()``), the hash slot
of a key, a hash slot moved step by step as ``redis-cli --cluster reshard`` does
(``SlotMigration``, ``migrate_slot``), and writes that only a Sentinel set's primary has
(``replicas_behind``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark_ick import IckError
from pyspark_ick.testing import (
    RedisClusterServers,
    RedisServer,
    SentinelSet,
    node_id,
    start_binary,
)


def start_durable(binary: str | None = None, *args: str) -> RedisServer:
    """A server that loses no acknowledged write to ``kill()`` (``appendonly yes``,
    ``appendfsync always``): ``restart()`` reloads its AOF. ``args`` add settings."""
    return start_binary(binary, "--appendonly", "yes", "--appendfsync", "always", *args)


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster hash slot of ``key`` (CRC16, hash tags honoured)."""
    from redis.crc import key_slot as crc_slot

    return int(crc_slot(key.encode() if isinstance(key, str) else key))


@dataclass
class SlotMigration:
    """Moves hash ``slot`` of ``cluster`` to ``target`` the way ``redis-cli --cluster
    reshard`` does, one step at a time, so a test can act in between.

    ``begin()``: CLUSTER SETSLOT IMPORTING on the target, then MIGRATING on the source
    (nothing moved yet); ``step()``: CLUSTER GETKEYSINSLOT and one MIGRATE of up to
    ``keys_per_step`` keys; ``finish()``: SETSLOT NODE on the target, the source, then
    every other primary. ``run()`` does it all, calling ``between`` after ``begin`` and
    after each step. ``moved`` counts the keys moved, ``steps`` the MIGRATE calls.
    """

    cluster: RedisClusterServers
    slot: int
    target: RedisServer
    keys_per_step: int = 10
    timeout_ms: int = 5000
    source: RedisServer | None = None
    moved: int = 0
    steps: int = 0

    def begin(self) -> None:
        """Mark the slot IMPORTING on the target and MIGRATING on the source."""
        self.source = self.cluster.owner(self.slot)
        if self.source.port == self.target.port:
            raise IckError(f"slot {self.slot} is served by port {self.target.port} already")
        with self.target.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING", node_id(self.source))
        with self.source.client() as c:
            c.execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING", node_id(self.target))

    def keys_left(self) -> int:
        """How many keys of the slot are still on the source."""
        assert self.source is not None, "begin() first"
        with self.source.client() as c:
            return int(c.execute_command("CLUSTER", "COUNTKEYSINSLOT", self.slot))

    def step(self) -> int:
        """MIGRATE up to ``keys_per_step`` keys of the slot; returns how many (0: none left)."""
        assert self.source is not None, "begin() first"
        with self.source.client() as c:
            keys = c.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, self.keys_per_step)
            if keys:
                c.execute_command(
                    "MIGRATE",
                    self.target.host,
                    self.target.port,
                    "",
                    0,
                    self.timeout_ms,
                    "KEYS",
                    *keys,
                )
        self.moved += len(keys)
        self.steps += bool(keys)
        return len(keys)

    def finish(self) -> None:
        """Assign the slot to the target on the target, the source and every other primary
        (call once ``step()`` returned 0)."""
        assert self.source is not None, "begin() first"
        target = node_id(self.target)
        others = [
            n
            for n in self.cluster.primaries()
            if n.port not in (self.target.port, self.source.port)
        ]
        for node in [self.target, self.source, *others]:
            with node.client() as c:
                c.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", target)

    def run(self, between: Callable[[SlotMigration], None] | None = None) -> int:
        """begin, step until the slot is empty on the source, finish; returns keys moved."""
        self.begin()
        if between is not None:
            between(self)
        while self.step():
            if between is not None:
                between(self)
        self.finish()
        return self.moved


def migrate_slot(
    cluster: RedisClusterServers,
    slot: int,
    target: RedisServer,
    *,
    keys_per_step: int = 10,
    between: Callable[[SlotMigration], None] | None = None,
) -> int:
    """Move hash ``slot`` to ``target`` in MIGRATE steps of ``keys_per_step`` keys, as
    ``redis-cli --cluster reshard`` does; ``between(migration)`` runs while the slot is
    MIGRATING with nothing moved and after each step. Returns how many keys moved."""
    return SlotMigration(cluster, slot, target, keys_per_step).run(between)


@contextmanager
def replicas_behind(sentinels: SentinelSet, filler_mb: int = 24) -> Iterator[RedisServer]:
    """Writes that reach only the primary, for the block (which kills it, say): the
    replicas are stopped (SIGSTOP) and ``filler_mb`` MB written to the primary first fill
    the sockets to them, so what the primary takes next stays in its own output buffers
    and dies with it. The replicas go on (SIGCONT) at the end; keep the block under the
    sentinels' down-after-milliseconds. Yields the primary."""
    primary, replicas = sentinels.primary(), sentinels.replicas()
    for replica in replicas:
        assert replica.process is not None
        os.kill(replica.process.pid, signal.SIGSTOP)
    try:
        with primary.client(socket_timeout=10) as c:
            block = b"x" * (1 << 20)
            pipe = c.pipeline(transaction=False)
            for i in range(filler_mb):
                pipe.set(f"filler:{i}", block)
            pipe.execute()
        yield primary
    finally:
        for replica in replicas:
            assert replica.process is not None
            os.kill(replica.process.pid, signal.SIGCONT)
