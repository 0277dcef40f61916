"""The ACL rule of a least-privilege pyspark-ick user (docs/security.md): its own keys and
the commands the connector sends, each one checked by leaving it out.

Inside the Lua scripts: sorted sets, hashes, strings, lists (manifests and claims), TYPE,
EXISTS, COPY (reserve), DEL, UNLINK and TIME; scripts.py: EVALSHA and SCRIPT LOAD, and
EVAL for scripts queued on a pipeline of the user's (``scripts.queue``); the registry of
Icks and dehydrators that the exporter reads (keys.registry_key): SADD and SREM; connect():
PING and INFO (cluster detection); a Redis Cluster client also reads the topology (CLUSTER
SLOTS) and the command table (COMMAND).
"""

from __future__ import annotations

from .keys import REGISTRY_PREFIX

ACL_COMMANDS = (
    "-@all",
    "+@sortedset",
    "+@hash",
    "+@string",
    "+@list",
    "+type",
    "+exists",
    "+copy",
    "+del",
    "+unlink",
    "+time",
    "+sadd",
    "+srem",
    "+evalsha",
    "+eval",
    "+script|load",
    "+ping",
    "+info",
    "+cluster|slots",
    "+command",
)


def acl_key_patterns(*names: str) -> list[str]:
    """Key patterns covering every key of the Icks or dehydrators ``names`` (any shards),
    and the registry."""
    return [f"~{p}" for n in names for p in (n, f"{n}:*", f"{n}/*")] + [f"~{REGISTRY_PREFIX}*"]


def acl_rules(password: str, *names: str) -> list[str]:
    """ACL SETUSER rules: a user with ``password`` limited to the keys of ``names``."""
    return ["reset", "on", f">{password}", *acl_key_patterns(*names), *ACL_COMMANDS]


def acl_line(user: str, password: str, *names: str) -> str:
    """The ``users.acl`` / ``redis.conf`` line for ``acl_rules``."""
    rules = [r for r in acl_rules(password, *names) if r != "reset"]
    return " ".join(["user", user, *rules])
