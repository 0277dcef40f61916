"""Many script calls in order, one out behind the other at most (``run_many``): the
plain client's bulk writes send the next call while Redis runs the one before, and a
neighbour waits for at most two bounded calls."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import redis

from .clients import Client
from .errors import IckScriptError
from .lua import sha
from .scripts import Call, again, connection_of, load, pool_of, run


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
    back to back, and a neighbour waits behind all of it. With ``overlap`` (the plain
    client's bulk writes, whose ``calls`` pack each call as it is taken), at most two are
    out at once: one running, the next sent behind it and packed while the first ran (on
    one connection, ``Pipe``), so a neighbour waits for at most two bounded calls. Not
    for the Spark sinks: their tasks run side by side, and two out each would make a
    neighbour wait longer for no throughput (docs/sizing.md has both trials). Calls that
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
        with Pipe(client, what) as pipe:
            for call in calls:
                pipe.send(call)
            replies, refused = pipe.finish()
    if refused is not None:
        raise refused
    return replies


NOT_SENT = object()
"""The outcome of a call ``Pipe`` did not send (no pool for it): ``again`` makes it."""


class Pipe:
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

    def __enter__(self) -> Pipe:
        return self

    def send(self, call: Call) -> None:
        name, keys, args = call
        index, started = len(self.replies), time.monotonic()
        self.replies.append(None)
        pool = pool_of(self.client, keys)
        if pool is not self.pool:  # another node (or none): what is out comes back first
            self._read_all()
            self._release()
            self.pool = pool
        if pool is None:
            self.failed.append((index, call, started, NOT_SENT))
        else:
            try:
                load(self.client, [name])
                if self.conn is None:
                    self.conn = connection_of(pool)
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
