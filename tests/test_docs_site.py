"""The docs site builds with warnings as errors (issue 41): ``mkdocs build --strict``, offline.

A link to a missing page or anchor, a page left out of the nav, or a docstring
mkdocstrings cannot render fails the build. docs/hooks.py lists every page of
docs/records/ in the nav; the options and CLI tables are in the pages (docs/generate.py).
(Not ``-q``: MkDocs 1.6 then drops its warnings before strict mode counts them.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_ick.cli.parser import build_parser
from pyspark_ick.option_table import OPTIONS

pytestmark = pytest.mark.slow  # mkdocs builds the site

ROOT = Path(__file__).resolve().parents[1]


def commands() -> list[str]:
    """Every command line path of pyspark-ick: ``stats``, ``dead list``, ..."""
    found = []
    for name, sub in build_parser()._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        leaves = sub._subparsers._group_actions[0].choices if sub._subparsers else {}  # type: ignore[union-attr]
        found += [f"{name} {leaf}" for leaf in leaves] or [name]
    return found


def toc(page: str) -> list[tuple[str, str]]:
    """(anchor, label) of every entry of a built page's table of contents."""
    start = page.rfind("<nav", 0, page.index("md-nav--secondary"))
    depth = 0
    for tag in re.finditer(r"<nav\b|</nav>", page[start:]):
        depth += 1 if tag[0] == "<nav" else -1
        if depth == 0:
            break
    entries = page[start : start + tag.end()]
    link = (
        r'<a href="#([^"]*)" class="md-nav__link">\s*<span class="md-ellipsis">\s*(.*?)\s*</span>'
    )
    return re.findall(link, entries, re.S)


def repeated(entries: list[tuple[str, str]]) -> list[str]:
    """Labels told twice (any case) among the entries that are not a class's members
    (``Ick.add`` and ``ShardedIck.add`` are two entries, under two classes)."""
    seen: dict[str, str] = {}
    twice = []
    for anchor, label in entries:
        if re.search(r"\.[A-Z]\w*\.\w+$", anchor):  # a method of a class
            continue
        if label.lower() in seen:
            twice.append(f"{label} (#{anchor}, #{seen[label.lower()]})")
        seen[label.lower()] = anchor
    return twice


def test_the_site_builds_strict_with_every_option_command_and_record(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    options = (site / "reference" / "options.html").read_text()
    for option in OPTIONS:
        assert f"<code>{option.name}</code>" in options, option.name
    cli = (site / "reference" / "cli.html").read_text()
    for command in commands():
        assert f"pyspark-ick {command}</code>" in cli, command
    home = (site / "index.html").read_text()
    for record in (ROOT / "docs" / "records").glob("*.md"):
        assert f'href="records/{record.stem}.html"' in home, record.name
    assert "Changelog" in (site / "changelog.html").read_text()

    api = (site / "reference" / "api.html").read_text()
    assert len(toc(api)) > 20
    assert repeated(toc(api)) == []  # "stats" twice, "Errors" and "errors" were
    # an option's name breaks nowhere: its first column's code does not wrap
    assert '<link rel="stylesheet" href="../css/extra.css">' in options
    css = (site / "css" / "extra.css").read_text()
    rule = re.search(r"\.md-typeset td:first-child code \{([^}]*)\}", css)
    assert rule and "white-space: nowrap" in rule[1], css
    assert "<td><code>redis.cluster</code></td>" in options
