"""``pyspark-ick web``: its options, and the command that starts the console (Flask behind
waitress) on the CLI's connection. Flask and waitress are imported only when it runs
(the ``web`` extra)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from ..clients import Client
from ..connection import DEFAULT_URL
from ..errors import IckConfigError, IckError
from ..listen import host_port, listen_failed, loopback, port_arg
from ..urls import redact, scrub, secrets, where
from .guard import TOKEN_ENV, load_token

logger = logging.getLogger("pyspark_ick.web")


def sample_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0.2 <= seconds <= 300:
        raise argparse.ArgumentTypeError(f"expected seconds from 0.2 to 300, got {value!r}")
    return seconds


def web_options(sub: argparse.ArgumentParser) -> None:
    """The options of ``pyspark-ick web`` (no abbreviations: ``--token`` must not pass
    for ``--token-file``, and no option takes the token itself)."""
    sub.allow_abbrev = False
    sub.add_argument("--port", type=port_arg, default=8642, help="HTTP port (default 8642)")
    sub.add_argument(
        "--bind",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address to listen on (default 127.0.0.1; a non-loopback one is logged as a warning)",
    )
    sub.add_argument(
        "--allow-actions",
        action="store_true",
        help=f"allow re-drive and purge of dead letters, for browsers signed in with the token "
        f"of ${TOKEN_ENV} or --token-file (default: read-only)",
    )
    sub.add_argument(
        "--token-file", metavar="PATH", help="a file whose first line is the action token"
    )
    sub.add_argument(
        "--sample-every",
        type=sample_seconds,
        default=5.0,
        metavar="SECONDS",
        help="how often the console samples every Ick and dehydrator for its plots (default 5)",
    )


def cmd_web(client: Client, args: argparse.Namespace) -> int:
    """Serve the console until Ctrl-C (or SIGTERM)."""
    try:
        from waitress import create_server

        from .app import create_app
    except ModuleNotFoundError as exc:
        if exc.name not in ("flask", "waitress", "jinja2", "werkzeug"):
            raise
        raise IckError(
            "the console needs Flask and waitress (the web extra): python3 -m pip install "
            "flask waitress, or '.[web]' in a clone of pyspark-ick"
        ) from None
    from .history import History, Sampler

    token = load_token(args.token_file)
    if args.allow_actions and token is None:
        raise IckConfigError(
            f"--allow-actions needs the action token: set ${TOKEN_ENV} or pass --token-file "
            "(never on the command line)"
        )
    url = getattr(args, "url", None) or os.environ.get("REDIS_URL") or DEFAULT_URL
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    history = History(args.sample_every)
    sampler = Sampler(client, history, lambda text: scrub(text, url))
    app = create_app(
        client,
        history,
        token=token,
        allow_actions=args.allow_actions,
        where=where(url),
        scrub=lambda text: scrub(text, url),
        passwords=secrets(url),
    )
    try:
        server: Any = create_server(app, host=args.bind, port=args.port, threads=4)
    except (OSError, ValueError) as exc:  # waitress: ValueError for a name it cannot resolve
        raise listen_failed(exc, args.bind, args.port, "web") from None
    sampler.start()
    mode = "actions allowed (sign in with the token)" if args.allow_actions else "read-only"
    print(
        f"pyspark-ick console on http://{host_port(args.bind, server.effective_port)}/ ({mode}) "
        f"for "
        f"{redact(url)}; Ctrl-C stops",
        flush=True,
    )
    if not loopback(args.bind):
        logger.warning(
            "console: listening on %s: anyone who reaches it reads every Ick name and member; "
            "put it behind a proxy with TLS and authentication",
            args.bind,
        )
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
        server.close()
    return 0
