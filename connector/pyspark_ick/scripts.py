"""Loads the Lua scripts of ``lua/`` once per client and runs them.

Every script is run by EVALSHA. A script is loaded (SCRIPT LOAD, which redis-py sends to
every primary of a cluster) the first time a client uses it, so cluster pipelines find it
on every node; a NOSCRIPT reply (server restarted, failed over or flushed) reloads and
retries. Transient errors are retried for the client's redis.retryTimeout (retry.py).
Errors raised by Redis become IckScriptError (RedisFullError when Redis is at maxmemory),
connection errors IckConnectionError.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from . import retry
from .errors import IckConnectionError, IckError, IckScriptError, RedisFullError

PRELUDE = "_prelude"

ITEMS_PER_CALL = 1000
"""The most members (or dehydrator elements) one call of the connector touches: a call
holds Redis for a few ms at most, whatever the batch (measured: bench/bench_neighbour.py).
A big micro-batch is many such calls, one after the other."""

CALLS_PER_ROUND = 1
"""The most script calls pipelined in one round trip. Redis reads a client's whole pipeline
and runs its calls back to back: with 4 a round, a neighbour's GET waited 22 ms at p99.9
while df.write ran (bench_neighbour), 12 ms with 1, at the same writer throughput."""


def lua_dir() -> Path:
    """The folder of the Lua scripts: inside the wheel, or the repository's ``lua/``."""
    packaged = Path(str(resources.files("pyspark_ick"))) / "lua"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "lua"


@cache
def source(name: str) -> str:
    """The text Redis runs for script ``name``: the shared prelude, then the script."""
    folder = lua_dir()
    try:
        body = (folder / f"{name}.lua").read_text()
        prelude = (folder / f"{PRELUDE}.lua").read_text()
    except FileNotFoundError as exc:
        raise IckError(f"Lua script {name!r} not found in {folder}") from exc
    return prelude + "\n" + body


@cache
def sha(name: str) -> str:
    return hashlib.sha1(source(name).encode()).hexdigest()


# client -> names of the scripts already loaded through it
_loaded: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def ensure_loaded(client: Any, *names: str, force: bool = False) -> None:
    """Load scripts ``names`` through ``client`` (every primary of a cluster) once."""
    try:
        _load(client, names, force)
    except redis.RedisError as exc:
        raise translate(exc) from exc


def _load(client: Any, names: Sequence[str], force: bool = False) -> None:
    done = _loaded.setdefault(client, set())
    for name in names:
        if force or name not in done:
            client.script_load(source(name))
            done.add(name)


def translate(exc: Exception, what: str | None = None) -> IckError:
    """The IckError for an error raised by redis-py; ``what`` names the Ick or dehydrator."""
    from .connection import connection_error, permanent

    message = str(exc)
    if " of pipeline caused error: " in message:
        message = message.split(" of pipeline caused error: ", 1)[1]  # no arguments echoed
    if permanent(exc):  # a refused password or certificate: not retried
        return connection_error(exc)
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, RedisClusterException)) \
            or retry.transient(exc):
        return IckConnectionError(
            f"{what or 'Redis'}: Redis did not answer within redis.retryTimeout "
            f"(restarting, failing over, migrating a slot?): {type(exc).__name__}: {message}")
    if "ICK " in message:  # raised by ick_fail in lua/_prelude.lua
        message = message[message.index("ICK ") + 4:]
    # Redis 7 appends the script location to errors raised inside scripts
    message = message.split(" script: ")[0].strip()
    if isinstance(exc, redis.exceptions.OutOfMemoryError) or "OOM command not allowed" in message:
        said = message[message.index("command not allowed"):] if "command not allowed" in \
            message else message  # Redis 6.2 wraps it in "Error running script ..."
        return RedisFullError(
            f"{what or 'the write'}: Redis is full (used memory > maxmemory, and the "
            "eviction policy keeps every key): nothing was added. Let the consumers drain "
            f"the queues, or raise maxmemory. Redis said: {said}")
    return IckScriptError(message)  # script errors name their keys themselves


