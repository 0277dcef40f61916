"""Redis URLs: the schemes taken, seed nodes, and the forms safe to log."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from .errors import IckConfigError

DEFAULT_URL = "redis://localhost:6379/0"
SCHEMES = ("redis", "rediss", "unix")
_SECRET_QUERY = re.compile(r"(?i)((?:^|&)password=)[^&]*")


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
    """Scheme, host and port (or socket path) of ``url``, without credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    return f"{parts.scheme}://" + ",".join(_host_port(seed) for seed in seeds(url))


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = str(parts.port or 6379)
    except ValueError:
        port = "?"
    return f"{parts.hostname}:{port}"


def seeds(url: str) -> list[str]:
    """One URL per seed node of ``url``: ``redis://user:pw@h1:1,h2:2/0`` lists two nodes
    of a cluster (each URL keeps the scheme, credentials, path and query)."""
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if "," not in hosts:
        return [url]
    rest = url[len(f"{parts.scheme}://{parts.netloc}"):]
    return [f"{parts.scheme}://{userinfo}{at}{host.strip()}{rest}"
            for host in hosts.split(",") if host.strip()]


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
    if urlsplit(url).scheme not in SCHEMES:
        raise IckConfigError(
            f"redis.url must start with redis://, rediss:// or unix://, got {redact(url)!r}")
    return url
