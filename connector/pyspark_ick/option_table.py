"""Every option of every format, in one table: the uses (format and direction) that take
it, its kind (how its text is read), typed default, bounds or choices and meaning.
options.py reads a format's options by it; the docs' options reference is generated from
it (docs/hooks.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import bounds
from .clients import DEFAULT_RETRY_TIMEOUT, DEFAULT_WAIT_TIMEOUT
from .dehydrator import ON_DUPLICATE
from .keys import MAX_SHARDS
from .lanes import LANES
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
    meaning (short sentences: the options reference shows it)."""

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
        """The default as the docs show it."""
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
    _option(
        "redis.url",
        USES,
        "url",
        DEFAULT_URL,
        "`redis://`, `rediss://` (TLS; `?ssl_ca_certs=/path/ca.crt` for a private CA) or "
        "`unix:///path/redis.sock`. A cluster's URL may list several seed nodes: "
        "`redis://h1:7000,h2:7000/0`. Sentinel: "
        "`redis+sentinel://[user:password@]s1[:26379],s2,s3/SERVICE[/DB]`",
    ),
    _option(
        "redis.cluster",
        USES,
        "cluster",
        "auto",
        "`auto` asks the server whether it is a cluster node; `true` or `false` forces it",
    ),
    _option("redis.username", USES, "text", None, "ACL user. Default: the URL's"),
    _option(
        "redis.password",
        USES,
        "text",
        None,
        "Password. Default: the URL's. Never logged, never in errors or `repr`",
    ),
    _option("redis.timeout", USES, "seconds", 10.0, "Socket timeout in seconds", minimum=0.001),
    _option(
        "redis.retryTimeout",
        USES,
        "duration",
        round(DEFAULT_RETRY_TIMEOUT * 1000),
        "How long a call rides out a Redis that restarts, fails over or migrates a slot, retrying "
        "with backoff and jitter. 60 s covers a Sentinel or Cluster failover at their defaults. "
        "`0` never retries",
        minimum=0,
    ),
    _option(
        "redis.waitReplicas",
        (ICK_WRITE, DH_WRITE, ICK_STREAM, DH_STREAM),
        "integer",
        0,
        "Writers and stream readers only. A write, a micro-batch's reservation and commit, and a "
        "`retry_later` hand-back count as done only once this many replicas have them (`WAIT`). "
        "`0` sends no `WAIT`",
        minimum=0,
    ),
    _option(
        "redis.waitTimeout",
        (ICK_WRITE, DH_WRITE, ICK_STREAM, DH_STREAM),
        "duration",
        round(DEFAULT_WAIT_TIMEOUT * 1000),
        "Writers and stream readers only. How long one `WAIT` waits. Too few replicas are waited "
        "for again until `redis.retryTimeout`, then the call fails, naming `redis.waitReplicas`",
        minimum=1,
    ),
    _option(
        "ick",
        (ICK_WRITE, ICK_READ, ICK_STREAM),
        "name",
        None,
        "The logical Ick's name (no `{` or `}`)",
        required=True,
    ),
    _option(
        "dehydrator",
        (DH_WRITE, DH_STREAM, DH_READ),
        "name",
        None,
        "The dehydrator's name (no `{` or `}`)",
        required=True,
    ),
    _option(
        "shards",
        USES,
        "integer",
        None,
        "Recorded in Redis on first use. Omitted: the recorded count, or 1 for a new one. A "
        "different count fails at `load()`, naming both",
        minimum=1,
        maximum=MAX_SHARDS,
    ),
    _option(
        "memberColumn",
        (ICK_WRITE,),
        "text",
        "member",
        "The member column: string, integer, boolean, decimal or date (written as its string "
        "form), or binary (written as its bytes). Cast floats and timestamps to string yourself",
    ),
    _option(
        "scoreColumn",
        (ICK_WRITE,),
        "text",
        "score",
        "The score column: numeric, or timestamp (seconds since the epoch). Absent: Redis server "
        "time at the add",
    ),
    _option(
        "lane",
        (ICK_WRITE,),
        "choice",
        "live",
        "`backfill` queues the rows behind every live member: a reindex or repair that never "
        "delays live changes. A member in both lanes is served once, as live. A backfill score "
        "column takes finite scores in [0, 1e13); a live one refuses finite scores from 1e13 on",
        choices=LANES,
    ),
    _option(
        "onInvalid",
        (ICK_WRITE,),
        "choice",
        "fail",
        "`fail`: a null member, or a null or NaN score, fails the task, naming the column and the "
        "count. `skip`: such rows are dropped, counted and logged. `inf` and `-inf` are scores",
        choices=("fail", "skip"),
    ),
    _option(
        "chunkSize",
        (ICK_WRITE,),
        "integer",
        bounds.ICK_CHUNK,
        "Members per Lua call: no call may hold a shared Redis long",
        minimum=1,
        maximum=bounds.ITEMS_PER_CALL,
    ),
    _option(
        "chunkSize",
        (DH_WRITE,),
        "integer",
        bounds.DEHYDRATOR_CHUNK,
        "Elements per Lua call. An element costs Redis about twice a member",
        minimum=1,
        maximum=bounds.ITEMS_PER_CALL,
    ),
    _option(
        "maxMembersPerTrigger",
        (ICK_STREAM,),
        "integer",
        500_000,
        "Members per micro-batch, split across shards. While a backlog drains, the next batch is "
        "reserved ahead: up to twice this many are reserved at once",
        minimum=1,
    ),
    _option(
        "backfillShare",
        (ICK_STREAM,),
        "fraction",
        0.1,
        "The part of each micro-batch kept for the backfill lane while live members wait, so it "
        "always progresses (at 0.1, live work that fills every batch keeps 90% of each). Live "
        "members take the rest first; with no live member waiting the backfill takes the whole "
        "batch. 0: the backfill gets only what live members leave",
        minimum=0.0,
        maximum=1.0,
    ),
    _option(
        "minMembersPerPartition",
        (ICK_STREAM,),
        "integer",
        100_000,
        "A micro-batch is read in `max(1, members // this)` Spark tasks",
        minimum=1,
    ),
    _option(
        "maxAttempts",
        (ICK_STREAM,),
        "integer",
        25,
        "Attempts of a member the sink hands back (`retry_later`) before it is a dead letter. "
        "The stream reader's value decides, at the batch's commit",
        minimum=1,
    ),
    _option(
        "retryBackoff",
        (ICK_STREAM,),
        "duration",
        1000,
        "The wait before a handed-back member's first retry. It doubles with each attempt; half "
        "of it is jitter",
        minimum=1,
    ),
    _option(
        "retryBackoffMax",
        (ICK_STREAM,),
        "duration",
        3_600_000,
        "The longest wait before a retry",
        minimum=1,
    ),
    _option(
        "deadLetters",
        (ICK_READ,),
        "choice",
        "false",
        "`true` reads the dead letters instead: `member, shard, attempts, score, error, "
        "failedAt, deadAt`",
        choices=("false", "true"),
    ),
    _option(
        "maxElementsPerTrigger",
        (DH_STREAM,),
        "integer",
        100_000,
        "Due elements claimed per micro-batch",
        minimum=1,
    ),
    _option(
        "minElementsPerPartition",
        (DH_STREAM,),
        "integer",
        100_000,
        "A micro-batch is read in `max(1, elements // this)` Spark tasks",
        minimum=1,
    ),
    _option(
        "consumerId",
        (ICK_STREAM, DH_STREAM),
        "text",
        None,
        "Owner id of the shard leases. Default: random per start. A restart with the same id "
        "takes its leases back at once",
    ),
    _option(
        "leaseTimeout",
        (ICK_STREAM, DH_STREAM),
        "duration",
        60_000,
        "A dead query's leases expire after this. A live query renews them by a heartbeat",
        minimum=100,
    ),
    _option(
        "delay",
        (DH_WRITE,),
        "duration",
        None,
        "The due time from now. Or give column `delayMs` or `releaseAt` (timestamp) instead: "
        "exactly one of the three",
        minimum=0,
    ),
    _option(
        "onDuplicate",
        (DH_WRITE,),
        "choice",
        "keep",
        "An id already parked: `keep` the old element (retries stay idempotent), `replace` it, "
        "or fail with `error`",
        choices=ON_DUPLICATE,
    ),
    _option(
        "elementType",
        (DH_STREAM, DH_READ),
        "choice",
        "string",
        "`binary` for an `element binary` column",
        choices=TYPES,
    ),
    _option(
        "idType",
        (DH_STREAM, DH_READ),
        "choice",
        "string",
        "`binary` for an `id binary` column. An id that is not UTF-8 fails a `string` read, "
        "naming it; its claim stays, so a restart with `binary` delivers it",
        choices=TYPES,
    ),
    _option(
        "memberType",
        (ICK_READ, ICK_STREAM),
        "choice",
        "string",
        "`binary` for a `member binary` column. A member that is not UTF-8 fails a `string` "
        "read, naming it; its reservation stays, so a restart with `binary` delivers it",
        choices=TYPES,
    ),
)
CONNECTION_OPTIONS = tuple(o.name for o in OPTIONS if o.name.startswith("redis."))


def taken_by(use: str) -> list[str]:
    """The names of the options that ``use`` takes."""
    return [o.name for o in OPTIONS if use in o.uses]


IGNORES = {ICK_READ: (ICK_WRITE,), DH_READ: (DH_WRITE,)}
"""A batch read takes, and ignores, the write options of its format: a SQL view ``USING
ick|dehydrator OPTIONS (...)`` is one table, whose OPTIONS reach its INSERT and its SELECT
alike (a dehydrator view's ``delay``, say)."""

READS = {"ick": (ICK_READ, ICK_STREAM), "dehydrator": (DH_READ, DH_STREAM)}
"""The read uses of each format: Spark asks a source for its schema at ``load()``
without saying whether it reads a batch or a stream."""
