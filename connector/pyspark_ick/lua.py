"""The Lua text Redis runs: each script of ``lua/`` with the prelude helpers it uses, and
its SHA1 (what EVALSHA names)."""

from __future__ import annotations

import hashlib
import re
from functools import cache
from importlib import resources
from pathlib import Path

from .errors import IckError

PRELUDE = "_prelude"


def lua_dir() -> Path:
    """The folder of the Lua scripts: inside the wheel, or the repository's ``lua/``."""
    packaged = Path(str(resources.files("pyspark_ick"))) / "lua"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "lua"


@cache
def source(name: str) -> str:
    """The text Redis runs for script ``name``: the prelude's helpers that it uses (Redis
    defines every helper it is sent on each call), then the script."""
    folder = lua_dir()
    try:
        body = (folder / f"{name}.lua").read_text()
        prelude = (folder / f"{PRELUDE}.lua").read_text()
    except FileNotFoundError as exc:
        raise IckError(f"Lua script {name!r} not found in {folder}") from exc
    return "".join(block + "\n" for block in helpers(prelude, body)) + body


def helpers(prelude: str, body: str) -> list[str]:
    """The blocks of ``prelude`` (separated by blank lines) that ``body`` uses, directly
    or through another block, in prelude order."""

    def code(lua: str) -> str:
        return re.sub(r"--[^\n]*", "", lua)

    blocks = prelude.strip().split("\n\n")
    defines = [set(re.findall(r"^local (?:function )?(\w+)", b, re.M)) for b in blocks]
    used, text = [False] * len(blocks), code(body)
    changed = True
    while changed:
        changed = False
        for i, names in enumerate(defines):
            if not used[i] and any(re.search(rf"\b{n}\b", text) for n in names):
                used[i], changed, text = True, True, text + code(blocks[i])
    return [b for b, u in zip(blocks, used, strict=True) if u]


@cache
def sha(name: str) -> str:
    return hashlib.sha1(source(name).encode()).hexdigest()
