"""Loads the Lua scripts of ``lua/`` once per client and runs them.

Every script is run by EVALSHA. A script is loaded (SCRIPT LOAD, which redis-py sends to
every primary of a cluster) the first time a client uses it, so cluster pipelines find it
on every node; a NOSCRIPT reply (server restarted, failed over or flushed) reloads and
retries. Transient errors are retried for the client's redis.retryTimeout (retry.py).
Errors become IckErrors through redis_errors.translate.
"""

from __future__ import annotations

import hashlib
import re
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import msgpack
import redis
from redis.exceptions import RedisClusterException

from . import retry
from .connection import Client
from .errors import IckError, IckScriptError
from .redis_errors import translate

PRELUDE = "_prelude"

STR32, ARRAY32 = 0xDB, 0xDD  # msgpack str 32 and array 32
MSGPACK_HEAD = struct.Struct(">BI").pack  # tag, then a big-endian length or count


def pack_strings(values: Sequence[bytes]) -> bytes:
    """The rows argument of the bulk scripts (ickadd, dh_push): one msgpack array of
    strings, which Redis decodes in C (``cmsgpack.unpack``, bundled by every Redis and
    Valkey): no Lua loop parses it, and numbers stay text that ZADD parses itself.

    This layout (str 32 heads) is what columns.py builds column-wise for the Spark sinks;
    the plain client packs with ``pack_values``, the same array in msgpack's shortest
    heads."""
    parts = [MSGPACK_HEAD(ARRAY32, len(values))]
    for value in values:
        parts += (MSGPACK_HEAD(STR32, len(value)), value)
    return b"".join(parts)


def pack_values(values: list[Any]) -> bytes:
    """``pack_strings`` of ``values`` (str, taken as their UTF-8 bytes with surrogate
    escapes, or bytes) by msgpack's C packer: the plain client's rows, 4-5x faster than
    ``pack_strings`` and with no encoding of each str first (docs/sizing.md). Strings go
    as msgpack's raw type (``use_bin_type=False``), which every Redis's cmsgpack reads as
    a Lua string."""
    try:
        packer = _packers.packer
    except AttributeError:  # a Packer per thread: one is not safe to share
        packer = _packers.packer = msgpack.Packer(
            use_bin_type=False, unicode_errors="surrogateescape"
        )
    return packer.pack(values)


_packers = threading.local()  # a Packer is 0.4 us cheaper than msgpack.packb a call


def lua_dir() -> Path:
    """The folder of the Lua scripts: inside the wheel, or the repository's ``lua/``."""
    packaged = Path(str(resources.files("pyspark_ick"))) / "lua"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "lua"


@cache
def source(name: str) -> str:
    """The text Redis runs for script ``name``: the prelude's helpers that it uses (Redis
    defines every one on each call: ~3 us for all of them), then the script."""
    folder = lua_dir()
    try:
        body = (folder / f"{name}.lua").read_text()
        prelude = (folder / f"{PRELUDE}.lua").read_text()
    except FileNotFoundError as exc:
        raise IckError(f"Lua script {name!r} not found in {folder}") from exc
    return "".join(block + "\n" for block in helpers(prelude, body)) + body


def helpers(prelude: str, body: str) -> list[str]:
    """The blocks of ``prelude`` (separated by blank lines) that ``body`` uses, directly
    or through another block, in prelude order."""

    def code(lua: str) -> str:
        return re.sub(r"--[^\n]*", "", lua)

    blocks = prelude.strip().split("\n\n")
    defines = [set(re.findall(r"^local (?:function )?(\w+)", b, re.M)) for b in blocks]
    used, text = [False] * len(blocks), code(body)
    changed = True
    while changed:
        changed = False
        for i, names in enumerate(defines):
            if not used[i] and any(re.search(rf"\b{n}\b", text) for n in names):
                used[i], changed, text = True, True, text + code(blocks[i])
    return [b for b, u in zip(blocks, used, strict=True) if u]


