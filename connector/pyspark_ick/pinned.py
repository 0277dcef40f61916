"""The connections a replicated write runs on and WAITs on (replication.py): one
connection of a client's pool (``Pinned``), or on Redis Cluster one connection per node
the write touches (``PinnedCluster``: each call goes to the node that owns its first key's
slot, so a WAIT on that node's connection covers it). Both count the times a connection
was opened again, so a write knows when part of it went on a connection now gone.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.commands.core import CoreCommands

from .clients import share


class Pinned(redis.Redis):
    """A client of one connection of another client's pool that counts the times that
    connection was opened and notes, for each reply, the opening it came through."""

    def __init__(self, parent: redis.Redis) -> None:
        self.opened = 0
        self.used: set[int] = set()
        super().__init__(connection_pool=parent.connection_pool, single_connection_client=True)
        assert self.connection is not None
        self.connection.register_connect_callback(self._opened)
        self.opened = 1

    def _opened(self, connection: Any) -> None:
        self.opened += 1

    def _reconnect(self) -> None:
        """Open the connection again through the pool's own ``connect`` if it was closed:
        redis-py reopens a single connection at the address it had, and a Sentinel
        connection must ask the sentinels for the primary."""
        connection = self.connection
        if connection is not None and not connection.is_connected:
            connection.connect()

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self._reconnect()
        reply = super().execute_command(*args, **options)
        self.used.add(self.opened)
        return reply

    def start(self) -> None:
        """A new write begins: forget the openings the last one used."""
        self.used.clear()

    def lost(self) -> bool:
        """Whether part of this write went on a connection opened before the current one."""
        return bool(self.used - {self.opened})

    def send_wait(self, replicas: int, timeout: float) -> int:
        """Send WAIT on this connection; returns the opening it went on (``read_wait``)."""
        self._reconnect()
        assert self.connection is not None
        self.connection.send_command("WAIT", replicas, max(1, round(timeout * 1000)))
        return self.opened

    def read_wait(self, sent_on: int, timeout: float) -> int:
        """The reply of the WAIT sent on opening ``sent_on``: the socket waits ``timeout``
        beyond its own timeout. A WAIT sent on a new connection covers nothing of ours."""
        connection = self.connection
        assert connection is not None
        own = connection.socket_timeout
        reply = connection.read_response(timeout=None if own is None else own + timeout)
        if self.opened != sent_on:
            raise redis.ConnectionError("the connection was opened again before WAIT")
        return int(reply)

    def confirm(self, replicas: int, timeout: float) -> int:
        """WAIT on this connection: how many replicas confirmed this write."""
        return self.read_wait(self.send_wait(replicas, timeout), timeout)

    def stale(self) -> None:
        """The node refused as a replica (a failover): close the connection, so the next
        call opens it again (through Sentinel: to the primary the sentinels name now)."""
        if self.connection is not None:
            self.connection.disconnect()

    def demoted(self) -> bool:
        """True when this connection talks to a primary that the sentinels no longer name
        (after a SENTINEL FAILOVER the old primary takes writes until Sentinel turns it
        into a replica, about 8 s later, and those writes are then lost); its connection
        is closed, so the next call asks the sentinels again. False without sentinels."""
        pool, connection = self.connection_pool, self.connection
        if not hasattr(pool, "get_master_address") or connection is None:
            return False
        try:
            address = pool.get_master_address()
        except redis.RedisError:
            return False
        if (str(address[0]), int(address[1])) == (str(connection.host), int(connection.port)):
            return False
        connection.disconnect()
        return True


class PinnedCluster(CoreCommands):  # type: ignore[misc]
    """Redis Cluster: each command goes to a ``Pinned`` connection of the primary that
    owns its first key's slot, as the cluster client would send it; SCRIPT commands go
    through the cluster client (to every primary). A MOVED reply or a lost node makes
    the next call ask the cluster for its slots again; an ASK reply is followed at once
    (ASKING, then the command, on the target's pinned connection)."""

    _event_dispatcher: Any = None  # CoreCommands asks for it; commands go to ``Pinned``

    def __init__(self, parent: redis.RedisCluster) -> None:
        self.parent = parent
        self.pins: dict[str, Pinned] = {}
        self._refresh = False
        share(self, parent)

    def _pin(self, node: Any) -> Pinned:
        found = self.pins.get(node.name)
        if found is None or found.connection_pool is not node.redis_connection.connection_pool:
            found = self.pins[node.name] = Pinned(node.redis_connection)
            share(found, self.parent)
        return found

    def on(self, key: Any) -> Pinned:
        """The pinned connection to the primary that owns ``key``'s slot (the slots read
        again first after a MOVED or a lost node): a MULTI on one slot goes there."""
        if self._refresh:
            self.parent.nodes_manager.initialize()
            self._refresh = False
        return self._pin(self.parent.get_node_from_key(key))

    def stale(self) -> None:
        """The next call reads the slots again (a redirect, a lost node or a node that
        refused as a replica, seen outside ``execute_command``) on new connections."""
        self._refresh = True
        for pinned in self.pins.values():
            pinned.stale()

    def execute_command(self, *args: Any, **options: Any) -> Any:
        name = str(args[0]).upper()
        if name.startswith("SCRIPT") or len(args) < 2:
            return self.parent.execute_command(*args, **options)
        key = (args[3] if int(args[2]) else None) if name in ("EVALSHA", "EVAL") else args[1]
        if key is None:
            return self.parent.execute_command(*args, **options)
        try:
            return self.on(key).execute_command(*args, **options)
        except redis.exceptions.MovedError:
            self._refresh = True
            raise
        except redis.exceptions.AskError as exc:
            target = self.parent.get_node(host=exc.host, port=exc.port)
            if target is None:
                self._refresh = True
                raise
            pinned = self._pin(target)
            pinned.execute_command("ASKING")
            return pinned.execute_command(*args, **options)
        except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterDownError):
            self._refresh = True
            raise

    def start(self) -> None:
        for pinned in self.pins.values():
            pinned.start()

    def lost(self) -> bool:
        return any(p.lost() for p in self.pins.values())

    def confirm(self, replicas: int, timeout: float) -> int:
        """WAIT on the connection of every node this write touched (sent to all, then
        read): the fewest replicas any of them confirmed."""
        touched = [p for p in self.pins.values() if p.used]
        try:
            sent = [(p, p.send_wait(replicas, timeout)) for p in touched]
            return min((p.read_wait(n, timeout) for p, n in sent), default=replicas)
        except BaseException:  # a reply may be left unread: those connections go
            for p in touched:
                if p.connection is not None:
                    p.connection.disconnect()
            raise

    def demoted(self) -> bool:
        return False


