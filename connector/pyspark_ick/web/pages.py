"""What each console page reads from Redis, as plain data: bounded calls only, through the
library's operations (observe, dead_letters, dehydrator_view, the numbered logs). A name
that does not exist (existence.py) is Missing: a 404 page naming the Redis asked; nothing
is written."""

from __future__ import annotations

from typing import Any

from ..clients import Client
from ..dead_letters import Cursor, DeadLetters
from ..dehydrator import Dehydrator
from ..dehydrator_view import due_histogram, peek
from ..dehydrator_view import stats as dehydrator_stats
from ..existence import registered, require
from ..keys import check_name
from ..observe import peek as ick_peek
from ..observe import server_time
from ..observe import summary as ick_summary
from ..reservations import ReservationLog
from ..sharded import ShardedIck

NAMES_PER_PAGE = 50  # Icks (and dehydrators) on one overview page
HEAD = 20  # members of the queue's head, elements due first
IN_FLIGHT = 10  # reservations or claims shown per shard
LETTERS_PER_PAGE = 50  # dead letters shown per page
LOOK_PER_PAGE = 2000  # dead letters a filtered page looks at, at most


def overview(client: Client, first: str = "") -> dict[str, Any]:
    """Every registered Ick and dehydrator (from name ``first`` on, NAMES_PER_PAGE of
    each): summaries and the name to go on from."""
    out: dict[str, Any] = {"server_time": server_time(client)}
    for kind, read in (("ick", ick_summary), ("dehydrator", dehydrator_stats)):
        names = [(n, s) for n, s in registered(client, kind).items() if n >= first]
        out[kind] = [read(client, n, s) for n, s in names[:NAMES_PER_PAGE]]
        out[f"{kind}_more"] = names[NAMES_PER_PAGE][0] if len(names) > NAMES_PER_PAGE else None
    return out


def ick_shards(client: Client, name: str, where: str = "") -> int:
    """The shard count of Ick ``name``; Missing (existence.py) when it does not exist in
    the Redis of ``where``."""
    return require(client, check_name(name, "Ick name"), "ick", where=where)


def ick_page(client: Client, name: str, where: str = "") -> dict[str, Any]:
    """An Ick's shards, the head of its queue, reservations in flight and leases."""
    shards = ick_shards(client, name, where)
    report = ick_summary(client, name, shards)
    now = report["server_time"]
    flights = []
    for row in report["rows"]:
        count, shown = ReservationLog(client, row["key"]).in_flight(IN_FLIGHT)
        flights.append({"shard": row["shard"], "count": count, "shown": shown})
    return {
        "report": report,
        "head": ick_peek(client, name, shards, HEAD),
        "flights": flights,
        "now": now,
    }


def dead_page(
    client: Client, name: str, error: str, member: str, cursor: Cursor, where: str = ""
) -> dict[str, Any]:
    """A page of the dead letters of Ick ``name`` whose error and member hold ``error``
    and ``member``, from ``cursor``: at most LETTERS_PER_PAGE, looking at no more than
    LOOK_PER_PAGE."""
    shards = ick_shards(client, name, where)
    letters = DeadLetters(ShardedIck(client, name, shards))
    counts = letters.count()
    found = letters.scan(
        cursor, error=error, member=member, limit=LETTERS_PER_PAGE, budget=LOOK_PER_PAGE
    )
    here = counts[cursor.shard] if cursor.shard < shards else 0
    before = sum(counts[: cursor.shard]) + min(cursor.index, here)
    return {
        "shards": shards,
        "counts": counts,
        "total": sum(counts),
        "scan": found,
        "looked_from": before,
        "looked_to": before + found.looked,
        "now": server_time(client),
    }


def dehydrator_shards(client: Client, name: str, where: str = "") -> int:
    """The shard count of dehydrator ``name``; Missing when it does not exist in the Redis
    of ``where``."""
    return require(client, check_name(name, "dehydrator name"), "dehydrator", where=where)


def dehydrator_page(client: Client, name: str, where: str = "") -> dict[str, Any]:
    """A dehydrator's shards, the elements due first, a histogram of due times and the
    claims in flight."""
    shards = dehydrator_shards(client, name, where)
    dehydrator = Dehydrator(client, name, shards)
    flights = []
    for i in range(shards):
        count, shown = dehydrator.claim_log(i).in_flight(IN_FLIGHT)
        flights.append({"shard": i, "count": count, "shown": shown})
    return {
        "report": dehydrator_stats(client, name, shards),
        "due_first": peek(client, name, shards, HEAD),
        "histogram": due_histogram(client, name, shards),
        "flights": flights,
        "now": server_time(client),
    }
