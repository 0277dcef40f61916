"""What one soak does (``Settings``) and the fault kinds it draws from."""

from __future__ import annotations

from dataclasses import dataclass

ICK = "soak"
DEHYDRATOR = "soakdh"


@dataclass
class Settings:
    """What one soak does; ``minutes`` is the faulty phase, the drain comes after."""

    minutes: float = 30.0
    seed: int = 1
    out: str = "nemesis-out"
    shards: int = 4
    rate: float = 30.0  # acknowledged adds per second, all producers together
    producers: int = 2
    members: int = 400
    every: tuple[float, float] = (5.0, 15.0)  # seconds between faults
    drain_timeout: float = 180.0
    max_per_trigger: int = 300
    trigger: str = "500 milliseconds"
    retry_timeout: str = "60s"
    consumer_id: str = ""  # "" = a random one per query start (takeovers after each crash)
    dehydrator: bool = False
    sentinel: bool = False  # the Ick on a Sentinel set (failovers), not behind the proxy
    cluster: bool = False  # the Ick on a Redis Cluster (3 primaries, a replica each)
    wait_timeout: float = 2.0  # --sentinel, --cluster: seconds an add waits for a replica
    wait_replicas: int = 1  # --sentinel: replicas each add waits for (2: every replica)
    unwaited: int = 0  # --sentinel: producers whose adds wait for no replica (unkept)
    durable: bool = False  # --sentinel: data nodes with appendonly (a killed one keeps data)
    kinds: tuple[str, ...] = ()  # faults to draw from (default: every kind of the mode)
    grace: float = 20.0  # seconds after a fault still excused from the progress check
    restart_grace: float = 45.0  # the same after a fault that restarts the consumer
    poison: float = 0.0  # share of members the sink fails on for good (2x that: once)
    max_attempts: int = 3  # --poison: the stream's maxAttempts, retryBackoff(Max)
    retry_backoff: str = "200ms"
    retry_backoff_max: str = "1s"
    writer: bool = False  # a rate source -> writeStream.format("ick") query, in the consumer
    writer_rate: int = 4  # its rows (members) per second
    zombie: bool = False  # draw zombie_consumer too
    outage: bool = False  # draw outage too (Redis down longer than redis.retryTimeout)

    def extra_kinds(self) -> tuple[str, ...]:
        """The kinds --zombie and --outage add to the draw."""
        return (ZOMBIE,) * self.zombie + (OUTAGE,) * self.outage


ZOMBIE = "zombie_consumer"  # SIGSTOP past the lease, a rival takes it, SIGCONT: fenced
OUTAGE = "outage"  # Redis down longer than redis.retryTimeout: the query fails, restarts
CONSUMER_KINDS = ("kill_driver", "kill_jvm", "kill_worker", "kill_source_runner", "stop_consumer")
KINDS = ("redis_kill", "redis_stop", "proxy_reset", "proxy_blackhole", *CONSUMER_KINDS)
FAILOVERS = ("sentinel_kill", "sentinel_failover", "sentinel_stop")
STALE = ("sentinel_stale", "sentinel_lagging")  # a primary paused until replaced, then
# continued (issue 46); a lagging replica promoted (issue 40)
SENTINEL_KINDS = (*FAILOVERS, *STALE, *CONSUMER_KINDS)  # --sentinel (no proxy: Sentinel hands
# out the primary's own address)
CLUSTER_FAILOVERS = ("cluster_kill", "cluster_failover", "cluster_stop", "cluster_migrate")
CLUSTER_STALE = ("cluster_stale",)  # the same on a cluster: issue 40
CLUSTER_KINDS = (
    *CLUSTER_FAILOVERS,
    *CLUSTER_STALE,
    *CONSUMER_KINDS,
)  # --cluster (no proxy: MOVED and
# CLUSTER SLOTS name the nodes' own ports)
ALL_KINDS = (*KINDS, *FAILOVERS, *STALE, *CLUSTER_FAILOVERS, *CLUSTER_STALE, ZOMBIE, OUTAGE)
RESTARTING = {
    ZOMBIE,
    OUTAGE,
    "redis_kill",
    "kill_driver",
    "kill_jvm",
    "kill_worker",
    "kill_source_runner",
    "stop_consumer",
}  # the consumer needs a restart (or a takeover) to go on
LONG_GRACE = (
    RESTARTING | set(FAILOVERS) | set(STALE) | set(CLUSTER_FAILOVERS) | set(CLUSTER_STALE)
)  # a failover: the readers ride it out, slowly


def kinds_of(settings: Settings) -> tuple[str, ...]:
    """The fault kinds a soak draws from: ``settings.kinds``, else every kind of its mode;
    and those --zombie and --outage add."""
    mode = CLUSTER_KINDS if settings.cluster else SENTINEL_KINDS if settings.sentinel else KINDS
    return (*(settings.kinds or mode), *settings.extra_kinds())
