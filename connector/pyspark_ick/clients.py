"""A redis-py client and what pyspark-ick keeps for it, on one object reached one way.

redis-py carries its own ``Retry`` on the client; ours rides on the client too: the
``Settings`` of a client (``settings(client)``) hold how long transient errors are retried
(redis.retryTimeout), how many replicas a write waits for (redis.waitReplicas,
redis.waitTimeout) with the spare one-connection clients that wait, and the Lua scripts
already loaded through it. ``connection.connect`` fills them in; a client made elsewhere
(a user's own ``redis.Redis``) gets the defaults on first use.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import redis
import redis.cluster

from .errors import IckConfigError

Client: TypeAlias = Any
"""A redis-py client: ``redis.Redis`` or ``redis.RedisCluster`` (not a pipeline). Typed as
Any: redis-py types its replies as unions with Awaitable, which every caller would cast."""

DEFAULT_RETRY_TIMEOUT = 60.0
"""Seconds (redis.retryTimeout): covers a Sentinel failover at its defaults
(down-after-milliseconds 30 s plus the election) and a Redis Cluster failover
(cluster-node-timeout 15 s plus the election), with room for the restart of a small server
that reloads its AOF."""

DEFAULT_WAIT_TIMEOUT = 5.0
"""Seconds a write waits for its replicas (redis.waitTimeout)."""

ATTRIBUTE = "_pyspark_ick"


@dataclass
class Settings:
    """What pyspark-ick keeps for one client (see the module docstring)."""

    retry_timeout: float = DEFAULT_RETRY_TIMEOUT
    wait_replicas: int = 0
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    loaded: set[str] = field(default_factory=set)
    """Names of the scripts loaded through the client (on every primary of a cluster)."""
    spare: list[Any] = field(default_factory=list)
    """Pinned clients (pinned.py) that waited for replicas, kept for the next write."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


_creating = threading.Lock()


def settings(client: Client) -> Settings:
    """The settings of ``client``, made with the defaults on first use."""
    found = getattr(client, ATTRIBUTE, None)
    if found is None:
        with _creating:
            found = getattr(client, ATTRIBUTE, None)
            if found is None:
                found = Settings()
                setattr(client, ATTRIBUTE, found)
    return found  # type: ignore[no-any-return]


def share(client: Client, parent: Client) -> None:
    """Give ``client`` the settings of ``parent`` (a client of the same server: a
    one-connection client of its pool)."""
    setattr(client, ATTRIBUTE, settings(parent))


def check_client(client: Client) -> Client:
    """``client`` if it is a client, not a pipeline (whose calls return no replies)."""
    if isinstance(client, (redis.client.Pipeline, redis.cluster.ClusterPipeline)):
        raise IckConfigError(
            "Icks and dehydrators need a client, not a pipeline: each call is already one "
            "round trip (a Lua script) and needs its reply. To batch adds, pass many "
            "members to one add(); to mix them into a pipeline of your own, queue "
            "pyspark_ick.ick.queue_add(pipe, Ick(client, key).keys, members, scores)"
        )
    return client
