"""Whether an Ick or dehydrator exists: the one definition that the CLI, the console, the
exporter and the Spark batch reads use (docs/design.md §3).

A name exists when its shard count is recorded (registry.py), whatever it holds: empty
is a state, not an error. A name that nothing recorded (written only by the redis-ick
gem's producers, or by release 0.1) exists while a key of one of its shards is in Redis,
under the shard count given (default 1). Finding out reads only. A name that does not
exist is ``Missing``: the error names the Redis asked and a registered name close to it.
"""

from __future__ import annotations

import difflib
from functools import partial

from . import bounds, scripts
from .clients import Client
from .errors import IckError
from .keys import DehydratorKeys, IckKeys, registry_key, shard_names
from .registry import KINDS, recorded, shards_to_use
from .values import text

OTHER = {"ick": "dehydrator", "dehydrator": "ick"}
SUGGEST_FROM = 10_000  # registered names a "did you mean" looks at, at most


class Missing(IckError):
    """No Ick or dehydrator of that name in the Redis asked; nothing was written."""


def shards_of(client: Client, name: str, kind: str = "ick", given: int | None = None) -> int | None:
    """The shard count of Ick (``kind`` "ick") or dehydrator ``name`` if it exists (the
    recorded one; ``given``, else 1, for one nothing recorded), else None. Raises
    ShardCountError when ``given`` is not the recorded count, LayoutError when a newer
    release wrote it. Reads only: a GET or two, and one EXISTS per shard when nothing is
    recorded (the keys of a shard share a slot)."""
    shards = shards_to_use(client, name, given, kind)
    if recorded(client, name, kind, f"{KINDS[kind]} {name!r}") is not None:
        return shards
    parts = IckKeys if kind == "ick" else DehydratorKeys
    for master in shard_names(name, shards):
        keys = parts(master).fixed_keys()
        if scripts.command(client, partial(client.exists, *keys), what=f"{KINDS[kind]} {name!r}"):
            return shards
    return None


def require(
    client: Client, name: str, kind: str = "ick", given: int | None = None, where: str = ""
) -> int:
    """``shards_of``, or Missing naming ``where`` (the Redis asked, without credentials:
    urls.where) when ``name`` does not exist."""
    shards = shards_of(client, name, kind, given)
    if shards is None:
        raise missing(client, name, kind, where)
    return shards


def missing(client: Client, name: str, kind: str = "ick", where: str = "") -> Missing:
    """Missing for ``name``: the Redis asked, the Ick or dehydrator of that name if there
    is one, else a registered name close to it ("did you mean")."""
    said = f"{KINDS[kind]} {name!r} does not exist" + (f" in Redis at {where}" if where else "")
    other = OTHER[kind]
    if recorded(client, name, other, f"{KINDS[other]} {name!r}") is not None:
        command = "dehydrator stats" if other == "dehydrator" else "stats"
        article = "an" if other == "ick" else "a"
        hint = f"{name!r} is {article} {KINDS[other]}: pyspark-ick {command} {name}"
        return Missing(f"{said}; {hint}")
    close = difflib.get_close_matches(name, names(client, kind, SUGGEST_FROM), n=1, cutoff=0.6)
    if close:
        return Missing(f"{said}; did you mean {close[0]!r}?")
    return Missing(f"{said} (nothing of that name is recorded or held there)")


def names(client: Client, kind: str = "ick", most: int | None = None) -> list[str]:
    """The names in the registry of ``kind``, read in SSCAN pages (at most ``most``)."""
    found: list[str] = []
    for raw in client.sscan_iter(registry_key(kind), count=bounds.ITEMS_PER_CALL):
        found.append(text(raw))
        if most is not None and len(found) >= most:
            break
    return found


def registered(client: Client, kind: str = "ick") -> dict[str, int]:
    """name -> recorded shard count of every Ick (``kind`` "ick") or dehydrator
    ("dehydrator") in the registry: what the exporter and the console's overview list. A
    registered name exists (it was recorded) until its record is gone (deleted): then it
    is left out."""
    found: dict[str, int] = {}
    for name in names(client, kind):
        count = recorded(client, name, kind, f"{KINDS[kind]} {name!r}")
        if count is not None:
            found[name] = count
    return dict(sorted(found.items()))
