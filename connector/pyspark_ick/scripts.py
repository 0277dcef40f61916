"""Loads the Lua scripts of ``lua/`` once per client and runs them.

Every script is run by EVALSHA. A script is loaded (SCRIPT LOAD, which redis-py sends to
every primary of a cluster) the first time a client uses it, so cluster pipelines find it
on every node; a NOSCRIPT reply (server restarted or flushed) reloads and retries.
Errors raised by Redis become IckScriptError.
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

from .errors import IckError, IckScriptError

PRELUDE = "_prelude"


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
    done = _loaded.setdefault(client, set())
    for name in names:
        if force or name not in done:
            try:
                client.script_load(source(name))
            except redis.RedisError as exc:
                raise translate(exc) from exc
            done.add(name)


def translate(exc: redis.RedisError) -> IckError:
    """The IckError for an error raised by redis-py."""
    from .connection import connection_error

    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, redis.AuthenticationError)):
        return connection_error(exc)
    message = str(exc)
    if message.startswith("Command # ") and " of pipeline caused error: " in message:
        message = message.split(" of pipeline caused error: ", 1)[1]  # no arguments echoed
    if "ICK " in message:  # raised by ick_fail in lua/_prelude.lua
        message = message[message.index("ICK ") + 4:]
    # Redis 7 appends the script location to errors raised inside scripts
    message = message.split(" script: ")[0].strip()
    return IckScriptError(message)


def run(client: Any, name: str, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
    """Run script ``name`` once on ``client`` (not a pipeline) and return its reply."""
    ensure_loaded(client, name)
    try:
        try:
            return client.evalsha(sha(name), len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            ensure_loaded(client, name, force=True)
            return client.evalsha(sha(name), len(keys), *keys, *args)
    except redis.RedisError as exc:
        raise translate(exc) from exc


def queue(pipe: Any, name: str, keys: Sequence[str], args: Sequence[Any] = ()) -> None:
    """Queue script ``name`` on ``pipe``, inside a ``build`` function of ``pipelined``."""
    # execute_command, not pipe.evalsha: redis-py blocks the latter in cluster pipelines,
    # though it routes EVALSHA by its keys like any command
    pipe.execute_command("EVALSHA", sha(name), len(keys), *keys, *args)


def pipelined(client: Any, names: Sequence[str], build: Callable[[Any], None]) -> list[Any]:
    """One round trip: ``build(pipe)`` queues calls of scripts ``names``; returns the replies.

    On NOSCRIPT the scripts are reloaded and the pipeline is built and sent again, so
    use it only for idempotent calls (ickadd, reads).
    """
    ensure_loaded(client, *names)
    for attempt in range(2):
        pipe = client.pipeline(transaction=False)
        build(pipe)
        try:
            return pipe.execute()
        except redis.exceptions.NoScriptError as exc:
            if attempt:
                raise translate(exc) from exc
            ensure_loaded(client, *names, force=True)
        except redis.RedisError as exc:
            raise translate(exc) from exc
    raise AssertionError("unreachable")
