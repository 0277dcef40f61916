"""One parser for every format's options: types, defaults, errors that name the option.

Spark hands a data source its options as a case-insensitive mapping of strings. Each
format reads what it needs through ``Options``; every getter raises IckConfigError naming
the option and what was expected, on the driver, before any task runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .connection import DEFAULT_URL, ConnectionSpec, parse_cluster
from .errors import IckConfigError
from .keys import check_name
from .retry import DEFAULT_RETRY_TIMEOUT

CONNECTION_OPTIONS = ("redis.url", "redis.cluster", "redis.username", "redis.password",
                      "redis.timeout", "redis.retryTimeout")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


class Options:
    """Typed, case-insensitive access to one format's options."""

    def __init__(self, raw: Mapping[str, Any], fmt: str) -> None:
        self.raw = {str(k).lower(): v for k, v in dict(raw).items()}
        self.fmt = fmt

    def _fail(self, name: str, expected: str, value: Any) -> IckConfigError:
        shown = "***" if "password" in name.lower() else repr(value)
        return IckConfigError(f"format({self.fmt!r}) option {name!r}: expected {expected}, "
                              f"got {shown}")

    def has(self, name: str) -> bool:
        return name.lower() in self.raw

    def string(self, name: str, default: str | None = None, *, required: bool = False
               ) -> str | None:
        value = self.raw.get(name.lower())
        if value is None or str(value) == "":
            if required:
                raise IckConfigError(f"format({self.fmt!r}) needs option {name!r}")
            return default
        return str(value)

    def name(self, name: str) -> str:
        """A required Ick or dehydrator name (no braces)."""
        value = self.string(name, required=True)
        assert value is not None
        try:
            return check_name(value, f"option {name!r}")
        except IckConfigError as exc:
            raise IckConfigError(f"format({self.fmt!r}) {exc}") from None

    def integer(self, name: str, default: int, *, minimum: int = 0,
                maximum: int | None = None) -> int:
        value = self.raw.get(name.lower())
        if value is None or str(value) == "":
            return default
        bound = f"an integer >= {minimum}" + (f" and <= {maximum}" if maximum else "")
        try:
            number = int(str(value).strip())
        except ValueError:
            raise self._fail(name, bound, value) from None
        if number < minimum or (maximum is not None and number > maximum):
            raise self._fail(name, bound, value)
        return number

    def number(self, name: str, default: float, *, minimum: float = 0.0) -> float:
        value = self.raw.get(name.lower())
        if value is None or str(value) == "":
            return default
        try:
            number = float(str(value).strip())
        except ValueError:
            raise self._fail(name, f"a number >= {minimum}", value) from None
        if not number >= minimum:
            raise self._fail(name, f"a number >= {minimum}", value)
        return number

    def choice(self, name: str, choices: Iterable[str], default: str) -> str:
        allowed = list(choices)
        value = self.raw.get(name.lower())
        if value is None or str(value) == "":
            return default
        text = str(value).strip().lower()
        for choice in allowed:
            if choice.lower() == text:
                return choice
        raise self._fail(name, "one of " + " | ".join(allowed), value)

    def duration_ms(self, name: str, default: int | None) -> int | None:
        """A duration such as ``"30s"``, ``"500ms"``, ``"2m"`` (bare numbers are ms)."""
        value = self.raw.get(name.lower())
        if value is None or str(value) == "":
            return default
        match = _DURATION.match(str(value))
        if not match:
            raise self._fail(name, 'a duration such as "500ms", "30s", "2m" or "1h"', value)
        amount, unit = float(match.group(1)), (match.group(2) or "ms").lower()
        return round(amount * _UNITS_MS[unit])

    def lease_ms(self) -> int:
        """Option ``leaseTimeout`` of the stream sources (default 60s, at least 100ms)."""
        value = self.duration_ms("leaseTimeout", 60_000)
        if value is None or value < 100:
            raise self._fail("leaseTimeout", "a duration of at least 100ms",
                             self.raw.get("leasetimeout"))
        return value

    def connection(self) -> ConnectionSpec:
        """The ``redis.*`` options as a picklable ConnectionSpec."""
        url = self.string("redis.url", DEFAULT_URL)
        assert url is not None
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise self._fail("redis.url", "a URL starting with redis://, rediss:// or unix://",
                             "<url hidden>")
        try:
            cluster = parse_cluster(self.raw.get("redis.cluster", "auto"))
        except IckConfigError:
            raise self._fail("redis.cluster", "auto | true | false",
                             self.raw.get("redis.cluster")) from None
        return ConnectionSpec(
            url=url,
            cluster=cluster,
            username=self.string("redis.username"),
            password=self.string("redis.password"),
            timeout=self.number("redis.timeout", 10.0, minimum=0.001),
            retry_timeout=(self.duration_ms("redis.retryTimeout",
                                            round(DEFAULT_RETRY_TIMEOUT * 1000)) or 0) / 1000,
        )
