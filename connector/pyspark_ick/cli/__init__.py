"""pyspark-ick: the operator's command line for Icks and dehydrators.

    pyspark-ick stats NAME [--shards N] [--watch [SECONDS]] [--json]
    pyspark-ick add NAME MEMBER [MEMBER ...] [--score S] [--shards N]
    pyspark-ick peek NAME [--shards N] [-n 10] [--json]
    pyspark-ick del NAME [--shards N] [--yes] [--force]
    pyspark-ick reshard NAME --to N [--shards S] [--yes]
    pyspark-ick release NAME [--shards N]
    pyspark-ick retry-due NAME [--shards N] [--every SECONDS]
    pyspark-ick layout NAME [--dehydrator] [--rollback-to V] [--json]
    pyspark-ick metrics --port PORT [--bind ADDRESS]
    pyspark-ick web [--port PORT] [--bind ADDRESS] ...
    pyspark-ick dead list|count|redrive|purge NAME ...
    pyspark-ick dehydrator stats|peek|look|ttn|push|pull|release NAME ...
    pyspark-ick --version

Connection: ``--url`` or ``REDIS_URL`` (default ``redis://localhost:6379/0``; ``rediss://``
for TLS, with ``?ssl_ca_certs=/path/ca.crt`` for a private CA; ``redis+sentinel://h1,h2/SERVICE``
for the primary that Sentinel names), ``--cluster`` (auto, true, false), ``--retry-timeout``
or ``PYSPARK_ICK_RETRY_TIMEOUT`` (default 2 s). Without ``--shards`` the count recorded in
Redis is used. Exit codes: 0 done, 1 error (one line on stderr, never a traceback or a
password), 2 bad usage, 3 not found, nothing written (or a question answered no), 130
interrupted, 141 the output's reader went away (``| head``).
Tables need the ``cli`` extra (rich); ``--json`` does not.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

import redis

from ..connection import DEFAULT_URL, connect
from ..errors import IckConfigError, IckError
from ..existence import Missing
from ..redis_errors import in_cli_terms, translate
from ..urls import scrub, where
from .output import Declined, NotFound
from .parser import build_parser, retry_timeout

EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_PIPE = 1, 2, 3, 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (EXIT_PIPE, as a shell reports a
    command killed by SIGPIPE, when the reader of its output went away: `| head`)."""
    try:
        return run(argv)
    except BrokenPipeError:
        # what is left in stdout's buffer goes nowhere: no "Exception ignored" at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE


def run(argv: Sequence[str] | None) -> int:
    """``main`` without the closed pipe."""
    args = build_parser().parse_args(argv)
    # errors are one line on stderr: the library's retry warnings stay out of it
    logging.getLogger("pyspark_ick").addHandler(logging.NullHandler())
    url = getattr(args, "url", None) or os.environ.get("REDIS_URL") or DEFAULT_URL
    try:
        client = connect(
            url,
            cluster=getattr(args, "cluster", "auto"),
            timeout=getattr(args, "timeout", 5.0),
            retry_timeout=retry_timeout(args),
        )
        args.where = where(url)
        try:
            return int(args.run(client, args))
        finally:
            client.close()
    except Declined as exc:
        print(f"pyspark-ick: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except (NotFound, Missing) as exc:
        print(f"pyspark-ick: {naming(str(exc), url)}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except (IckError, redis.RedisError) as exc:
        if isinstance(exc, redis.RedisError):
            exc = translate(exc)
        text = str(exc) if isinstance(exc, IckConfigError) else naming(str(exc), url)
        print(f"pyspark-ick: error: {in_cli_terms(scrub(text, url))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # what the OS refused that no command foresaw (a file, a socket)
        if isinstance(exc, BrokenPipeError):
            raise
        where_ = f" ({exc.filename})" if exc.filename else ""
        print(f"pyspark-ick: error: {exc.strerror or exc}{where_}", file=sys.stderr)
        return EXIT_ERROR


def naming(message: str, url: str) -> str:
    """``message`` (an answer of the server) naming the Redis asked, credentials masked
    (urls.where), unless it does already."""
    asked = where(url)
    message = scrub(message, url)
    return message if asked in message else f"{message} (Redis at {asked})"
