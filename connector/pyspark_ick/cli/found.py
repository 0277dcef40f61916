"""What a command acts on must exist (existence.py: recorded, or holding keys when nothing
recorded it): an Ick or dehydrator that does not is NotFound (exit 3) before anything is
written, so a typo leaves no key behind (docs/operations.md). The message names the Redis
asked and a registered name close to the one given."""

from __future__ import annotations

import argparse

from ..clients import Client
from ..existence import missing, shards_of
from .output import NotFound


def not_found(client: Client, args: argparse.Namespace, kind: str = "ick") -> NotFound:
    """NotFound for ``args.name`` in the Redis of ``args.where`` (existence.missing)."""
    return NotFound(str(missing(client, args.name, kind, getattr(args, "where", ""))))


def existing(client: Client, args: argparse.Namespace, kind: str = "ick") -> int:
    """The shard count of Ick or dehydrator ``args.name`` (``args.shards``, else the
    recorded one); NotFound when it does not exist. Reads only."""
    shards = shards_of(client, args.name, kind, args.shards)
    if shards is None:
        raise not_found(client, args, kind)
    return shards
