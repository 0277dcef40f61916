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
import weakref
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

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
    Valkey): no Lua loop parses it, and numbers stay text that ZADD parses itself."""
    parts = [MSGPACK_HEAD(ARRAY32, len(values))]
    for value in values:
        parts += (MSGPACK_HEAD(STR32, len(value)), value)
    return b"".join(parts)



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
        retry.call(lambda: _load(client, names, force), retry.timeout_of(client),
                   what="SCRIPT LOAD")
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc) from exc


def _load(client: Client, names: Sequence[str], force: bool = False) -> None:
    done = _loaded.setdefault(client, set())
    for name in names:
        if force or name not in done:
            client.script_load(source(name))
            done.add(name)


def run(client: Client, name: str, keys: Sequence[str], args: Sequence[Any] = (), *,
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


def run_many(client: Client, calls: Sequence[Call], *, what: str | None = None,
             replay_safe: bool = True) -> list[Any]:
    """Replies of ``calls``, each sent as ``run`` sends it, one after the other.

    Not pipelined: Redis reads a client's whole pipeline and runs its calls back to back,
    so with 4 calls a round a neighbour's GET waited 22 ms at p99.9 while df.write ran,
    12 ms with 1, at the same writer throughput (bench/bench_neighbour.py). Every call
    runs, as in a pipeline: a script that raised does not stop the others (a shard's
    refusal must not keep another shard's rows out); the first such error is raised at
    the end.
    """
    replies: list[Any] = []
    refused: IckScriptError | None = None
    for name, keys, args in calls:
        try:
            replies.append(run(client, name, keys, args, what=what, replay_safe=replay_safe))
        except IckScriptError as exc:
            refused = refused or exc
            replies.append(None)
    if refused is not None:
        raise refused
    return replies


def command(client: Client, fn: Callable[[], Any], *, what: str | None = None) -> Any:
    """``fn()``: plain redis-py commands on ``client``, retried and translated like scripts
    (only for commands that are safe to repeat)."""
    try:
        return retry.call(fn, retry.timeout_of(client), what=what or "Redis")
    except (redis.RedisError, RedisClusterException) as exc:
        raise translate(exc, what) from exc
