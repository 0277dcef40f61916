"""Reading a format's options by the one table of them (option_table.py): types, defaults,
errors that name the option.

Spark hands a data source its options as a case-insensitive mapping of strings.
``Options(raw, fmt, use)`` refuses an option that use does
not take, naming the closest one it does take or the use that takes it, so a misspelled
option never silently changes nothing; its one getter ``get`` raises IckConfigError naming
the option and what was expected, on the driver, before any task runs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .connection import ConnectionSpec
from .errors import IckConfigError, ShardCountError
from .keys import check_name
from .option_table import IGNORES, OPTIONS, SPARKS_OWN, Option, taken_by
from .registry import resolve
from .urls import check_url, is_sentinel, parse_cluster, redact, where

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def check_known(raw: Iterable[str], use: str | tuple[str, ...]) -> None:
    """Raise IckConfigError for an option (in ``raw``) that ``use`` does not take (a tuple
    of uses: that none of them takes); the options a use ignores (IGNORES) pass."""
    uses = (use,) if isinstance(use, str) else use
    label = " or ".join(uses[:1] + tuple(u.rsplit(" ", 1)[-1] for u in uses[1:]))
    taken = list(dict.fromkeys(name for u in uses for name in taken_by(u)))
    known = {name.lower(): name for name in taken}
    ignored = {name.lower() for u in uses for i in IGNORES.get(u, ()) for name in taken_by(i)}
    for given in raw:
        key = str(given).lower()
        if key in known or key in ignored or key in SPARKS_OWN or key.startswith("spark."):
            continue
        hint = [
            f"did you mean {m!r}?"
            for m in difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            for m in [known[m]]
        ]
        elsewhere = [
            f"{o.name!r} is an option of " + " and ".join(u for u in o.uses if u not in uses)
            for o in OPTIONS
            if o.name.lower() == key
        ]
        raise IckConfigError(
            f"{label}: unknown option {given!r}"
            + "".join(f"; {h}" for h in hint + elsewhere)
            + ". It takes: "
            + ", ".join(taken)
        )


def parse_duration_ms(text: Any) -> int | None:
    """Milliseconds of a duration such as ``"30s"``, ``"500ms"``, ``"2m"``, ``"1h"`` (a
    bare number is ms); None when ``text`` is not one (the CLI parses with it too)."""
    match = _DURATION.match(str(text))
    if not match:
        return None
    amount, unit = float(match.group(1)), (match.group(2) or "ms").lower()
    return round(amount * _UNITS_MS[unit])


class Options:
    """Typed, case-insensitive access to one format's options (``get``), for ``use``: one
    use, a tuple of uses (any of them: a read at ``load()``, batch or stream), or None
    (every use, nothing checked)."""

    def __init__(
        self, raw: Mapping[str, Any], fmt: str, use: str | tuple[str, ...] | None = None
    ) -> None:
        self.raw = {str(k).lower(): v for k, v in dict(raw).items()}
        self.fmt = fmt
        self.uses = (use,) if isinstance(use, str) else use
        if use is not None:
            check_known(dict(raw), use)

    def _takes(self, option: Option) -> bool:
        return self.uses is None or any(u in option.uses for u in self.uses)

    def option(self, name: str) -> Option:
        """The entry of OPTIONS for ``name`` and this use."""
        for option in OPTIONS:
            if option.name == name and self._takes(option):
                return option
        raise KeyError(f"{self.uses} takes no option {name!r}")

    def has(self, name: str) -> bool:
        """Whether option ``name`` was given (not empty)."""
        value = self.raw.get(name.lower())
        return value is not None and str(value) != ""

    def get(self, name: str) -> Any:
        """Option ``name`` as its kind's type, its default when not given; IckConfigError
        naming the option and what it expects for a value it cannot take."""
        option = self.option(name)
        if not self.has(name):
            if option.required:
                raise IckConfigError(f"format({self.fmt!r}) needs option {name!r}")
            return option.default
        return PARSERS[option.kind](self, option, self.raw[name.lower()])

    def _fail(self, name: str, expected: str, value: Any) -> IckConfigError:
        shown = "***" if "password" in name.lower() else repr(value)
        return IckConfigError(
            f"format({self.fmt!r}) option {name!r}: expected {expected}, got {shown}"
        )

    def _text(self, option: Option, value: Any) -> str:
        return str(value)

    def _name(self, option: Option, value: Any) -> str:
        try:
            return check_name(str(value), f"option {option.name!r}")
        except IckConfigError as exc:
            raise IckConfigError(f"format({self.fmt!r}) {exc}") from None

    def _integer(self, option: Option, value: Any) -> int:
        low = int(option.minimum or 0)
        bound = f"an integer >= {low}" + (
            f" and <= {int(option.maximum)}" if option.maximum is not None else ""
        )
        try:
            number = int(str(value).strip())
        except ValueError:
            raise self._fail(option.name, bound, value) from None
        if number < low or (option.maximum is not None and number > option.maximum):
            raise self._fail(option.name, bound, value)
        return number

    def _seconds(self, option: Option, value: Any) -> float:
        low = option.minimum or 0.0
        try:
            number = float(str(value).strip())
        except ValueError:
            raise self._fail(option.name, f"a number >= {low}", value) from None
        if not number >= low:
            raise self._fail(option.name, f"a number >= {low}", value)
        return number

    def _fraction(self, option: Option, value: Any) -> float:
        low, high = option.minimum or 0.0, option.maximum or 1.0
        try:
            number = float(str(value).strip())
        except ValueError:
            raise self._fail(option.name, f"a number from {low:g} to {high:g}", value) from None
        if not low <= number <= high:
            raise self._fail(option.name, f"a number from {low:g} to {high:g}", value)
        return number

    def _choice(self, option: Option, value: Any) -> str:
        text = str(value).strip().lower()
        for choice in option.choices:
            if choice.lower() == text:
                return choice
        raise self._fail(option.name, "one of " + " | ".join(option.choices), value)

    def _duration(self, option: Option, value: Any) -> int:
        ms = parse_duration_ms(value)
        if ms is None:
            raise self._fail(option.name, 'a duration such as "500ms", "30s", "2m" or "1h"', value)
        if option.minimum and ms < option.minimum:
            raise self._fail(option.name, f"a duration of at least {int(option.minimum)}ms", value)
        return ms

    def _url(self, option: Option, value: Any) -> str:
        try:
            return check_url(str(value))
        except IckConfigError as exc:
            if is_sentinel(str(value)):  # a Sentinel URL that names no service, say
                raise IckConfigError(
                    f"format({self.fmt!r}) option {option.name!r}: {exc}"
                ) from None
            raise self._fail(
                option.name,
                "a URL starting with redis://, rediss://, unix:// or "
                "redis+sentinel:// (rediss+sentinel://)",
                redact(str(value)),
            ) from None

    def _cluster(self, option: Option, value: Any) -> str:
        try:
            return parse_cluster(value)
        except IckConfigError:
            raise self._fail(option.name, "auto | true | false", value) from None

    def connection(self) -> ConnectionSpec:
        """The ``redis.*`` options as a picklable ConnectionSpec."""
        return ConnectionSpec(
            url=self.get("redis.url"),
            cluster=self.get("redis.cluster"),
            username=self.get("redis.username"),
            password=self.get("redis.password"),
            timeout=self.get("redis.timeout"),
            retry_timeout=self.get("redis.retryTimeout") / 1000,
            **(
                {
                    "wait_replicas": self.get("redis.waitReplicas"),
                    "wait_timeout": self.get("redis.waitTimeout") / 1000,
                }
                if self.takes("redis.waitReplicas")
                else {}
            ),
        )

    def shards(self) -> int:
        """Option ``shards``, else the count recorded in Redis for this format's Ick or
        dehydrator, else 1 (registry.resolve: one GET, on the driver; ShardCountError
        naming the Redis when a given count is not the recorded one)."""
        connection = self.connection()
        try:
            return resolve(connection.client(), self.get(self.fmt), self.fmt, self.get("shards"))
        except ShardCountError as exc:  # the count recorded in that Redis: name it
            raise ShardCountError(f"{exc} (Redis at {where(connection.url)})") from None

    def takes(self, name: str) -> bool:
        """Whether this use takes option ``name`` (every use, when none was given)."""
        return any(o.name == name and self._takes(o) for o in OPTIONS)


PARSERS: dict[str, Callable[[Options, Option, Any], Any]] = {
    "text": Options._text,
    "name": Options._name,
    "integer": Options._integer,
    "seconds": Options._seconds,
    "fraction": Options._fraction,
    "choice": Options._choice,
    "duration": Options._duration,
    "url": Options._url,
    "cluster": Options._cluster,
}
