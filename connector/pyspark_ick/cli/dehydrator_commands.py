"""The CLI's commands on dehydrators: ReDe's look, ttn, push and pull."""

from __future__ import annotations

import argparse
from typing import Any

from ..clients import Client
from ..dehydrator import Dehydrator
from ..registry import shards_to_use
from ..values import text
from .output import NotFound


def dehydrator(client: Client, args: argparse.Namespace) -> Any:
    shards = shards_to_use(client, args.name, args.shards, "dehydrator")
    return Dehydrator(client, args.name, shards=shards)


def show_element(element: Any, args: argparse.Namespace) -> int:
    """Print the element of ``args.id`` (NotFound when None)."""
    if element is None:
        raise NotFound(f"dehydrator {args.name!r} holds no id {args.id!r}")
    print(text(element))
    return 0


def cmd_look(client: Client, args: argparse.Namespace) -> int:
    return show_element(dehydrator(client, args).look(args.id), args)


def cmd_ttn(client: Client, args: argparse.Namespace) -> int:
    print(int(dehydrator(client, args).ttn()))
    return 0


def cmd_push(client: Client, args: argparse.Namespace) -> int:
    dehydrator(client, args).push(args.id, args.element, args.ttl)
    print(f"dehydrator {args.name!r}: pushed {args.id!r}, due in {args.ttl} ms")
    return 0


def cmd_pull(client: Client, args: argparse.Namespace) -> int:
    return show_element(dehydrator(client, args).pull(args.id), args)
