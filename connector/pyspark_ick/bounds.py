"""How much one call of the connector may do: the bounds that keep every call within a few
milliseconds of a shared Redis, whatever the batch (docs/design.md §9; the figures that
chose them, and the bench that measures them, are in docs/sizing.md). A big batch is many
such calls, one after the other.
"""

from __future__ import annotations

ITEMS_PER_CALL = 1000
"""The most members (or dehydrator elements) one call touches: adds, reads, commits,
ZSCAN pages, take and poll."""

MOVES_PER_CALL = 500
"""The most members one reserve, or elements one claim, moves per call (so the most one
reservation or claim holds): a move removes an item, writes it to a manifest and marks it
in flight, about twice an add's work."""

KEYS_PER_CALL = 12
"""The most manifests one read or commit call of a numbered log names (so that every
call's arguments fit the 32 that SLOWLOG keeps of a command, which operators read)."""

ICK_CHUNK = 1000
"""Members per ickadd call by default (``Ick.add``, option ``chunkSize`` of the ick sink)."""

DEHYDRATOR_CHUNK = 250
"""Elements per dh_push call by default (``Dehydrator.park``, option ``chunkSize`` of the
dehydrator sink): an element costs Redis about twice an ickadd member."""