def run(client: Any, name: str, keys: Sequence[str], args: Sequence[Any] = (), *,
        what: str | None = None, replay_safe: bool = True) -> Any:
    """Run script ``name`` on ``client`` (not a pipeline) and return its reply.

    Transient errors are retried (retry.py); ``replay_safe=False`` for a script whose
    second run after a lost reply would lose data. ``what`` names the target in errors.
    """
    def once() -> Any:
        _load(client, [name])
        try:
            return client.evalsha(sha(name), len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            _load(client, [name], force=True)
            return client.evalsha(sha(name), len(keys), *keys, *args)

    try:
        return retry.call(once, retry.timeout_of(client), replay_safe=replay_safe,
                          what=what or f"script {name}")
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc, what) from exc


Call = tuple[str, Sequence[str], Sequence[Any]]  # script name, KEYS, ARGV


class Calls:
    """What ``pipelined``'s ``build`` queues into: the script calls, sent later in rounds."""

    def __init__(self) -> None:
        self.calls: list[Call] = []


def queue(pipe: Any, name: str, keys: Sequence[str], args: Sequence[Any] = ()) -> None:
    """Queue script ``name`` on ``pipe`` (a redis-py pipeline, or the Calls of ``build``)."""
    if isinstance(pipe, Calls):
        pipe.calls.append((name, keys, args))
        return
    # execute_command, not pipe.evalsha: redis-py blocks the latter in cluster pipelines,
    # though it routes EVALSHA by its keys like any command
    pipe.execute_command("EVALSHA", sha(name), len(keys), *keys, *args)


def pipelined(client: Any, names: Sequence[str], build: Callable[[Any], object], *,
              what: str | None = None) -> list[Any]:
    """The replies of the calls ``build(calls)`` queues (``queue``), sent as ``run_many``
    does. For idempotent calls (ickadd, reads): a lost reply is sent again."""
    del names  # every script loads on first use
    calls = Calls()
    build(calls)
    return run_many(client, calls.calls, what=what)


def run_many(client: Any, calls: Sequence[Call], *, what: str | None = None,
             replay_safe: bool = True) -> list[Any]:
    """Replies of ``calls``, pipelined ``CALLS_PER_ROUND`` to a round trip (Redis runs the
    calls of one round back to back: a deeper pipeline would be one long stall too).

    Retried like ``run`` (``replay_safe=False`` for calls that remove data and return it:
    poll, xack). A call refused before it ran (NOSCRIPT, TRYAGAIN, ...) runs again alone,
    so calls that remove data are safe here. Every call runs, as in one pipeline: a script
    that raised does not stop the others; the first error is raised at the end.
    """
    replies: list[Any] = []
    for first in range(0, len(calls), CALLS_PER_ROUND):
        replies += _round(client, calls[first:first + CALLS_PER_ROUND], what, replay_safe)
    for reply in replies:
        if isinstance(reply, IckError):
            raise reply
    return replies


def _round(client: Any, calls: Sequence[Call], what: str | None, replay_safe: bool
           ) -> list[Any]:
    """Replies of one round; an IckError in place of a call whose script raised one."""
    if len(calls) == 1:
        try:
            return [run(client, *calls[0], what=what, replay_safe=replay_safe)]
        except IckScriptError as exc:
            return [exc]

    def once() -> list[Any]:
        _load(client, list({name for name, _, _ in calls}))
        pipe = client.pipeline(transaction=False)
        for name, keys, args in calls:
            queue(pipe, name, keys, args)
        return list(pipe.execute(raise_on_error=False))

    try:
        replies = retry.call(once, retry.timeout_of(client), replay_safe=replay_safe,
                             what=what or "pipeline")
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc, what) from exc
    for i, reply in enumerate(replies):
        if isinstance(reply, redis.RedisError) and (  # did not run: run it again alone
                isinstance(reply, redis.exceptions.NoScriptError) or retry.not_run(reply)):
            replies[i] = run(client, *calls[i], what=what, replay_safe=replay_safe)
        elif isinstance(reply, redis.RedisError):
            replies[i] = translate(reply, what)
    return replies


def command(client: Any, fn: Callable[[], Any], *, what: str | None = None) -> Any:
    """``fn()``: plain redis-py commands on ``client``, retried and translated like scripts
    (only for commands that are safe to repeat)."""
    try:
        return retry.call(fn, retry.timeout_of(client), what=what or "Redis")
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc, what) from exc
