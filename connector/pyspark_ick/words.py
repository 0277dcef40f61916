"""How counts read in English, wherever the CLI, the console or a log line says one:
"1 dead letter", "2 dead letters", "the 1st", "the 22nd"."""

from __future__ import annotations


def noun_for(count: float, noun: str, many: str | None = None) -> str:
    """``noun`` when ``count`` is 1, else ``many`` (noun + "s" unless given)."""
    return noun if count == 1 else many or noun + "s"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and its noun: "1 key", "2 keys", "2 retries" (``many``)."""
    return f"{count} {noun_for(count, noun, many)}"


def ordinal(number: int) -> str:
    """``number`` as an ordinal, with thousands separators: 1st, 2nd, 3rd, 11th, 1,001st."""
    if number % 100 in (11, 12, 13):
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number:,}{suffix}"
