"""Redis URLs: the schemes taken, seed nodes, Sentinel URLs, and the forms safe to log."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from .errors import IckConfigError

DEFAULT_URL = "redis://localhost:6379/0"
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SCHEMES = ("redis", "rediss", "unix", *SENTINEL_SCHEMES)
SENTINEL_PORT = 26379
SENTINEL_QUERY = ("sentinel_username", "sentinel_password")
"""Query parameters of a Sentinel URL that go to the sentinels, not to the primary."""
_SECRET_QUERY = re.compile(r"(?i)((?:^|&)(?:sentinel_)?password=)[^&]*")


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe to log).

    Covers the password of the userinfo (``redis://user:secret@host``) and of the query
    string (``?password=secret``, which redis-py accepts too); never raises, even on a
    malformed port.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    out = url
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        out = out.replace(parts.netloc, f"{userinfo.partition(':')[0]}:***@{hostport}", 1)
    if parts.query:
        out = out.replace("?" + parts.query, "?" + _SECRET_QUERY.sub(r"\1***", parts.query), 1)
    return out


def where(url: str) -> str:
    """Scheme, host and port (or socket path) of ``url`` and its database when not 0,
    without credentials; a Sentinel URL names every sentinel and the service."""
    parts = urlsplit(url)
    path = [p for p in parts.path.split("/") if p]
    db = dict(parse_qsl(parts.query)).get("db", "")
    if parts.scheme == "unix":
        return f"unix://{parts.path}" + (f"?db={db}" if db.strip("0") else "")
    if parts.scheme in SENTINEL_SCHEMES:
        service, db = (path[0] if path else ""), (path[1] if len(path) > 1 else db)
        hosts = ",".join(_host_port(s, SENTINEL_PORT) for s in seeds(url)) + f"/{service}"
    else:
        db = path[0] if path else db
        hosts = ",".join(_host_port(seed) for seed in seeds(url))
    return f"{parts.scheme}://{hosts}" + (f"/{db}" if db.strip("0") else "")


def _host_port(url: str, default: int = 6379) -> str:
    parts = urlsplit(url)
    try:
        port = str(parts.port or default)
    except ValueError:
        port = "?"
    return f"{parts.hostname}:{port}"


def secrets(url: str) -> list[str]:
    """The passwords written in ``url`` (userinfo, ``password`` and ``sentinel_password``
    query parameters), as written and decoded: what must never be shown."""
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
    except ValueError:
        return []
    found += [v for k, v in parse_qsl(parts.query) if k.lower().endswith("password")]
    return sorted({v for value in found for v in (value, unquote(value))} - {""})


def scrub(message: str, url: str) -> str:
    """``message`` without the password of ``url`` (belt and braces: errors never hold it;
    the CLI's and the console's messages go through here)."""
    message = message.replace(url, redact(url))
    for value in secrets(url):  # the primary's and the sentinels' passwords
        message = message.replace(value, "***")
    return message


def is_sentinel(url: str) -> bool:
    """True for a ``redis+sentinel://`` or ``rediss+sentinel://`` URL."""
    return urlsplit(url).scheme in SENTINEL_SCHEMES


@dataclass(frozen=True)
class SentinelURL:
    """A parsed ``redis+sentinel://[user:password@]h1[:p1],h2[:p2]/SERVICE[/DB]?...``.

    ``primary_url`` is the same URL as redis-py's ``redis://`` or ``rediss://`` form of
    the primary's settings (user, password, db, query), without a host: redis-py's own
    parser reads it; ``sentinel_username``/``sentinel_password`` authenticate to the
    sentinels."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    tls: bool
    primary_url: str = field(repr=False)
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)


def parse_sentinel(url: str) -> SentinelURL:
    """The parts of a Sentinel URL; IckConfigError (password hidden) when it lacks a
    sentinel or the service name, or a port or db is not a number."""

    def bad(why: str) -> IckConfigError:
        return IckConfigError(
            f"redis.url {redact(url)!r}: {why}; expected "
            "redis+sentinel://[user:password@]host1[:port1],host2[:port2]"
            "/SERVICE[/DB]"
        )

    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    sentinels = []
    for host in filter(None, (h.strip() for h in hosts.split(","))):
        name, colon, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not colon:
            name, port = host, ""
        if not port.isdigit() and port:
            raise bad(f"sentinel port {port!r} is not a number")
        sentinels.append((name.strip("[]"), int(port) if port else SENTINEL_PORT))
    if not sentinels:
        raise bad("no sentinel host")
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise bad("the path must be the service name, then optionally the db number")
    db = path[1] if len(path) == 2 else "0"
    if not db.isdigit():
        raise bad(f"db {db!r} is not a number")
    query = parse_qsl(parts.query, keep_blank_values=True)
    sentinel = {k.lower(): v for k, v in query if k.lower() in SENTINEL_QUERY}
    rest = urlencode([(k, v) for k, v in query if k.lower() not in SENTINEL_QUERY])
    tls = parts.scheme == "rediss+sentinel"
    primary = f"{'rediss' if tls else 'redis'}://{userinfo}{at}localhost/{db}" + (
        f"?{rest}" if rest else ""
    )
    return SentinelURL(
        tuple(sentinels),
        path[0],
        tls,
        primary,
        sentinel.get("sentinel_username") or None,
        sentinel.get("sentinel_password") or None,
    )


def seeds(url: str) -> list[str]:
    """One URL per seed node of ``url``: ``redis://user:pw@h1:1,h2:2/0`` lists two nodes
    of a cluster (each URL keeps the scheme, credentials, path and query)."""
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if "," not in hosts:
        return [url]
    rest = url[len(f"{parts.scheme}://{parts.netloc}") :]
    return [
        f"{parts.scheme}://{userinfo}{at}{host.strip()}{rest}"
        for host in hosts.split(",")
        if host.strip()
    ]


def parse_cluster(value: Any) -> str:
    """``auto``, ``yes`` or ``no`` from an option value."""
    text = str(value).strip().lower()
    if text in ("auto", ""):
        return "auto"
    if text in ("true", "yes", "1", "on"):
        return "yes"
    if text in ("false", "no", "0", "off"):
        return "no"
    raise IckConfigError(f"redis.cluster must be auto, true or false, got {value!r}")


def check_url(url: str) -> str:
    """``url`` if its scheme is one of SCHEMES, else IckConfigError (password hidden)."""
    scheme = urlsplit(url).scheme
    if scheme not in SCHEMES:
        raise IckConfigError(
            "redis.url must start with redis://, rediss://, unix://, redis+sentinel:// or "
            f"rediss+sentinel://, got {redact(url)!r}"
        )
    if scheme in SENTINEL_SCHEMES:
        parse_sentinel(url)
    return url


def unknown_parameter(exc: TypeError, url: str) -> IckConfigError | None:
    """The error to show when redis-py refused a query parameter of ``url`` as a keyword
    (``ssl_certfile`` on a ``redis://`` URL, a typo); None when ``exc`` is about another."""
    refused = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
    parts = urlsplit(url)
    if not refused or refused.group(1) not in {k for k, _ in parse_qsl(parts.query)}:
        return None
    name = refused.group(1)
    hint = (
        "TLS settings need a rediss:// URL"
        if name.startswith("ssl") and not parts.scheme.startswith("rediss")
        else "check its spelling against redis-py's connection arguments"
    )
    return IckConfigError(
        f"redis.url {redact(url)!r} has a query parameter {name!r} that this connection "
        f"does not take: {hint}"
    )
