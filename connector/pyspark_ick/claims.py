"""The claims of one dehydrator shard: the dehydrator's numbered log (numbered_log.py,
docs/design.md §6), what the dehydrator stream source consumes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import scripts
from .clients import Client
from .keys import DehydratorKeys
from .numbered_log import NumberedLog
from .values import text

Clock = Callable[[], int]
"""A test clock: "now" in ms for the scripts instead of Redis server time."""

Entry = tuple[str, int, Any, int]  # id, due ms, element


class ClaimLog(NumberedLog):
    """The claims of one dehydrator shard: the dehydrator's numbered log (numbered_log.py).

    ``reserve`` moves due elements out of the live store into claim ``n + 1``; ``read``
    returns the elements of claims ``(start, end]``; ``commit(n)`` deletes the claims up
    to ``n``. A replay reads exactly the same elements until they are committed. An id
    claimed twice was pushed twice, and both elements are delivered, whoever reads them:
    claims are read apart freely (``repeated`` is 0).
    """

    keys: DehydratorKeys
    head_field = "claimed"
    reserve_script = "dh_claim"
    commit_script = "dh_commit"

    def __init__(
        self,
        client: Client,
        keys: DehydratorKeys,
        *,
        decode: bool = True,
        clock: Clock | None = None,
        label: str | None = None,
    ) -> None:
        self.keys = keys
        self.decode = decode
        self.clock = clock
        super().__init__(
            client, keys.clog, keys.lease, label or f"dehydrator shard {keys.master!r}"
        )

    def __repr__(self) -> str:
        return f"ClaimLog({self.keys.master!r})"

    def reserve_keys(self, head: int) -> list[str]:
        k = self.keys
        return [*k.store, k.clog, k.lease, k.claim(head + 1)]

    def commit_keys(self, numbers: range) -> list[str]:
        return [self.keys.clog, self.keys.lease, *map(self.keys.claim, numbers)]

    def now(self) -> str:
        return "" if self.clock is None else str(int(self.clock()))

    def read(self, start: int, end: int, token: str = "") -> list[Entry]:
        """(id, due ms, element, deliveries) of every element of claims ``start + 1 ..
        end``; a claim that must exist and does not raises (NumberedLog.read_numbered)."""
        out: list[Entry] = []
        for manifest in self.read_numbered(start, end, token):
            flat = manifest.items
            for i in range(0, len(flat), 3):
                element = text(flat[i + 2]) if self.decode else flat[i + 2]
                out.append((text(flat[i]), int(float(flat[i + 1])), element, manifest.deliveries))
        return out

    def backlog(self) -> int:
        """How many elements of the shard are due now (not claimed yet)."""
        return int(
            scripts.run(self.client, "due_count", [self.keys.due], [self.now()], what=self.label)
        )

    def last_claimed(self) -> int:
        return self.counters()[0]
