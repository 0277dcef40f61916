"""Loads the Lua scripts of ``lua/`` once per client and runs them, one call at a time.

Every script is run by EVALSHA. A script is loaded (SCRIPT LOAD, which redis-py sends to
every primary of a cluster) the first time a client uses it, so cluster pipelines find it
on every node; a NOSCRIPT reply (server restarted, failed over or flushed) reloads and
retries. Transient errors are retried for the client's redis.retryTimeout (retry.py).
Errors become IckErrors through redis_errors.translate. Many calls with one out behind
the other: pipe.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from . import retry
from .clients import Client, settings
from .lua import sha, source
from .redis_errors import translate

Call = tuple[str, Sequence[str], Sequence[Any]]  # script name, KEYS, ARGV


def ensure_loaded(client: Client, *names: str, force: bool = False) -> None:
    """Load scripts ``names`` through ``client`` (every primary of a cluster) once,
    riding out transient errors for the client's redis.retryTimeout as every call does.
    (``queue`` does not need it: it cannot meet NOSCRIPT.)"""
    try:
        retry.call(
            lambda: load(client, names, force),
            settings(client).retry_timeout,
            what="SCRIPT LOAD",
        )
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc) from exc


def load(client: Client, names: Sequence[str], force: bool = False) -> None:
    """SCRIPT LOAD each of ``names`` not loaded through ``client`` yet (``force``: all)."""
    done = settings(client).loaded
    for name in names:
        if force or name not in done:
            client.script_load(source(name))
            done.add(name)


def run(
    client: Client,
    name: str,
    keys: Sequence[str],
    args: Sequence[Any] = (),
    *,
    what: str | None = None,
    replay_safe: bool = True,
) -> Any:
    """Run script ``name`` on ``client`` (not a pipeline) and return its reply.

    Transient errors are retried (retry.py); ``replay_safe=False`` for a script whose
    second run after a lost reply would lose data. ``what`` names the target in errors.
    A script loaded already is sent straight away, on a connection of the client's pool
    as ``pipe.Pipe`` sends, skipping redis-py's per-command wrapper (docs/sizing.md): the
    retry rule, NOSCRIPT and the translation of errors cost nothing until a call fails
    (then ``again`` applies them).
    """
    started = time.monotonic()
    if name not in settings(client).loaded:
        return again(client, (name, keys, args), None, started, what, replay_safe)
    pool = pool_of(client, keys)
    try:
        if pool is None:
            return client.evalsha(sha(name), len(keys), *keys, *args)
        conn = connection_of(pool)
    except Exception as exc:  # noqa: BLE001 (again raises it unless the rule retries it)
        return again(client, (name, keys, args), exc, started, what, replay_safe)
    try:
        conn.send_command("EVALSHA", sha(name), len(keys), *keys, *args)
        reply = conn.read_response()
    except redis.exceptions.ResponseError as exc:  # a reply: the connection is in step
        pool.release(conn)
        return again(client, (name, keys, args), exc, started, what, replay_safe)
    except BaseException as exc:
        conn.disconnect()  # a reply may still be on its way: the connection goes
        pool.release(conn)
        if not isinstance(exc, Exception):
            raise
        return again(client, (name, keys, args), exc, started, what, replay_safe)
    pool.release(conn)
    return reply


def again(
    client: Client,
    call: Call,
    error: Exception | None,
    started: float,
    what: str | None,
    replay_safe: bool,
) -> Any:
    """The reply of ``call`` whose first attempt (made at ``started``) raised ``error``
    (None: not made yet), by the retry rule: NOSCRIPT reloads, a transient error is
    retried if the rule allows, any other is translated."""
    name, keys, args = call
    reload = isinstance(error, redis.exceptions.NoScriptError)  # it did not run

    def once() -> Any:
        load(client, [name], force=reload)
        try:
            return client.evalsha(sha(name), len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            load(client, [name], force=True)
            return client.evalsha(sha(name), len(keys), *keys, *args)

    try:
        return retry.call(
            once,
            settings(client).retry_timeout,
            replay_safe=replay_safe,
            what=what or f"script {name}",
            error=None if reload else error,
            started=started,
        )
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc, what) from exc


def queue(pipe: Any, name: str, keys: Sequence[str], args: Sequence[Any] = ()) -> None:
    """Queue script ``name`` on a redis-py pipeline of the caller's.

    Sent as EVAL with the script's text, not EVALSHA: a pipeline cannot reload a script
    that Redis forgot (a restart, a failover, SCRIPT FLUSH) and send its calls again, as
    ``run`` does, without running the rest of the caller's pipeline twice. Redis finds
    the text in its script cache by its SHA1 and does not compile it again.
    """
    # execute_command, not pipe.eval: redis-py blocks the latter in cluster pipelines,
    # though it routes EVAL by its keys like any command
    pipe.execute_command("EVAL", source(name), len(keys), *keys, *args)


def pool_of(client: Client, keys: Sequence[str]) -> Any:
    """The connection pool that a call on ``keys`` goes to, or None (a client that holds
    one connection, a cluster node not known yet): then the call goes through ``again``."""
    if isinstance(client, redis.Redis):
        return None if client.connection is not None else client.connection_pool
    if isinstance(client, redis.RedisCluster) and keys:
        try:
            node = client.get_node_from_key(keys[0])
        except (redis.RedisError, RedisClusterException):
            return None
        connection = getattr(node, "redis_connection", None)
        return connection.connection_pool if connection is not None else None
    return None


def connection_of(pool: Any) -> Any:
    """A connection of ``pool``, connected (redis-py before 5.3 wants a command name)."""
    try:
        return pool.get_connection()
    except TypeError:
        return pool.get_connection("EVALSHA")


def command(client: Client, fn: Callable[[], Any], *, what: str | None = None) -> Any:
    """``fn()``: plain redis-py commands on ``client``, retried and translated like scripts
    (only for commands that are safe to repeat)."""
    try:
        return retry.call(fn, settings(client).retry_timeout, what=what or "Redis")
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc, what) from exc
