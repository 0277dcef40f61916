"""The rows argument of the bulk scripts (ickadd, dh_push) for Python values: one msgpack
array of strings, which Redis decodes in C (``cmsgpack.unpack``, bundled by every Redis
and Valkey): no Lua loop parses it, and numbers stay text that ZADD parses itself. The
Spark sinks build the same array column-wise from Arrow (columns.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import msgpack

from . import bounds
from .values import check_chunk, check_pairs, number_text, plain

_packers = threading.local()  # a Packer is cheaper than msgpack.packb a call


def pack_values(values: list[Any]) -> bytes:
    """One msgpack array of ``values`` (str, taken as their UTF-8 bytes with surrogate
    escapes, or bytes) by msgpack's C packer, with no encoding of each str first
    (docs/sizing.md). Strings go as msgpack's raw type (``use_bin_type=False``), which
    every Redis's cmsgpack reads as a Lua string."""
    try:
        packer = _packers.packer
    except AttributeError:  # a Packer per thread: one is not safe to share
        packer = _packers.packer = msgpack.Packer(
            use_bin_type=False, unicode_errors="surrogateescape"
        )
    return packer.pack(values)


def pack_checked(members: Sequence[str | bytes], scores: Sequence[float]) -> bytes:
    """ickadd's one argument for checked pairs (``values.check_pairs``): score then member,
    per member, the scores in Python's float syntax (``repr``: exact and shortest; ``inf``,
    ``-inf`` as ZADD spells them)."""
    values: list[Any] = [None] * (2 * len(scores))
    values[::2] = map(float.__repr__, scores)
    values[1::2] = members
    return pack_values(values)


def pack_pairs(members: Sequence[Any], scores: Sequence[Any]) -> bytes:
    """ickadd's one argument for ``members`` and ``scores`` (checked: ``check_pairs``)."""
    return pack_checked(*check_pairs(members, scores))


def packed_chunks(
    members: Sequence[str | bytes], scores: Sequence[float], chunk: int
) -> Iterator[bytes]:
    """The ickadd arguments of checked pairs, ``chunk`` members each, packed one by one
    as they are taken (so the next is packed while Redis runs the one before)."""
    for i in range(0, len(members), chunk):
        yield pack_checked(members[i : i + chunk], scores[i : i + chunk])


def pack_chunks(
    members: Sequence[Any], scores: Sequence[float], chunk: int = bounds.ICK_CHUNK
) -> list[bytes]:
    """The ickadd arguments for ``members`` and ``scores``, ``chunk`` members each (at
    most ``bounds.ITEMS_PER_CALL``: no call holds Redis long)."""
    chunk = check_chunk(chunk)
    return list(packed_chunks(*check_pairs(members, scores), chunk))


def plain_chunks(
    ids: Sequence[Any], elements: Sequence[Any], times: Sequence[float], chunk: int
) -> Iterator[bytes]:
    """dh_push's rows arguments (time, id, element per row), ``chunk`` rows each, each
    packed as it is taken. ``times``: finite numbers (``values.check_times``)."""
    for first in range(0, len(ids), chunk):
        last = min(first + chunk, len(ids))
        values: list[Any] = [None] * (3 * (last - first))
        values[::3] = [number_text(t) for t in times[first:last]]
        values[1::3] = plain(ids[first:last])
        values[2::3] = plain(elements[first:last])
        yield pack_values(values)


def pack_plain(
    ids: Sequence[Any],
    elements: Sequence[Any],
    times: Sequence[float],
    chunk: int = bounds.DEHYDRATOR_CHUNK,
) -> list[bytes]:
    """``plain_chunks`` as a list (the plain client's path: no numpy or pyarrow; the Spark
    sink packs Arrow columns with columns.pack_rows)."""
    return list(plain_chunks(ids, elements, times, chunk))
