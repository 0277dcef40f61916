"""What every batch read of the connector has: a partition per shard (or the members of
one to look up), the check of the columns its schema asks for, and of the name it reads
(a batch read writes nothing: a name that does not exist fails on the driver)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import DataType, StructType

from ..connection import ConnectionSpec
from ..errors import IckConfigError
from ..existence import require
from ..urls import where


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


def check_exists(connection: ConnectionSpec, name: str, kind: str, shards: int) -> None:
    """existence.Missing, naming the Redis asked and a registered name close to ``name``,
    unless Ick (``kind`` "ick") or dehydrator ``name`` of ``shards`` shards exists. Reads
    only: a batch read records nothing."""
    require(connection.client(), name, kind, shards, where(connection.url))
