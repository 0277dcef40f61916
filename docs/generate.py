"""The reference tables, generated from the code into the committed pages.

``python docs/generate.py`` rewrites every generated region of docs/reference/; with
``--check`` it rewrites nothing and exits 1 naming the stale pages (tests/test_docs.py
runs the check). A region is the text between a begin marker and ``<!-- end generated
-->``:

- ``<!-- generated: options: USE -->``: the options USE takes (``option_table.OPTIONS``;
  USE is ``connection`` or one of ``option_table.USES``);
- ``<!-- generated: cli -->``: every command of ``pyspark-ick``, from its argparse parser.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from pyspark_ick.cli.parser import build_parser
from pyspark_ick.option_table import CONNECTION_OPTIONS, OPTIONS, USES, Option

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "docs/reference/options.md", ROOT / "docs/reference/cli.md"]
COMMAND = "python docs/generate.py"
REGION = re.compile(
    r"^(?P<begin><!-- generated: (?:options: (?P<use>.+?)|(?P<cli>cli)) -->)\n"
    r".*?^(?P<end><!-- end generated -->)$",
    re.M | re.S,
)


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
        raise ValueError(f"<!-- generated: options: {use} -->: expected 'connection' or {USES}")
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


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command of pyspark-ick by its words (``stats``, ``dead list``, ...)."""
    found = {}
    for name, sub in subcommands(build_parser()).items():
        leaves = subcommands(sub)
        for leaf_name, leaf in (leaves or {name: sub}).items():
            found[f"{name} {leaf_name}" if leaves else name] = leaf
    return found


POSITIONALS = {  # the parser's positional arguments say no more than their metavar
    "NAME": "the Ick's name (the dehydrator's, for `dehydrator` commands)",
    "MEMBER": "a member",
    "ID": "an element's id",
    "ELEMENT": "the element",
}


def shared() -> set[str]:
    """The flags every command takes (the connection options, help): one table for them."""
    return {flag for action in build_parser()._actions for flag in action.option_strings}


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
    out = ["## Connection options", "", "Every command takes them, before or after it.", ""]
    out += [arguments_table(build_parser(), {"-h", "--help"}), ""]
    for words, leaf in commands().items():
        usage = re.sub(r"\s+", " ", leaf.format_usage().removeprefix("usage: ").strip())
        about = leaf.description or ""
        out += [f"## `pyspark-ick {words}`", "", f"{about[:1].upper()}{about[1:]}.", ""]
        out += ["```text", usage, "```", ""]
        table = arguments_table(leaf, shared())
        out += [table, ""] if table else []
    return "\n".join(out).rstrip("\n")


def regenerated(text: str) -> str:
    """``text`` with every generated region made afresh from the code."""

    def region(match: re.Match[str]) -> str:
        body = cli_reference() if match["cli"] else options_table(match["use"])
        return f"{match['begin']}\n{body}\n{match['end']}"

    return REGION.sub(region, text)


def stale() -> list[Path]:
    """The pages whose generated regions differ from the code's."""
    return [page for page in PAGES if regenerated(page.read_text()) != page.read_text()]


def main(argv: list[str]) -> int:
    """Rewrite the stale pages (``--check``: only name them, exit 1)."""
    found = stale()
    for page in found:
        if "--check" in argv:
            print(f"{page.relative_to(ROOT)} is stale: run {COMMAND}", file=sys.stderr)
        else:
            page.write_text(regenerated(page.read_text()))
            print(f"rewrote {page.relative_to(ROOT)}")
    return 1 if found and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
