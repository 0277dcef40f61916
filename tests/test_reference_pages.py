"""The reference pages a reader of the repository sees hold the tables, and say what the
code does: the options and CLI tables are docs/generate.py's output, committed; the
console's and the exporter's option tables (console.md, monitoring.md) are their
``--help``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from types import ModuleType

import pytest
from support import load_module

ROOT = Path(__file__).resolve().parents[1]


def generator() -> ModuleType:
    """docs/generate.py, imported from its file (docs/ is no package)."""
    return load_module(ROOT / "docs" / "generate.py", "generate")


def test_the_committed_reference_tables_are_the_codes() -> None:
    generate = generator()
    stale = [page.relative_to(ROOT).as_posix() for page in generate.stale()]
    assert stale == [], f"{stale} are stale: run {generate.COMMAND}"


def test_the_reference_pages_show_tables_not_placeholders() -> None:
    """A reader on the web sees every option and every command, not a marker."""
    generate = generator()
    options = (ROOT / "docs/reference/options.md").read_text()
    cli = (ROOT / "docs/reference/cli.md").read_text()
    for page in (options, cli):
        assert not re.search(r"^<!-- (options: .+|cli) -->$", page, re.M)
    from pyspark_ick.option_table import OPTIONS

    for option in OPTIONS:
        assert f"| `{option.name}` |" in options, option.name
    for words in generate.commands():
        assert f"## `pyspark-ick {words}`" in cli, words


def test_a_stale_table_is_found_and_the_check_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    generate = generator()
    page = tmp_path / "docs" / "options.md"
    page.parent.mkdir()
    page.write_text(
        "# x\n\n<!-- generated: options: connection -->\n| old |\n<!-- end generated -->\n"
    )
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    monkeypatch.setattr(generate, "PAGES", [page])
    assert generate.main(["--check"]) == 1
    assert "docs/options.md is stale: run python docs/generate.py" in capsys.readouterr().err
    assert generate.main([]) == 0
    assert "| `redis.url` |" in page.read_text() and "| old |" not in page.read_text()
    assert generate.stale() == []


def own_flags(command: str) -> dict[str, argparse.Action]:
    """The flags of ``pyspark-ick COMMAND`` that are its own (not the connection options
    every command takes), by their long name."""
    generate = generator()
    shared = generate.shared()
    parser = generate.commands()[command]
    return {
        action.option_strings[-1]: action
        for action in parser._actions
        if action.option_strings and not set(action.option_strings) & shared
    }


def table(page: str, heading: str) -> dict[str, str]:
    """The option table under ``heading`` in docs/PAGE: flag -> its default cell."""
    text = (ROOT / "docs" / page).read_text()
    section = text[text.index(heading) :]
    section = section[: section.find("\n#", 1)] if "\n#" in section[1:] else section
    return {
        flag: default.strip()
        for flag, default in re.findall(r"^\| `(--[\w-]+)[^`]*` \|([^|]*)\|", section, re.M)
    }


@pytest.mark.parametrize(
    ("command", "page", "heading"),
    [("web", "console.md", "## Start it"), ("metrics", "monitoring.md", "## From Redis")],
)
def test_the_pages_option_tables_are_the_commands_help(
    command: str, page: str, heading: str
) -> None:
    """Every flag of ``pyspark-ick COMMAND --help`` is in the page's table, with its
    default (or "(required)"), and the table lists no flag the command lacks."""
    documented = table(page, heading)
    flags = own_flags(command)
    assert sorted(documented) == sorted(flags), f"{page}'s table for {command}"
    for flag, action in flags.items():
        said = documented[flag]
        if action.required:
            assert said == "(required)", (page, flag, said)
        elif isinstance(action, argparse._StoreTrueAction):
            assert said == "off", (page, flag, said)
        elif action.default is None:
            assert said in ("-", ""), (page, flag, said)
        else:
            default = action.default
            shown = f"{default:g}" if isinstance(default, float) else str(default)
            assert shown in said, (page, flag, said, shown)
