"""--cluster: the soak's writes that wait for a replica on a Redis Cluster. A write's
commands go in one MULTI on a connection of its own to the primary serving their slot,
then WAIT on that same connection (WAIT confirms only its own connection's writes), so
``kept`` says a replica has them. MOVED and TRYAGAIN (a failover, a slot migrating) are
refused before EXEC ran anything: the write is sent again; ASK sends it to the importing
node after ASKING; a lost connection sends it again too (an add, or a park that keeps an
id parked, may run twice). (pyspark_ick.replication refuses redis.waitReplicas on a
cluster.)"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Any

import redis
from faults_support import Add
from redis.backoff import NoBackoff
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError
from redis.retry import Retry

from pyspark_ick import connect, lua
from pyspark_ick.keys import DehydratorKeys, IckKeys, shard_names, shard_of
from pyspark_ick.packing import pack_chunks, pack_plain

REDIRECTS = (MovedError, TryAgainError, ClusterDownError, redis.ConnectionError, redis.TimeoutError)


class ClusterWrites:
    """Writes through ``cluster`` (a redis.RedisCluster) that WAIT for ``replicas``
    replicas, ``timeout`` seconds at most; one connection per node and thread."""

    def __init__(self, cluster: redis.RedisCluster, replicas: int, timeout: float) -> None:
        self.cluster, self.replicas, self.timeout = cluster, replicas, timeout
        self._links = threading.local()

    def _link(self, host: str, port: int) -> redis.Redis:
        links = self._links.__dict__.setdefault("by_node", {})
        if (host, port) not in links:
            links[host, port] = redis.Redis(
                host=host,
                port=port,
                socket_timeout=2,
                socket_connect_timeout=2,
                retry=Retry(NoBackoff(), 0),  # never a MULTI's commands on a new connection
            ).client()  # a client of one connection
        return links[host, port]  # type: ignore[no-any-return]

    def refresh(self) -> None:
        """Read the slots' primaries again (CLUSTER SLOTS)."""
        with contextlib.suppress(Exception):
            self.cluster.nodes_manager.initialize()

    def write(
        self, key: str, commands: Sequence[tuple[Any, ...]], deadline: float = 10.0
    ) -> tuple[list[Any], bool, int, float]:
        """Run ``commands`` (all on ``key``'s slot) in one MULTI on the primary serving
        it, then WAIT: (EXEC's replies, whether the replicas confirmed them, the node's
        port, time.monotonic() of EXEC's reply). Raises when Redis did not acknowledge
        the write (nothing counts then)."""
        until = time.monotonic() + deadline
        asking: tuple[str, int] | None = None
        while True:
            if asking is None:
                node = self.cluster.get_node_from_key(key)
                host, port = node.host, int(node.port)
            else:
                host, port = asking
            c = self._link(host, port)
            try:
                if asking is not None:
                    c.execute_command("ASKING")
                c.execute_command("MULTI")
                for command in commands:
                    c.execute_command(*command)
                replies = c.execute_command("EXEC")
            except (AskError, *REDIRECTS) as exc:
                with contextlib.suppress(Exception):  # a MULTI left open would nest
                    c.connection.disconnect()  # type: ignore[union-attr]
                if time.monotonic() > until:
                    raise
                if isinstance(exc, AskError) and not isinstance(exc, MovedError):
                    asking = (exc.host, int(exc.port))  # (MovedError is an AskError)
                else:
                    asking = None
                    if not isinstance(exc, TryAgainError):
                        self.refresh()
                    time.sleep(0.05)
                continue
            except BaseException:
                with contextlib.suppress(Exception):
                    c.connection.disconnect()  # type: ignore[union-attr]
                raise
            acked = time.monotonic()
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies, self._confirmed(c), port, acked

    def _confirmed(self, c: redis.Redis) -> bool:
        """WAIT on ``c``'s connection: True when ``replicas`` replicas confirmed."""
        try:
            connection = c.connection
            assert connection is not None
            connection.send_command("WAIT", self.replicas, max(1, round(self.timeout * 1000)))
            return int(connection.read_response(timeout=2 + self.timeout)) >= self.replicas
        except redis.RedisError:
            with contextlib.suppress(Exception):
                c.connection.disconnect()  # type: ignore[union-attr]
            return False

    def add(self, _client: Any, ick: str, shards: int, member: str, score: float) -> Add:
        """faults_support.add_recorded (ickadd and the read of the shard's last reservation
        number in one MULTI), waiting for a replica (``kept``). ``_client``: unused (the
        producers' adders take one)."""
        shard = shard_of(member, shards)
        keys = IckKeys(shard_names(ick, shards)[shard])
        packed = pack_chunks([member], [score], 1)[0]
        commands = [
            ("EVAL", lua.source("ickadd"), len(keys.base), *keys.base, packed),
            ("HGET", keys.rlog, "reserved"),
        ]
        replies, kept, _, acked = self.write(keys.rlog, commands)
        return Add(member, score, shard, int(replies[-1] or 0), acked, kept)

    def park(self, name: str, shards: int, ident: str, element: str, delay_ms: int) -> bool:
        """dh_push one element (delay ``delay_ms``, kept if parked): whether kept."""
        keys = DehydratorKeys(shard_names(name, shards)[shard_of(ident, shards)])
        rows = pack_plain([ident], [element], [float(delay_ms)])[0]
        push = ("EVAL", lua.source("dh_push"), len(keys.store), *keys.store, "keep", "", "delay")
        return self.write(keys.due, [(*push, rows)])[1]

    def confirm(self, keys: Sequence[str], owners: dict[str, int], deadline: float) -> None:
        """After writes that others made on ``keys`` (the dehydrator sink's into the Ick):
        a write of a fence key on each key's slot, and WAIT; the replication stream keeps
        order, so a confirmed fence confirms what its primary took before. ``owners``
        (``owners(keys)`` before those writes): a key whose slot changed primary since
        raises (the writes may have died with the old one); so does no confirmation
        within ``deadline`` seconds."""
        until = time.monotonic() + deadline
        for key in keys:
            fence = f"{{{key}}}nemesis:fence"
            while True:
                _, kept, port, _ = self.write(fence, [("SET", fence, time.time())])
                if port != owners[key]:
                    raise RuntimeError(f"the slot of {key} moved from {owners[key]} to {port}")
                if kept:
                    break
                if time.monotonic() > until:
                    raise RuntimeError(f"no replica of {port} confirmed the writes on {key}")

    def owners(self, keys: Sequence[str]) -> dict[str, int]:
        """The port of the primary that serves each key's slot now."""
        return {k: int(self.cluster.get_node_from_key(k).port) for k in keys}


class Fence:
    """--cluster, in the consumer's dehydrator sink: ``before()`` the sink writes the
    released elements into the Ick, ``after(owners)`` returns once a replica has them
    (``ClusterWrites.confirm`` on every shard of ``ick``), else raises: the sink fails and
    its batch runs again, so no released element lives on a primary alone."""

    def __init__(self, url: str, ick: str, shards: int, timeout: float) -> None:
        self.writes = ClusterWrites(connect(url, timeout=2.0, retry_timeout=20.0), 1, timeout)
        self.keys = shard_names(ick, shards)

    def before(self) -> dict[str, int]:
        self.writes.refresh()  # CLUSTER SLOTS: a map from before a failover fails the batch
        return self.writes.owners(self.keys)

    def after(self, owners: dict[str, int], deadline: float = 30.0) -> None:
        self.writes.confirm(self.keys, owners, deadline)