def reroute(client: Any, key: Any) -> bool:
    """Ask where ``key``'s primary is now, so the next call on ``key`` goes there: on Redis
    Cluster read the slots again, through Sentinel ask the sentinels (redis-py then closes
    the idle connections to another node, and the busy ones when they come back). True
    when it moved; a plain client has nowhere else to go (False). A paused primary that
    Sentinel replaced stays a master for seconds once it runs again: calls sent on an old
    connection still reach it, and it lacks every write made since (issue 46)."""
    try:
        if isinstance(client, redis.RedisCluster):
            before = client.get_node_from_key(key).name
            client.nodes_manager.initialize()
            return bool(client.get_node_from_key(key).name != before)
        pool: Any = getattr(client, "connection_pool", None)
        if not hasattr(pool, "get_master_address"):
            return False
        before = pool.master_address
        return tuple(pool.get_master_address()) != tuple(before or ())
    except (redis.RedisError, redis.exceptions.RedisClusterException):
        return False  # nobody answers: the caller tries again


def pin(client: Any) -> Pinned | PinnedCluster:
    """A new pinned client of ``client`` (its settings shared)."""
    if isinstance(client, redis.RedisCluster):
        return PinnedCluster(client)
    pinned = Pinned(client)
    share(pinned, client)
    return pinned
