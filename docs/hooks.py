"""MkDocs hooks: the reference pages come from the code, not from hand copies.

- ``<!-- options: USE -->`` in a page becomes the table of the options that USE takes
  (``option_table.OPTIONS``; USE is ``connection`` or one of ``option_table.USES``).
- ``<!-- cli -->`` becomes every command of ``pyspark-ick``, from its argparse parser.
- ``changelog.md`` is the repository's CHANGELOG.md (links into ``docs/`` made relative).
- The nav's ``Records`` section lists every page of ``docs/records/``, sorted by name
  (``index.md`` first): a new record needs no edit of mkdocs.yml.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from pyspark_ick.cli.parser import build_parser
from pyspark_ick.option_table import CONNECTION_OPTIONS, OPTIONS, USES, Option

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- (options: (?P<use>.+?)|(?P<cli>cli)) -->$", re.M)


def on_config(config: Any) -> Any:
    records = sorted(
        (p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs/records").glob("*.md")),
        key=lambda page: (not page.endswith("/index.md"), page),
    )
    for item in config.nav or []:
        if isinstance(item, dict) and "Records" in item:
            item["Records"] = records
    return config


def on_files(files: Files, config: Any) -> Files:
    text = (ROOT / "CHANGELOG.md").read_text()
    files.append(File.generated(config, "changelog.md", content=text.replace("](docs/", "](")))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        return cli_reference() if match["cli"] else options_table(match["use"])

    return MARKER.sub(generated, markdown)


def cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def values(option: Option) -> str:
    """What an option takes, in words."""
    if option.choices:
        return " \\| ".join(f"`{c}`" for c in option.choices)
    low, high = option.minimum, option.maximum
    kinds = {
        "integer": "integer",
        "seconds": "seconds",
        "fraction": "number",
        "duration": "duration",
        "url": "URL",
        "name": "name",
        "cluster": "`auto` \\| `true` \\| `false`",
        "text": "text",
    }
    said = kinds.get(option.kind, option.kind)
    if option.kind in ("integer", "seconds", "fraction") and low is not None:
        said += f", {low:g} to {high:,g}" if high is not None else f", at least {low:g}"
    return said


def options_table(use: str) -> str:
    """The options ``use`` takes: required first, then the rest in the table's order."""
    if use == "connection":
        chosen = [o for o in OPTIONS if o.name in CONNECTION_OPTIONS]
    elif use in USES:
        chosen = [o for o in OPTIONS if use in o.uses and o.name not in CONNECTION_OPTIONS]
    else:
        raise ValueError(f"<!-- options: {use} -->: expected 'connection' or one of {USES}")
    chosen.sort(key=lambda o: not o.required)
    rows = ["| option | default | values | meaning |", "| --- | --- | --- | --- |"]
    for o in chosen:
        default = "(required)" if o.required else (f"`{o.shown}`" if o.shown else "")
        rows.append(f"| `{o.name}` | {default} | {values(o)} | {cell(o.meaning)} |")
    return "\n".join(rows)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``parser`` by name (none: {})."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


POSITIONALS = {  # the parser's positional arguments say no more than their metavar
    "NAME": "the Ick's name (the dehydrator's, for `dehydrator` commands)",
    "MEMBER": "a member",
    "ID": "an element's id",
    "ELEMENT": "the element",
}


def arguments_table(parser: argparse.ArgumentParser, shared: set[str]) -> str:
    """A command's own arguments (not the connection options every command takes)."""
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if set(action.option_strings) & shared:
            continue
        name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar}`"
        if action.nargs in ("+", "*"):
            name += " ..." if action.nargs == "+" else " ... (optional)"
        required = action.required or not action.option_strings
        meaning = action.help or POSITIONALS.get(str(action.metavar), "")
        rows.append(f"| {name} | {'yes' if required else ''} | {cell(meaning)} |")
    if not rows:
        return ""
    return "\n".join(["| argument | required | meaning |", "| --- | --- | --- |", *rows])


def cli_reference() -> str:
    """Every command: its usage, what it does and its arguments."""
    parser = build_parser()
    shared = {"--url", "--cluster", "--timeout", "-h", "--help"}
    out = ["## Connection options", "", "Every command takes them, before or after it.", ""]
    out += [arguments_table(parser, {"-h", "--help"}), ""]
    for name, sub in subcommands(parser).items():
        leaves = subcommands(sub)
        for leaf_name, leaf in (leaves or {name: sub}).items():
            title = f"pyspark-ick {name} {leaf_name}" if leaves else f"pyspark-ick {name}"
            usage = leaf.format_usage().removeprefix("usage: ").strip()
            usage = re.sub(r"\s+", " ", usage)
            about = leaf.description or ""
            out += [f"## `{title}`", "", f"{about[:1].upper()}{about[1:]}.", ""]
            out += ["```text", usage, "```", "", arguments_table(leaf, shared), ""]
    return "\n".join(out)
