"""Arrow columns to the rows arguments of the bulk scripts: the Spark sinks' fast path
(needs numpy and pyarrow; the plain client packs Python values with msgpack,
packing.pack_values, and needs neither). The same msgpack array of strings, built
column-wise by Arrow with str 32 heads, is faster on an Arrow batch than ``to_pylist`` and
msgpack (docs/sizing.md). And Redis strings to string columns for the readers."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import IckError
from .keys import shard_of

STR32, ARRAY32 = 0xDB, 0xDD  # msgpack str 32 and array 32
MSGPACK_HEAD = struct.Struct(">BI").pack  # tag, then a big-endian length or count

STR_HEAD = np.dtype([("tag", "u1"), ("length", ">u4")])  # msgpack str 32


def buffers(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and bytes of a string or binary array, as numpy views of Arrow's buffers."""
    _, offsets, data = column.buffers()
    first = column.offset
    return (
        np.frombuffer(offsets, np.int32)[first : first + len(column) + 1],
        np.empty(0, np.uint8) if data is None else np.frombuffer(data, np.uint8),
    )


def utf8(
    raw: pa.Array, where: str, what: Callable[[int, bytes], str], option: str, kept: str = ""
) -> pa.Array:
    """Binary ``raw`` as a string array, its UTF-8 checked by Arrow (no Python per value).
    A value that is not UTF-8 is an IckError: ``where``: ``what(index, value)`` is not
    UTF-8 text, naming ``option`` (``memberType``...) that reads it as binary; ``kept``
    (a stream's "reservation", "claim") says that nothing of the batch was lost."""
    try:
        return raw.cast(pa.string())
    except pa.ArrowInvalid:
        for i, value in enumerate(raw.to_pylist()):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                how = (
                    f"restart the query with option {option}=binary to read it (nothing is "
                    f"lost: the {kept} stays until a batch delivers it)"
                    if kept
                    else f"read with option {option}=binary"
                )
                raise IckError(
                    f"{where}: {what(i, value)} is not UTF-8 text, so it cannot be a string: " + how
                ) from None
        raise


def str_heads(column: pa.Array) -> pa.Array:
    """The msgpack str 32 head of each value of a string or binary array, as binary."""
    head = np.empty(len(column), STR_HEAD)
    head["tag"], head["length"] = STR32, pc.binary_length(column).to_numpy()
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(STR_HEAD.itemsize), len(head), [None, pa.py_buffer(head)]
    ).cast(pa.binary())


def pack_columns(columns: list[pa.Array], chunk: int) -> list[bytes]:
    """The msgpack array of the columns' values row by row, ``chunk`` rows per
    argument, built column-wise by Arrow: each row's heads and values joined into one
    binary value, their bytes back to back.

    ``columns``: string or binary arrays of one length, no nulls.
    """
    rows = len(columns[0])
    if not rows:
        return []
    parts: list[pa.Array] = []
    for column in columns:
        parts += (str_heads(column), column.cast(pa.binary()))
    offsets, data = buffers(pc.binary_join_element_wise(*parts, b""))
    memory = memoryview(data.data)
    return [
        MSGPACK_HEAD(ARRAY32, len(columns) * (min(first + chunk, rows) - first))
        + memory[offsets[first] : offsets[min(first + chunk, rows)]]
        for first in range(0, rows, chunk)
    ]


def pack_pairs(members: pa.Array, scores: pa.Array, chunk: int) -> list[bytes]:
    """ickadd's arguments (``ick.pack_pairs`` for columns), ``chunk`` members each; Arrow
    writes each score's shortest exact text, ZADD parses it.

    ``members``: string or binary; ``scores``: float64, not NaN (Arrow spells the
    infinities ``inf`` and ``-inf``, as ZADD takes them); no nulls.
    """
    return pack_columns([pc.cast(scores, pa.string()), members], chunk)


def pack_rows(ids: pa.Array, elements: pa.Array, times: np.ndarray, chunk: int) -> list[bytes]:
    """dh_push's arguments (``dehydrator.pack_plain`` for columns), ``chunk`` rows each.

    ``ids``, ``elements``: string or binary; ``times``: float64 ms; no nulls.
    """
    return pack_columns([pc.cast(pa.array(times, pa.float64()), pa.string()), ids, elements], chunk)


def split_rows(
    ids: pa.Array, elements: pa.Array, times: np.ndarray, shards: int
) -> dict[int, tuple[pa.Array, pa.Array, np.ndarray]]:
    """The columns per shard of ``shards`` by id (rows in their order within a shard)."""
    if shards == 1:
        return {0: (ids, elements, times)}
    by_shard = np.fromiter((shard_of(id, shards) for id in ids.to_pylist()), np.int32, len(ids))
    out = {}
    for shard in np.unique(by_shard):
        rows = pa.array(np.flatnonzero(by_shard == shard))
        out[int(shard)] = (ids.take(rows), elements.take(rows), times[rows.to_numpy()])
    return out
