"""Releasing a dead query's hold on a logical Ick or dehydrator (``pyspark-ick release``;
docs/operations.md has the runbook for a lost or deleted checkpoint).

Every shard's lease is taken first with a new fencing token, refusing a lease its holder
still renews (a live query: stop it first); a holder killed a moment ago is waited for
until it counts as gone (3 of its renewal periods and a second). Then, for an Ick, every
reserved member goes back to the queue (the lower score wins) and the reservation log is
closed (requeue.py); then the leases are given back. The dead query's zombies stay fenced
(their token is old), and the next query starts at once and reserves the released members
in its first batch.

A dehydrator's claims stay open: the next query delivers them first (its initial offset is
the last committed claim). Putting them back into the due set could meet an id parked
again since, and one id holds one element: one of the two would be lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from .clients import Client
from .holds import Hold, holder
from .keys import DehydratorKeys, IckKeys, check_name, shard_names
from .registry import KINDS, check_not_resharding, shards_to_use
from .requeue import Progress, requeue
from .scripts import command

OWNER = "pyspark-ick release"


@dataclass
class Released:
    """What ``release`` did: per shard, the lease owner it found (None: none), members put
    back into the queue and reservations closed (Icks), and open claims left (dehydrators)."""

    name: str
    kind: str
    shards: int
    owners: list[str | None] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    open_claims: list[int] = field(default_factory=list)


def shard_label(kind: str, name: str, key: str, shard: int) -> str:
    return f"{KINDS[kind]} {name!r} shard {shard}" + (f" (key {key!r})" if key != name else "")


def release(
    client: Client,
    name: str,
    shards: int | None = None,
    *,
    kind: str = "ick",
    wait: bool = True,
    progress: Progress | None = None,
) -> Released:
    """Release the open reservations and the leases of logical Ick (``kind`` "ick") or
    dehydrator ``name`` (see the module docstring); ``shards``: the recorded count when
    None. ``wait``: wait a few seconds for a holder that stopped renewing to count as gone
    (else it is refused). LeaseError when a live query holds a lease."""
    check_name(name, f"{KINDS[kind]} name")
    count = shards_to_use(client, name, shards, kind)
    check_not_resharding(client, name, kind, f"{KINDS[kind]} {name!r}")
    masters = shard_names(name, count)
    keys: list[IckKeys | DehydratorKeys] = [
        IckKeys(m) if kind == "ick" else DehydratorKeys(m) for m in masters
    ]
    labels = [shard_label(kind, name, m, i) for i, m in enumerate(masters)]
    found = [holder(client, k.lease, label) for k, label in zip(keys, labels, strict=True)]
    report = Released(name, kind, count, [h.owner if h else None for h in found])
    hold = Hold(client, [(k.lease, label) for k, label in zip(keys, labels, strict=True)], OWNER)
    hold.take(wait_for_gone=wait)
    try:
        for k, label in zip(keys, labels, strict=True):
            if isinstance(k, IckKeys):
                moved, closed = requeue(client, k, hold.fence(k.lease), label, progress)
                report.requeued.append(moved)
                report.closed.append(closed)
            else:
                claimed, committed = command(
                    client, partial(client.hmget, k.clog, "claimed", "committed"), what=label
                )
                report.open_claims.append(int(claimed or 0) - int(committed or 0))
            hold.renew()
    finally:
        hold.give_back()
    return report
