"""The record of every logical Ick and dehydrator: its shard count (one small key per
name, written on first use, checked by every later user) and the registry set the
exporter reads instead of scanning the keyspace (keys.shard_count_key, keys.registry_key).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cached_property, partial
from typing import Any, ClassVar

from . import layout, scripts
from .clients import Client, check_client
from .errors import IckScriptError, ShardCountError
from .keys import (
    check_name,
    check_shards,
    layout_key,
    registry_key,
    reshard_key,
    shard_count_key,
    shard_of,
)
from .values import as_bytes
from .words import plural

logger = logging.getLogger("pyspark_ick.registry")

KINDS = {"ick": "Ick", "dehydrator": "dehydrator"}

_unregistered: set[str] = set()  # registries this process could not write (warned once)


def mismatch(kind: str, name: str, recorded: int, given: str) -> ShardCountError:
    """The error for a shard count ``given`` ("8", "--shards 8") that is not the one
    recorded."""
    return ShardCountError(
        f"{KINDS[kind]} {name!r} has {plural(recorded, 'shard')} recorded in Redis, but {given} "
        f"{'was' if given.startswith('-') else 'were'} given"
    )


def recorded(client: Client, name: str, kind: str, label: str) -> int | None:
    """The shard count recorded for ``name``, or None."""
    raw = scripts.command(client, partial(client.get, shard_count_key(name, kind)), what=label)
    return None if raw is None else int(raw)


def resharding(client: Client, name: str, kind: str = "ick") -> int | None:
    """The target shard count of a reshard of ``name`` in progress, or None."""
    raw = scripts.command(
        client, partial(client.get, reshard_key(name, kind)), what=f"{KINDS[kind]} {name!r}"
    )
    return None if raw is None else int(raw)


def check_not_resharding(client: Client, name: str, kind: str, label: str) -> None:
    """Raise ShardCountError while a reshard of ``name`` runs (or stopped half-way):
    members are on their way between two layouts, so readers and writers wait for it."""
    target = resharding(client, name, kind)
    if target is not None:
        raise ShardCountError(
            f"{label} is being resharded to {plural(target, 'shard')} (pyspark-ick reshard): "
            f"nothing reads or writes it until `pyspark-ick reshard {name} --to {target}` has "
            "finished (run it again if it stopped half-way); then use shards="
            f"{target} (a stream query: with a new checkpoint)"
        )


def record_count(
    client: Client,
    name: str,
    kind: str,
    shards: int,
    label: str,
    *,
    write: bool = True,
    before_first: Callable[[], None] | None = None,
) -> bool:
    """Raise ShardCountError unless ``shards`` is the count recorded for ``name``; with
    ``write``, record it when none is, raise the layout version to this release's and add
    ``name`` to the registry. ``before_first`` checks the keys before a first record
    (producers outside Spark record nothing). Returns whether a count is recorded now.
    Refused while a reshard of ``name`` runs, and (LayoutError) when a newer release
    wrote it."""
    check_not_resharding(client, name, kind, label)
    found = recorded(client, name, kind, label)
    if found is None:
        if before_first is not None:
            before_first()
        if not write:
            return False
        found = int(
            scripts.run(client, "shardcount", [shard_count_key(name, kind)], [shards], what=label)
        )
    if found != shards:
        raise mismatch(kind, name, found, str(shards))
    layout.check(client, name, kind, label, write=write)
    if write:
        register(client, name, kind, label)
    return True


def shards_to_use(client: Client, name: str, given: int | None, kind: str = "ick") -> int:
    """``given``, else the shard count recorded in Redis, else 1 (what an operator's tool
    uses); raises ShardCountError when ``given`` is not the recorded count, LayoutError
    when a newer release wrote ``name``."""
    label = f"{KINDS[kind]} {name!r}"
    found = recorded(client, name, kind, label)
    if given is not None and found is not None and given != found:
        raise mismatch(kind, name, found, f"--shards {given}")
    layout.check(client, name, kind, label, write=False)
    return check_shards(given or found or 1)


def resolve(client: Client, name: str, kind: str, given: int | None) -> int:
    """The shard count a Spark reader or writer of ``name`` uses: ``given`` (option
    ``shards``), else the count recorded in Redis, else 1 (a new one). Raises
    ShardCountError when ``given`` is not the recorded count, or while a reshard runs.
    Read once on the driver; the count travels to the executors in the plan."""
    label = f"{KINDS[kind]} {name!r}"
    check_not_resharding(client, name, kind, label)
    found = recorded(client, name, kind, label)
    if given is not None and found is not None and given != found:
        raise ShardCountError(
            f"{mismatch(kind, name, found, str(given))} (option 'shards'): leave 'shards' "
            f"out to use the recorded count, or give {found}"
        )
    return check_shards(given or found or 1)


def register(client: Client, name: str, kind: str, label: str) -> None:
    """Add logical Ick (or dehydrator) ``name`` to the registry the exporter reads
    (idempotent). A user whose ACL lacks the registry (an ACL line older than
    docs/security.md's) is warned once, not failed: producers and consumers do not need
    it."""
    try:
        scripts.command(client, partial(client.sadd, registry_key(kind), name), what=label)
    except IckScriptError as exc:
        if kind not in _unregistered:
            _unregistered.add(kind)
            logger.warning(
                "%s: not added to %s, which the metrics exporter reads (%s); "
                "see docs/security.md for the ACL line",
                label,
                registry_key(kind),
                exc,
            )


def forget(client: Client, name: str, kind: str, label: str) -> int:
    """Remove ``name`` from the registry, its recorded shard count and its layout version
    (its Ick or dehydrator is deleted); returns how many shard-count keys went (0 or 1)."""
    try:
        scripts.command(client, partial(client.srem, registry_key(kind), name), what=label)
    except IckScriptError as exc:
        logger.warning("%s: not removed from %s: %s", label, registry_key(kind), exc)
    scripts.run(client, "delete_keys", [layout_key(name, kind)], what=label)
    return int(scripts.run(client, "delete_keys", [shard_count_key(name, kind)], what=label))


class LogicalName:
    """A logical Ick or dehydrator: ``name`` of ``shards`` shards on ``client``, items
    routed by ``keys.shard_of``, its shard count recorded in Redis on first use
    (``check_shards``)."""

    kind: ClassVar[str]  # "ick" or "dehydrator"

    def __init__(self, client: Client, name: str, shards: int = 1) -> None:
        self.client = check_client(client)
        self.name = check_name(name, f"{KINDS[self.kind]} name")
        self.shards = check_shards(shards)
        self._checked = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, shards={self.shards})"

    @cached_property
    def label(self) -> str:
        """Names this logical Ick or dehydrator in errors."""
        return f"{KINDS[self.kind]} {self.name!r}"

    def shard_of(self, item: Any) -> int:
        """The shard that ``item`` (a member or an id: its text or its bytes) goes to."""
        return shard_of(as_bytes(item), self.shards)

    def check_shards(self, record: bool = True) -> None:
        """Raise ShardCountError if Redis shows another shard count; with ``record``,
        record this one on first use (``check_layout`` first)."""
        if not self._checked:
            self._checked = record_count(
                self.client,
                self.name,
                self.kind,
                self.shards,
                self.label,
                write=record,
                before_first=self.check_layout,
            )

    def check_layout(self) -> None:
        """Before a first record: raise ShardCountError if the keys in Redis show another
        shard count (nothing to check by default)."""

    def forget(self) -> int:
        """Drop the recorded shard count and the registry entry (after a delete); returns
        how many keys went."""
        self._checked = False
        return forget(self.client, self.name, self.kind, self.label)
