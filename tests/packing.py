"""The rows argument of the bulk scripts, for the tests: the Spark sinks' layout
(``pack_strings``, what columns.py builds column-wise) and the plain client's
(packing.pack_values) are the same msgpack array of strings with different heads."""

from __future__ import annotations

import struct

import msgpack


def pack_strings(values: list[bytes]) -> bytes:
    """One msgpack array 32 of str 32 values, built value by value: the layout columns.py
    builds column-wise."""
    parts = [struct.pack(">BI", 0xDD, len(values))]
    for value in values:
        parts += (struct.pack(">BI", 0xDB, len(value)), value)
    return b"".join(parts)


def decode_rows(packed: bytes, width: int) -> list[tuple[bytes, ...]]:
    """A msgpack array of strings (any heads msgpack has for them), as rows of ``width``
    values; the str 32 layout of pack_strings checked byte by byte."""
    values = msgpack.unpackb(packed, raw=True)
    assert isinstance(values, list) and all(type(v) is bytes for v in values)
    assert len(values) % width == 0
    if packed[0] == 0xDD:  # pack_strings: array 32 of str 32, nothing else
        at = 5
        for value in values:
            assert struct.unpack_from(">BI", packed, at) == (0xDB, len(value))
            at += 5 + len(value)
        assert at == len(packed)
    return [tuple(values[i : i + width]) for i in range(0, len(values), width)]
