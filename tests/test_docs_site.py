"""The docs site builds with warnings as errors (issue 41): ``mkdocs build --strict``, offline.

A link to a missing page or anchor, a page left out of the nav, or a docstring
mkdocstrings cannot render fails the build. docs/hooks.py lists every page of
docs/records/ in the nav; the options and CLI tables are in the pages (docs/generate.py). (Not ``-q``:
MkDocs 1.6 then drops its warnings before strict mode counts them.)
"""

from __future__ import annotations

import os
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
