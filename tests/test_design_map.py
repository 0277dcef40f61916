"""docs/design.md's module map names every file of connector/ and nothing else: a module
added without a line, or a line left behind by a module that went, fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONNECTOR = ROOT / "connector"
DESIGN = ROOT / "docs" / "design.md"


def mapped(text: str) -> set[str]:
    """The files the module map's first column names, relative to connector/ (a name
    without a package is below pyspark_ick/)."""
    table = text[text.index("The module map of `connector/`") :]
    table = table[: table.index("\n\n", table.index("| --- |"))]
    names: set[str] = set()
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        first = row.split("|")[1]
        for name in re.findall(r"`([\w/]+\.py)`", first):
            names.add(name if name.startswith("pyspark_dehydrator/") else f"pyspark_ick/{name}")
    return names


def files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix() for p in root.rglob("*.py") if "__pycache__" not in p.parts
    }


def test_the_module_map_names_every_file_of_the_connector_and_no_other():
    names, found = mapped(DESIGN.read_text()), files(CONNECTOR)
    assert sorted(found - names) == [], "modules without a line in docs/design.md's map"
    assert sorted(names - found) == [], "lines of docs/design.md's map without a module"


def test_the_check_sees_a_missing_line_and_a_line_too_many(tmp_path):
    (tmp_path / "pyspark_ick").mkdir()
    for name in ("a.py", "b.py"):
        (tmp_path / "pyspark_ick" / name).write_text("")
    text = (
        "The module map of `connector/`:\n\n| module | owns |\n| --- | --- |\n"
        "| `a.py` | a |\n| `c.py` | c |\n\nafter"
    )
    assert files(tmp_path) - mapped(text) == {"pyspark_ick/b.py"}
    assert mapped(text) - files(tmp_path) == {"pyspark_ick/c.py"}


MAX_LINES = 400  # CONTRIBUTING.md: one job per module; past this, split it by idea


def test_every_module_of_the_connector_is_under_400_lines():
    long = {
        name: lines
        for name in files(CONNECTOR)
        if (lines := len((CONNECTOR / name).read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines: split each by idea"
