"""The options of every format, in one table, and one parser: types, defaults, errors that
name the option.

Spark hands a data source its options as a case-insensitive mapping of strings. ``OPTIONS``
lists every option with the uses (format and direction) that take it, its default and its
meaning (README's option tables are checked against it). ``Options(raw, use)`` refuses an
option that use does not take, naming the closest one it does take or the use that takes
it, so a misspelled option never silently changes nothing; its getters raise
IckConfigError naming the option and what was expected, on the driver, before any task
runs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import bounds
from .connection import DEFAULT_URL, ConnectionSpec, check_url, parse_cluster, redact
from .errors import IckConfigError
from .keys import MAX_SHARDS, check_name
from .retry import DEFAULT_RETRY_TIMEOUT

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}

ICK_WRITE = "format('ick') write"
ICK_READ = "format('ick') read"
ICK_STREAM = "format('ick') readStream"
DH_WRITE = "format('dehydrator') write"
DH_STREAM = "format('dehydrator') readStream"
USES = (ICK_WRITE, ICK_READ, ICK_STREAM, DH_WRITE, DH_STREAM)
SPARKS_OWN = ("path", "paths", "checkpointlocation")  # set by Spark or its users, not ours


@dataclass(frozen=True)
class Option:
    """One option: its name, the uses that take it, its default as shown, its meaning."""

    name: str
    uses: tuple[str, ...]
    default: str
    meaning: str


def _option(name: str, uses: Iterable[str], default: str, meaning: str) -> Option:
    return Option(name, tuple(uses), default, meaning)


OPTIONS = (
    _option("redis.url", USES, DEFAULT_URL, "Redis URL; several seed nodes for a cluster"),
    _option("redis.cluster", USES, "auto", "auto | true | false"),
    _option("redis.username", USES, "", "ACL user"),
    _option("redis.password", USES, "", "password"),
    _option("redis.timeout", USES, "10", "socket timeout in seconds"),
    _option("redis.retryTimeout", USES, "60s", "how long transient errors are retried"),
    _option("ick", (ICK_WRITE, ICK_READ, ICK_STREAM), "", "the logical Ick (required)"),
    _option("dehydrator", (DH_WRITE, DH_STREAM), "", "the dehydrator (required)"),
    _option("shards", USES, "1", "number of shards"),
    _option("memberColumn", (ICK_WRITE,), "member", "member column"),
    _option("scoreColumn", (ICK_WRITE,), "score", "score column"),
    _option("onInvalid", (ICK_WRITE,), "fail", "fail | skip invalid rows"),
    _option("chunkSize", (ICK_WRITE,), str(bounds.ICK_CHUNK), "members per call"),
    _option("chunkSize", (DH_WRITE,), str(bounds.DEHYDRATOR_CHUNK), "elements per call"),
    _option("maxMembersPerTrigger", (ICK_STREAM,), "500000", "members per micro-batch"),
    _option("minMembersPerPartition", (ICK_STREAM,), "100000", "members per read task"),
    _option("maxElementsPerTrigger", (DH_STREAM,), "100000", "elements per micro-batch"),
    _option("minElementsPerPartition", (DH_STREAM,), "100000", "elements per read task"),
    _option("consumerId", (ICK_STREAM, DH_STREAM), "", "owner id of the shard leases"),
    _option("leaseTimeout", (ICK_STREAM, DH_STREAM), "60s", "lease time of a dead query"),
    _option("delay", (DH_WRITE,), "", "due time from now"),
    _option("onDuplicate", (DH_WRITE,), "keep", "keep | replace | error"),
    _option("elementType", (DH_STREAM,), "string", "string | binary"),
    _option("idType", (DH_STREAM,), "string", "string | binary"),
    _option("memberType", (ICK_READ, ICK_STREAM), "string", "string | binary"),
)
CONNECTION_OPTIONS = tuple(o.name for o in OPTIONS if o.name.startswith("redis."))


def taken_by(use: str) -> list[str]:
    """The names of the options that ``use`` takes."""
    return [o.name for o in OPTIONS if use in o.uses]


def check_known(raw: Iterable[str], use: str) -> None:
    """Raise IckConfigError for an option (in ``raw``) that ``use`` does not take."""
    known = {name.lower(): name for name in taken_by(use)}
    for given in raw:
        key = str(given).lower()
        if key in known or key in SPARKS_OWN or key.startswith("spark."):
            continue
        hint = [f"did you mean {m!r}?" for m in difflib.get_close_matches(
            key, known, n=1, cutoff=0.6) for m in [known[m]]]
        elsewhere = [f"{o.name!r} is an option of " + " and ".join(
            u for u in o.uses if u != use) for o in OPTIONS if o.name.lower() == key]
        raise IckConfigError(
            f"{use}: unknown option {given!r}" + "".join(f"; {h}" for h in hint + elsewhere)
            + ". It takes: " + ", ".join(taken_by(use)))


class Options:
    """Typed, case-insensitive access to one format's options."""

    def __init__(self, raw: Mapping[str, Any], fmt: str, use: str | None = None) -> None:
        self.raw = {str(k).lower(): v for k, v in dict(raw).items()}
        self.fmt = fmt
        self.use = use
        if use is not None:
            check_known(dict(raw), use)

    def default(self, name: str) -> str:
        """The default of option ``name`` for this use, from OPTIONS."""
        for option in OPTIONS:
            if option.name == name and self.use in option.uses:
                return option.default
        raise KeyError(f"{self.use} takes no option {name!r}")

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

    def integer(self, name: str, default: int | None = None, *, minimum: int = 0,
                maximum: int | None = None) -> int:
        """An integer option; ``default`` None: the default of OPTIONS."""
        value = self.raw.get(name.lower())
        if value is None or str(value) == "":
            return int(self.default(name)) if default is None else default
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

    def shards(self) -> int:
        """Option ``shards``: 1 to MAX_SHARDS."""
        return self.integer("shards", minimum=1, maximum=MAX_SHARDS)

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
        try:
            check_url(url)
        except IckConfigError:
            raise self._fail("redis.url", "a URL starting with redis://, rediss:// or unix://",
                             redact(url)) from None
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
