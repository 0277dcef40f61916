"""What every batch read of the connector has: a partition per shard (or the members of
one to look up), and the check of the columns its schema asks for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import DataType, StructType

from ..errors import IckConfigError


@dataclass(frozen=True)
class ShardPartition(InputPartition):
    """One shard to read: all of it, or the members to look up (``members``)."""

    shard: int
    members: tuple[bytes, ...] | None = None


def check_columns(
    fmt: str, schema: StructType, known: Mapping[str, DataType], hints: Mapping[str, str]
) -> None:
    """IckConfigError unless every column of ``schema`` is one of ``known`` with its type;
    ``hints`` names the option that sets a column's type (member: "memberType=string")."""
    for f in schema.fields:
        expected = known.get(f.name)
        if expected is None:
            raise IckConfigError(
                f"format({fmt!r}) read: column {f.name!r} is not one of " + ", ".join(known)
            )
        if f.dataType != expected:
            hint = f" (option {hints[f.name]})" if f.name in hints else ""
            raise IckConfigError(
                f"format({fmt!r}) read: column {f.name!r} must be {expected.simpleString()}"
                f"{hint}, got {f.dataType.simpleString()}"
            )
