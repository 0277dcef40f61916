"""The layout version: which form of the Redis layout (docs/design.md §3) a logical Ick or
dehydrator was written with, recorded next to its shard count (``keys.layout_key``).

Release 0.1 wrote layout 1 and recorded nothing; 0.2 writes layout 2 (delivery counts,
hand-backs, retries and dead letters: §11). The shard-count check of every reader, writer
and client (registry.record_count) raises the recorded version to this release's, never
lowering it, and refuses a newer one (``LayoutError``): a release would strand what it
cannot read. A rollback lowers it only once nothing is left that the older release would
strand (``rollback``, ``pyspark-ick layout NAME --rollback-to V``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from . import scripts
from .clients import Client
from .errors import LayoutError
from .holds import Hold
from .keys import DehydratorKeys, IckKeys, layout_key, shard_names

LAYOUT = 2
"""The layout version this release writes."""

RELEASES = {1: "0.1", 2: "0.2"}
"""The release that introduced each layout version."""

RUNBOOK = 'docs/operations.md, "Runbook: upgrading under a running pipeline"'
OWNER = "pyspark-ick layout"


def release_of(version: int) -> str:
    return f"pyspark-ick {RELEASES[version]}" if version in RELEASES else "a newer pyspark-ick"


def rollback_command(name: str, kind: str, to: int) -> str:
    flag = " --dehydrator" if kind == "dehydrator" else ""
    return f"pyspark-ick layout {name}{flag} --rollback-to {to}"


def newer(name: str, kind: str, label: str, found: int) -> LayoutError:
    """The refusal of a layout newer than this release's."""
    return LayoutError(
        f"{label} was written with layout version {found} ({release_of(found)}), but this "
        f"release ({release_of(LAYOUT)}) knows layout {LAYOUT} at most: it would strand "
        f"what it cannot read. Either run the newer release, or roll back ({RUNBOOK}): stop "
        f"the queries, run `{rollback_command(name, kind, LAYOUT)}` with the newer release "
        "(it refuses while anything this one cannot read is left, and says what), then "
        "start this one"
    )


def recorded(client: Client, name: str, kind: str, label: str) -> int:
    """The layout version recorded for ``name``; 1 when none is (release 0.1's)."""
    raw = scripts.command(client, partial(client.get, layout_key(name, kind)), what=label)
    return 1 if raw is None else int(raw)


def check(client: Client, name: str, kind: str, label: str, *, write: bool) -> int:
    """Raise LayoutError if ``name`` was written with a newer layout than ``LAYOUT``; with
    ``write``, raise an older recorded version to ``LAYOUT`` first. Returns the version."""
    if write:
        found = int(scripts.run(client, "layout", [layout_key(name, kind)], [LAYOUT], what=label))
    else:
        found = recorded(client, name, kind, label)
    if found > LAYOUT:
        raise newer(name, kind, label, found)
    return found


@dataclass(frozen=True)
class Blocker:
    """What a shard holds that an older layout's release would strand, and what to do."""

    shard: int
    key: str
    count: int
    what: str
    fix: str

    def __str__(self) -> str:
        return f"shard {self.shard} ({self.key}): {self.count} {self.what}: {self.fix}"


def blockers(client: Client, name: str, kind: str, shards: int, label: str) -> list[Blocker]:
    """What the shards of ``name`` hold that layout 1 (release 0.1) would strand: members
    waiting for a retry (0.1 never gives them back) and dead letters (0.1 shows none).
    Hand-backs in an open reservation strand nothing (0.1 replays that batch, delivering
    them again); a dehydrator holds nothing that 0.1 cannot read."""
    if kind != "ick":
        return []
    found = []
    for i, master in enumerate(shard_names(name, shards)):
        keys = IckKeys(master)
        for count, what, fix in (
            (
                partial(client.zcard, keys.retry),
                "member(s) waiting for a retry",
                f"let the query deliver them when due (`pyspark-ick dead count {name}`)",
            ),
            (
                partial(client.zcard, keys.dead),
                "dead letter(s)",
                f"re-drive them (`pyspark-ick dead redrive {name}`) or purge them",
            ),
        ):
            n = int(scripts.command(client, count, what=label))
            if n:
                found.append(Blocker(i, master, n, what, fix))
    return found


def rollback(client: Client, name: str, kind: str, shards: int, to: int, label: str) -> int:
    """Record layout ``to`` (older than the recorded one) for ``name`` once nothing is left
    that its release would strand: LayoutError listing what is, else the version it
    replaced. The shards' leases are held meanwhile (a live query is refused: stop it)."""
    found = recorded(client, name, kind, label)
    if found > LAYOUT:
        raise newer(name, kind, label, found)
    if not 1 <= to < found:
        raise LayoutError(
            f"{label} has layout {found}: a rollback goes to an older layout, from 1 to "
            f"{found - 1}, not {to}"
        )
    keys = IckKeys if kind == "ick" else DehydratorKeys
    leases = [(keys(m).lease, f"{label} shard {m}") for m in shard_names(name, shards)]
    hold = Hold(client, leases, OWNER)
    hold.take(wait_for_gone=True)
    try:
        left = blockers(client, name, kind, shards, label)
        if left:
            raise LayoutError(
                f"{label} cannot go back to layout {to} ({release_of(to)}) yet; it holds "
                "what that release would strand: " + "; ".join(map(str, left))
            )
        scripts.command(client, partial(client.set, layout_key(name, kind), to), what=label)
    finally:
        hold.give_back()
    return found
