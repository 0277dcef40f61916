"""Decodes the rows argument of the bulk scripts (scripts.pack_strings) for the tests."""

from __future__ import annotations

import struct


def decode_rows(packed: bytes, width: int) -> list[tuple[bytes, ...]]:
    """A msgpack array 32 of str 32 values, as rows of ``width`` values."""
    tag, count = struct.unpack_from(">BI", packed)
    assert tag == 0xDD and count % width == 0
    values, at = [], 5
    for _ in range(count):
        tag, size = struct.unpack_from(">BI", packed, at)
        assert tag == 0xDB
        values.append(packed[at + 5:at + 5 + size])
        at += 5 + size
    assert at == len(packed)
    return [tuple(values[i:i + width]) for i in range(0, count, width)]
