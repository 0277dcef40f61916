"""What a command acts on must exist: an Ick or dehydrator that does not is NotFound (exit
3) before anything is written, so a typo leaves no key behind (docs/operations.md)."""

from __future__ import annotations

from functools import partial

from ..clients import Client
from ..keys import DehydratorKeys, IckKeys, shard_names
from ..registry import KINDS, recorded, shards_to_use
from ..scripts import command
from .output import NotFound

OTHER = {"ick": "dehydrator", "dehydrator": "ick"}


def exists(client: Client, name: str, shards: int, kind: str = "ick") -> bool:
    """Whether Ick (``kind`` "ick") or dehydrator ``name`` has a recorded shard count or
    any key of its ``shards`` shards (one EXISTS per shard: its keys share a slot)."""
    label = f"{KINDS[kind]} {name!r}"
    if recorded(client, name, kind, label) is not None:
        return True
    parts = IckKeys if kind == "ick" else DehydratorKeys
    return any(
        command(client, partial(client.exists, *parts(master).fixed_keys()), what=label)
        for master in shard_names(name, shards)
    )


def not_found(client: Client, name: str, kind: str = "ick") -> NotFound:
    """NotFound for ``name``, pointing at the Ick or dehydrator of that name if one exists."""
    text = f"{KINDS[kind]} {name!r} does not exist"
    if kind == "dehydrator":
        text += ": it holds nothing"
    other = OTHER[kind]
    if recorded(client, name, other, f"{KINDS[other]} {name!r}") is not None:
        command_ = "dehydrator stats" if other == "dehydrator" else "stats"
        text += f"; {name!r} is a{'n' if other == 'ick' else ''} {KINDS[other]}: "
        text += f"pyspark-ick {command_} {name}"
    return NotFound(text)


def existing(client: Client, name: str, given: int | None, kind: str = "ick") -> int:
    """The shard count of Ick or dehydrator ``name`` (``given``, else the recorded one);
    NotFound when it does not exist. Reads only."""
    shards = shards_to_use(client, name, given, kind)
    if not exists(client, name, shards, kind):
        raise not_found(client, name, kind)
    return shards
