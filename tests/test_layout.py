"""The package's modules import one another without cycles (a cycle is two modules that
cannot be understood, or changed, one without the other). Imports inside functions count."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "connector" / "pyspark_ick"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The pyspark_ick modules that ``path`` imports, anywhere in it."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            names = [f"{target}.{a.name}" for a in node.names]
            found.update(n if n in MODULES else target for n in names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in MODULES and m != here}


MODULES = {module_name(p) for p in PACKAGE.rglob("*.py")}


def cycles() -> list[list[str]]:
    graph = {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    return found


def test_no_import_cycles():
    assert cycles() == []


def test_the_check_finds_a_cycle(tmp_path, monkeypatch):
    package = tmp_path / "pyspark_ick"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from .a import x\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", package)
    monkeypatch.setattr(
        __import__(__name__), "MODULES", {module_name(p) for p in package.rglob("*.py")}
    )
    assert cycles() == [["pyspark_ick.a", "pyspark_ick.b", "pyspark_ick.a"]]
