"""Handing every reserved member of one Ick shard back to its queue (lua/ick_requeue.lua):
the cset folded into the pset, the lower score winning, then the reservation log closed
(committed = reserved, manifests gone), in bounded calls fenced by the caller's lease.
What ``release`` does for a dead query and ``reshard`` before it moves members. A later
query then starts clean: its first reservation takes the members back by score.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from . import bounds, scripts
from .clients import Client
from .errors import IckError
from .keys import IckKeys
from .lease import Fence
from .numbered_log import fence_args

Progress = Callable[[str, int], None]
"""Called after each bounded call of an operator's command: (what, items it touched)."""


def requeue(
    client: Client, keys: IckKeys, fence: Fence, label: str, progress: Progress | None = None
) -> tuple[int, int]:
    """Fold shard ``keys``' cset into its pset and close its reservation log; returns
    (members folded back, reservations closed). ``fence`` holds the shard's lease."""
    reserved, committed = (
        int(n or 0)
        for n in scripts.command(
            client, partial(client.hmget, keys.rlog, "reserved", "committed"), what=label
        )
    )
    first, moved, stale = committed, 0, 0
    while True:
        last = min(reserved, committed + bounds.KEYS_PER_CALL)
        manifests = [keys.reservation(n) for n in range(committed + 1, last + 1)]
        now, back, left = scripts.run(
            client,
            "ick_requeue",
            [*keys.base, keys.rlog, keys.held, keys.lease, keys.failed, *manifests],
            [*fence_args(fence), committed, bounds.MOVES_PER_CALL],
            what=label,
        )
        if progress is not None:
            progress("ick_requeue", max(int(back), 0))
        if int(back) < 0:  # a replayed call closed some already: go on from there
            stale += 1
            if stale > 3:
                raise IckError(f"{label}: the reservation log keeps moving under this command")
        else:
            moved += int(back)
        committed = int(now)
        if not int(left):
            return moved, committed - first
