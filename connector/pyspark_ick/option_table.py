"""Every option of every format, in one table: the uses (format and direction) that take
it, its kind (how its text is read), typed default, bounds or choices and meaning.
README's option tables are checked against it (tests/test_options.py); options.py reads a
format's options by it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import bounds
from .clients import DEFAULT_RETRY_TIMEOUT, DEFAULT_WAIT_TIMEOUT
from .dehydrator import ON_DUPLICATE
from .keys import MAX_SHARDS
from .urls import DEFAULT_URL

ICK_WRITE = "format('ick') write"
ICK_READ = "format('ick') read"
ICK_STREAM = "format('ick') readStream"
DH_WRITE = "format('dehydrator') write"
DH_STREAM = "format('dehydrator') readStream"
DH_READ = "format('dehydrator') read"
USES = (ICK_WRITE, ICK_READ, ICK_STREAM, DH_WRITE, DH_STREAM, DH_READ)
# set by Spark or its users, not ours; a Declarative Pipelines sink flow passes queryName
SPARKS_OWN = ("path", "paths", "checkpointlocation", "queryname")


@dataclass(frozen=True)
class Option:
    """One option: its name, the uses that take it, its kind (how its text is read), its
    typed default (None: none; ``required``: must be given), bounds or choices, and its
    meaning. README's option tables show ``shown`` (tests/test_options.py checks them)."""

    name: str
    uses: tuple[str, ...]
    kind: str
    default: Any
    meaning: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    required: bool = False

    @property
    def shown(self) -> str:
        """The default as README shows it."""
        if self.default is None:
            return ""
        if self.kind == "duration":
            ms = int(self.default)
            for unit, size in (("h", 3_600_000), ("s", 1000)):
                if ms % size == 0:
                    return f"{ms // size}{unit}"
            return f"{ms}ms"
        if self.kind == "seconds":
            return f"{self.default:g}"
        return str(self.default)


def _option(
    name: str, uses: Iterable[str], kind: str, default: Any, meaning: str, **more: Any
) -> Option:
    return Option(name, tuple(uses), kind, default, meaning, **more)


TYPES = ("string", "binary")
OPTIONS = (
    _option("redis.url", USES, "url", DEFAULT_URL, "Redis URL; several seed nodes for a cluster"),
    _option("redis.cluster", USES, "cluster", "auto", "auto | true | false"),
    _option("redis.username", USES, "text", None, "ACL user"),
    _option("redis.password", USES, "text", None, "password"),
    _option("redis.timeout", USES, "seconds", 10.0, "socket timeout in seconds", minimum=0.001),
    _option(
        "redis.retryTimeout",
        USES,
        "duration",
        round(DEFAULT_RETRY_TIMEOUT * 1000),
        "how long transient errors are retried",
        minimum=0,
    ),
    _option(
        "redis.waitReplicas",
        (ICK_WRITE, DH_WRITE, ICK_STREAM, DH_STREAM),
        "integer",
        0,
        "replicas that must have a write, reservation or commit before it counts as done "
        "(WAIT; 0: no wait)",
        minimum=0,
    ),
    _option(
        "redis.waitTimeout",
        (ICK_WRITE, DH_WRITE, ICK_STREAM, DH_STREAM),
        "duration",
        round(DEFAULT_WAIT_TIMEOUT * 1000),
        "how long a write waits for its replicas",
        minimum=1,
    ),
    _option(
        "ick",
        (ICK_WRITE, ICK_READ, ICK_STREAM),
        "name",
        None,
        "the logical Ick (required)",
        required=True,
    ),
    _option(
        "dehydrator",
        (DH_WRITE, DH_STREAM, DH_READ),
        "name",
        None,
        "the dehydrator (required)",
        required=True,
    ),
    _option("shards", USES, "integer", 1, "number of shards", minimum=1, maximum=MAX_SHARDS),
    _option("memberColumn", (ICK_WRITE,), "text", "member", "member column"),
    _option("scoreColumn", (ICK_WRITE,), "text", "score", "score column"),
    _option(
        "onInvalid",
        (ICK_WRITE,),
        "choice",
        "fail",
        "fail | skip invalid rows",
        choices=("fail", "skip"),
    ),
    _option(
        "chunkSize",
        (ICK_WRITE,),
        "integer",
        bounds.ICK_CHUNK,
        "members per call",
        minimum=1,
        maximum=bounds.ITEMS_PER_CALL,
    ),
    _option(
        "chunkSize",
        (DH_WRITE,),
        "integer",
        bounds.DEHYDRATOR_CHUNK,
        "elements per call",
        minimum=1,
        maximum=bounds.ITEMS_PER_CALL,
    ),
    _option(
        "maxMembersPerTrigger",
        (ICK_STREAM,),
        "integer",
        500_000,
        "members per micro-batch",
        minimum=1,
    ),
    _option(
        "minMembersPerPartition",
        (ICK_STREAM,),
        "integer",
        100_000,
        "members per read task",
        minimum=1,
    ),
    _option(
        "maxAttempts",
        (ICK_STREAM,),
        "integer",
        25,
        "attempts of a member the sink hands back before it is a dead letter",
        minimum=1,
    ),
    _option(
        "retryBackoff",
        (ICK_STREAM,),
        "duration",
        1000,
        "wait before a failed member's first retry; doubles each attempt",
        minimum=1,
    ),
    _option(
        "retryBackoffMax",
        (ICK_STREAM,),
        "duration",
        3_600_000,
        "the longest wait before a retry",
        minimum=1,
    ),
    _option(
        "deadLetters",
        (ICK_READ,),
        "choice",
        "false",
        "true: read the dead letters instead of the members",
        choices=("false", "true"),
    ),
    _option(
        "maxElementsPerTrigger",
        (DH_STREAM,),
        "integer",
        100_000,
        "elements per micro-batch",
        minimum=1,
    ),
    _option(
        "minElementsPerPartition",
        (DH_STREAM,),
        "integer",
        100_000,
        "elements per read task",
        minimum=1,
    ),
    _option("consumerId", (ICK_STREAM, DH_STREAM), "text", None, "owner id of the shard leases"),
    _option(
        "leaseTimeout",
        (ICK_STREAM, DH_STREAM),
        "duration",
        60_000,
        "lease time of a dead query",
        minimum=100,
    ),
    _option("delay", (DH_WRITE,), "duration", None, "due time from now", minimum=0),
    _option(
        "onDuplicate", (DH_WRITE,), "choice", "keep", "keep | replace | error", choices=ON_DUPLICATE
    ),
    _option(
        "elementType", (DH_STREAM, DH_READ), "choice", "string", "string | binary", choices=TYPES
    ),
    _option("idType", (DH_STREAM, DH_READ), "choice", "string", "string | binary", choices=TYPES),
    _option(
        "memberType", (ICK_READ, ICK_STREAM), "choice", "string", "string | binary", choices=TYPES
    ),
)
CONNECTION_OPTIONS = tuple(o.name for o in OPTIONS if o.name.startswith("redis."))


def taken_by(use: str) -> list[str]:
    """The names of the options that ``use`` takes."""
    return [o.name for o in OPTIONS if use in o.uses]


READS = {"ick": (ICK_READ, ICK_STREAM), "dehydrator": (DH_READ, DH_STREAM)}
"""The read uses of each format: Spark asks a source for its schema at ``load()``
without saying whether it reads a batch or a stream."""
