"""Arrow columns to the packed arguments of the Lua scripts: the Spark sinks' fast path
(needs numpy and pyarrow; the plain client packs with struct and needs neither)."""

from __future__ import annotations

import struct
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .ick import ARRAY32, STR32
from .keys import shard_of

HEAD = np.dtype([("time", "<f8"), ("id", "<u4"), ("element", "<u4")])  # lua/dh_push.lua
STR_HEAD = np.dtype([("tag", "u1"), ("length", ">u4")])  # msgpack str 32: lua/ickadd.lua


def buffers(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and bytes of a string or binary array, as numpy views of Arrow's buffers."""
    _, offsets, data = column.buffers()
    first = column.offset
    return (np.frombuffer(offsets, np.int32)[first:first + len(column) + 1],
            np.empty(0, np.uint8) if data is None else np.frombuffer(data, np.uint8))


def heads(rows: np.ndarray) -> pa.Array:
    """Binary values of a structured numpy array's rows (fixed-size heads, to join)."""
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(rows.dtype.itemsize), len(rows), [None, pa.py_buffer(rows)]
    ).cast(pa.binary())


def cut(joined: pa.Array, chunk: int) -> list[bytes]:
    """The bytes of binary array ``joined`` back to back, ``chunk`` values per piece."""
    offsets, data = buffers(joined)
    cuts = offsets[::chunk].tolist() + ([int(offsets[-1])] if len(joined) % chunk else [])
    memory = memoryview(data.data)
    return [bytes(memory[a:b]) for a, b in pairwise(cuts)]


def str_heads(column: pa.Array) -> pa.Array:
    """The msgpack str 32 head of each value of a string or binary array."""
    head = np.empty(len(column), STR_HEAD)
    head["tag"], head["length"] = STR32, pc.binary_length(column).to_numpy()
    return heads(head)


def pack_pairs(members: pa.Array, scores: pa.Array, chunk: int) -> list[bytes]:
    """ickadd's arguments (ick.pack_pairs for columns), ``chunk`` members each, built
    column-wise by Arrow: Arrow writes the scores' shortest exact text, Redis parses it.

    ``members``: string; ``scores``: float64, finite; no nulls.
    """
    if not len(members):
        return []
    numbers = pc.cast(scores, pa.string())
    pieces = cut(pc.binary_join_element_wise(
        str_heads(numbers), numbers.cast(pa.binary()),
        str_heads(members), members.cast(pa.binary()), b""), chunk)
    sizes = [chunk] * (len(pieces) - 1) + [len(members) - chunk * (len(pieces) - 1)]
    return [struct.pack(">BI", ARRAY32, 2 * size) + piece
            for size, piece in zip(sizes, pieces, strict=True)]


def pack_rows(ids: pa.Array, elements: pa.Array, times: np.ndarray, chunk: int
              ) -> list[bytes]:
    """dh_push's packed arguments, ``chunk`` rows each, built column-wise by Arrow (each
    row's head, id and element joined into one binary value; their bytes back to back
    are the argument).

    ``ids``: string; ``elements``: string or binary; ``times``: float64 ms; no nulls.
    """
    rows = len(ids)
    head = np.empty(rows, HEAD)
    head["time"] = times
    head["id"] = pc.binary_length(ids).to_numpy()
    head["element"] = pc.binary_length(elements).to_numpy()
    joined = pc.binary_join_element_wise(heads(head), ids.cast(pa.binary()),
                                         elements.cast(pa.binary()), b"")
    return cut(joined, chunk)


def split_rows(ids: pa.Array, elements: pa.Array, times: np.ndarray, shards: int
               ) -> dict[int, tuple[pa.Array, pa.Array, np.ndarray]]:
    """The columns per shard of ``shards`` by id (rows in their order within a shard)."""
    if shards == 1:
        return {0: (ids, elements, times)}
    by_shard = np.fromiter((shard_of(id, shards) for id in ids.to_pylist()), np.int32,
                           len(ids))
    out = {}
    for shard in np.unique(by_shard):
        rows = pa.array(np.flatnonzero(by_shard == shard))
        out[int(shard)] = (ids.take(rows), elements.take(rows), times[rows.to_numpy()])
    return out