@cache
def sha(name: str) -> str:
    return hashlib.sha1(source(name).encode()).hexdigest()


# client -> names of the scripts already loaded through it
_loaded: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def ensure_loaded(client: Client, *names: str, force: bool = False) -> None:
    """Load scripts ``names`` through ``client`` (every primary of a cluster) once,
    riding out transient errors for the client's redis.retryTimeout as every call does.
    (``queue`` does not need it: it cannot meet NOSCRIPT.)"""
    try:
        retry.call(
            lambda: _load(client, names, force), retry.timeout_of(client), what="SCRIPT LOAD"
        )
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc) from exc


def _load(client: Client, names: Sequence[str], force: bool = False) -> None:
    done = _loaded.setdefault(client, set())
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
    as ``_Pipe`` sends (redis-py's per-command wrapper cost 3-4 us a call,
    docs/sizing.md): the retry rule, NOSCRIPT and the translation of errors cost nothing
    until a call fails (then ``again`` applies them).
    """
    started = time.monotonic()
    done = _loaded.get(client)
    if done is None or name not in done:
        return again(client, (name, keys, args), None, started, what, replay_safe)
    pool = _pool_of(client, keys)
    try:
        if pool is None:
            return client.evalsha(sha(name), len(keys), *keys, *args)
        conn = _connection(pool)
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
        _load(client, [name], force=reload)
        try:
            return client.evalsha(sha(name), len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            _load(client, [name], force=True)
            return client.evalsha(sha(name), len(keys), *keys, *args)

    try:
        return retry.call(
            once,
            retry.timeout_of(client),
            replay_safe=replay_safe,
            what=what or f"script {name}",
            error=None if reload else error,
            started=started,
        )
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc, what) from exc


Call = tuple[str, Sequence[str], Sequence[Any]]  # script name, KEYS, ARGV


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


def run_many(
    client: Client,
    calls: Iterable[Call],
    *,
    what: str | None = None,
    replay_safe: bool = True,
    overlap: bool = False,
) -> list[Any]:
    """Replies of ``calls`` (taken from the iterable one at a time), in order.

    One after the other by default: Redis reads a client's whole pipeline and runs it
    back to back, so with 4 calls a round a neighbour's GET waited 22 ms at p99.9 while
    df.write ran, 12 ms with 1, at the same writer throughput (docs/sizing.md). With
    ``overlap`` (the plain client's bulk writes, whose ``calls`` pack each call as it is
    taken), at most two are out at once: one running, the next sent behind it and packed
    while the first ran (on one connection, ``_Pipe``), so a neighbour waits for at most
    two bounded calls. Not for the Spark sinks: two tasks with two out each are 4 calls a
    round again (their GET p99 went from 7.8 to 12.2 ms, for no throughput). Calls that
    are not replay-safe always go one after the other: a lost reply must not lose two
    calls' data. Each call is retried by the rule of ``run``; every call runs, as in a
    pipeline: a script that raised does not stop the others (a shard's refusal must not
    keep another shard's rows out); the first such error is raised at the end.
    """
    replies: list[Any] = []
    refused: IckScriptError | None = None
    if not (overlap and replay_safe):
        for name, keys, args in calls:
            try:
                replies.append(run(client, name, keys, args, what=what, replay_safe=replay_safe))
            except IckScriptError as exc:
                refused = refused or exc
                replies.append(None)
    else:
        with _Pipe(client, what) as pipe:
            for call in calls:
                pipe.send(call)
            replies, refused = pipe.finish()
    if refused is not None:
        raise refused
    return replies


NOT_SENT = object()
"""The outcome of a call ``_Pipe`` did not send (no pool for it): ``again`` makes it."""


class _Pipe:
    """Calls sent ahead on one connection of ``client``'s pool (a cluster: of the node
    that holds the call's keys), at most one behind the one running. A call whose reply
    is an error, or that a broken connection left without one, goes through ``again``
    (``run``'s retry rule, its deadline from the call's first send) once the replies of
    the calls sent before it are in, so failed calls are made again in their order."""

    def __init__(self, client: Client, what: str | None) -> None:
        self.client, self.what = client, what
        self.pool: Any = None
        self.conn: Any = None
        self.out: list[tuple[int, Call, float]] = []  # sent, reply not read yet
        self.failed: list[tuple[int, Call, float, object]] = []  # to make again, in order
        self.replies: list[Any] = []
        self.refused: IckScriptError | None = None

    def __enter__(self) -> _Pipe:
        return self

    def send(self, call: Call) -> None:
        name, keys, args = call
        index, started = len(self.replies), time.monotonic()
        self.replies.append(None)
        pool = _pool_of(self.client, keys)
        if pool is not self.pool:  # another node (or none): what is out comes back first
            self._read_all()
            self._release()
            self.pool = pool
        if pool is None:
            self.failed.append((index, call, started, NOT_SENT))
        else:
            try:
                _load(self.client, [name])
                if self.conn is None:
                    self.conn = _connection(pool)
                self.conn.send_command("EVALSHA", sha(name), len(keys), *keys, *args)
                self.out.append((index, call, started))
            except Exception as exc:  # noqa: BLE001 (again raises it unless the rule retries it)
                self.failed.append((index, call, started, exc))
                self._broken(exc)
            if len(self.out) > 1:
                self._read_one()
        if self.failed:
            self._settle()

    def _read_one(self) -> None:
        index, call, started = self.out.pop(0)
        try:
            self.replies[index] = self.conn.read_response()
        except redis.exceptions.ResponseError as exc:  # a reply: the connection is in step
            self.failed.append((index, call, started, exc))
        except Exception as exc:  # noqa: BLE001 (again raises it unless the rule retries it)
            self.failed.append((index, call, started, exc))
            self._broken(exc)

    def _read_all(self) -> None:
        while self.out:
            self._read_one()

    def _settle(self) -> None:
        """Make the failed calls again, in order, once every reply before them is in."""
        self._read_all()
        failed, self.failed = sorted(self.failed, key=lambda f: f[0]), []
        for index, call, started, outcome in failed:
            error = None if outcome is NOT_SENT else outcome
            try:
                self.replies[index] = again(
                    self.client,
                    call,
                    error,  # type: ignore[arg-type]
                    started,
                    self.what,
                    True,
                )
            except IckScriptError as exc:
                self.refused = self.refused or exc

    def _broken(self, exc: Exception) -> None:
        """The connection failed: it goes. Every call still out on it may have run; they
        are replay-safe, so ``again`` makes them again (``exc`` tells it what happened)."""
        self.failed += [(index, call, started, exc) for index, call, started in self.out]
        self.out = []
        if self.conn is not None:
            self.conn.disconnect()
        self._release()

    def _release(self) -> None:
        if self.conn is not None:
            if self.out:  # replies never read (an exception of the caller's)
                self.conn.disconnect()
                self.out = []
            self.pool.release(self.conn)
            self.conn = None

    def finish(self) -> tuple[list[Any], IckScriptError | None]:
        """Every call's reply, in order (None when refused), and the first refusal."""
        self._settle()
        self._release()
        return self.replies, self.refused

    def __exit__(self, *exc: object) -> None:
        self._release()


def _pool_of(client: Client, keys: Sequence[str]) -> Any:
    """The connection pool that a call on ``keys`` goes to, or None (a client that holds
    one connection, a cluster node not known yet): then the call goes through ``run``."""
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


def _connection(pool: Any) -> Any:
    """A connection of ``pool``, connected (redis-py before 5.3 wants a command name)."""
    try:
        return pool.get_connection()
    except TypeError:
        return pool.get_connection("EVALSHA")


def command(client: Client, fn: Callable[[], Any], *, what: str | None = None) -> Any:
    """``fn()``: plain redis-py commands on ``client``, retried and translated like scripts
    (only for commands that are safe to repeat)."""
    try:
        return retry.call(fn, retry.timeout_of(client), what=what or "Redis")
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc, what) from exc
