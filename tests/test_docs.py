"""The docs cannot go stale (issues 35, 41): every ```python block of README.md,
CHANGELOG.md and docs/ runs, every ``pyspark-ick`` line of a ```bash block exits as its
text says, and every link and anchor resolves.

Each Python block runs in a fresh namespace against a throwaway Redis (flushed, then an
Ick ``dirty_docs`` of 8 shards with a few members, what the examples assume) and the
shared SparkSession, with the names the examples leave to the reader: ``spark``,
``changes`` (member, score), ``later`` (element), ``reindex`` (a foreachBatch function),
``ckpt`` and ``later_ckpt`` (checkpoint folders). A tutorial (``IN_ORDER``) runs its
blocks top to bottom in one namespace, as its reader does. The docs name Redis
``redis://localhost:6379/0``: the test puts the throwaway server's URL in its place, in
the block's text and as the formats' default ``redis.url``. A relative checkpoint path
(``"checkpoints/..."``) goes under a temporary folder: Spark resolves it against the JVM's
folder, which a test cannot change. Stream queries a block starts are run until
idle, their errors raised, then stopped. A block that cannot run here starts with
``# docs-test: skip (the reason)``.

A ``pyspark-ick`` line runs against a Redis seeded as above, plus dead letters ``doc:7``
and ``doc:8`` and a dehydrator ``parked``; the lines of one block run in order, with no
standard input (``pyspark_ick.cli.main``, in this process). It must exit 0, or the code
its comment names (``# exit 3: ...``).
"""

from __future__ import annotations

import importlib
import io
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown.extensions.toc import slugify

import pyspark_ick
from pyspark_ick import Dehydrator, ShardedIck
from pyspark_ick.cli import main
from pyspark_ick.cli.parser import build_parser
from pyspark_ick.connection import DEFAULT_URL
from pyspark_ick.retries import RetryPolicy

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]
IN_ORDER = {"docs/getting-started.md"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SKIP = re.compile(r"^# docs-test: skip(?: \((?P<reason>.+)\))?\s*$")
EXIT = re.compile(r"#\s*exit (\d+)\b")
FORMATS = ("ick", "dehydrator")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.M)
GENERATED = {DOCS / "changelog.md": ROOT / "CHANGELOG.md"}  # docs/hooks.py adds it


def rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name


def blocks(language: str, pages: list[Path] = PAGES) -> list[tuple[str, int, str]]:
    """(page, line, code) of every fenced block in ``language``."""
    found = []
    for page in pages:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match[1] == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((rel(page), line, match[2]))
    return found


PYTHON = blocks("python")
RUNS = [[block] for block in PYTHON if block[0] not in IN_ORDER] + [
    [block for block in PYTHON if block[0] == page] for page in sorted(IN_ORDER)
]


def command_lines(code: str) -> list[str]:
    """The lines of a bash block that run pyspark-ick."""
    return [t.strip() for t in code.splitlines() if t.strip().startswith("pyspark-ick ")]


def runs_until_stopped(args: list[str]) -> bool:
    """Whether a CLI command serves or loops until Ctrl-C (the exporter, the console, a
    command told to repeat)."""
    return args[0] in ("metrics", "web") or any(a in ("--watch", "--every") for a in args)


CLI_BLOCKS = [(page, line, code) for page, line, code in blocks("bash") if command_lines(code)]


@pytest.fixture
def pointed_at(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The docs' default URL, and the formats' default redis.url, point at the test
    server (in this process: the options travel to Spark's workers with the query)."""
    from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
    from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

    real_connect = pyspark_ick.connect
    monkeypatch.setattr(
        pyspark_ick,
        "connect",
        lambda url=DEFAULT_URL, **kw: real_connect(redis_url if url == DEFAULT_URL else url, **kw),
    )
    for cls in (DataFrameReader, DataFrameWriter, DataStreamReader, DataStreamWriter):
        real = cls.format

        def format(self: Any, source: str, real: Any = real) -> Any:
            chosen = real(self, source)
            return chosen.option("redis.url", redis_url) if source in FORMATS else chosen

        monkeypatch.setattr(cls, "format", format)
    return redis_url


@pytest.fixture
def names(spark: Any, client: Any, pointed_at: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The names the examples use, on a freshly seeded Redis; stream queries stopped after."""
    ShardedIck(client, "dirty_docs", 8).add({f"doc:{i}": float(i) for i in range(20)})
    delivered: list[int] = []
    yield {
        "spark": spark,
        "changes": spark.createDataFrame(
            [(f"doc:{i}", float(i)) for i in range(10)], "member string, score double"
        ),
        "later": spark.createDataFrame([("doc:3",), ("doc:4",)], "element string"),
        "reindex": lambda df, batch_id: delivered.append(df.count()),
        "ckpt": str(tmp_path / "ckpt"),
        "later_ckpt": str(tmp_path / "later_ckpt"),
        "delivered": delivered,
    }
    for query in spark.streams.active:
        query.stop()


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS, ids=[f"{run[0][0]}:{run[0][1]}" for run in RUNS])
def test_every_python_block_runs(run: list[tuple[str, int, str]], request: Any) -> None:
    names: dict[str, Any] | None = None
    ours = None
    for page, line, code in run:
        first = code.splitlines()[0] if code.strip() else ""
        skip = SKIP.match(first)
        if skip:
            assert skip["reason"], f"{page}:{line}: a skipped block must say why: {first!r}"
            pytest.skip(f"{page}:{line}: {skip['reason']}")
        if names is None:
            names = dict(request.getfixturevalue("names"))
            ours = names["reindex"]
        code = code.replace(DEFAULT_URL, request.getfixturevalue("pointed_at"))
        code = code.replace('"checkpoints/', f'"{request.getfixturevalue("tmp_path")}/checkpoints/')
        exec(compile(code, f"{page}:{line}", "exec"), names)
        for query in names["spark"].streams.active:
            query.processAllAvailable()  # raises the query's error, if any
            assert query.exception() is None, f"{page}:{line}"
        if "foreachBatch(reindex)" in code and names["reindex"] is ours:
            assert sum(names["delivered"]) > 0, "the example's indexer delivered nothing"


def test_the_docs_have_python_blocks_and_skips_say_why() -> None:
    assert len(PYTHON) >= 4
    for page, line, code in PYTHON:
        for text in code.splitlines():
            if "docs-test" in text:
                match = SKIP.match(text)
                assert match and match["reason"], f"{page}:{line}: {text!r}"


@pytest.fixture
def seeded(client: Any, redis_url: str) -> str:
    """What the CLI examples act on: dirty_docs (8 shards) with dead letters doc:7 and
    doc:8, and a dehydrator parked with an element."""
    sharded = ShardedIck(client, "dirty_docs", 8)
    sharded.add({f"doc:{i}": float(i) for i in range(20)})
    for i in range(8):
        sharded.shard(i).reserve(1000)
    failed = {"doc:7": "the index refused it", "doc:8": "the index refused it"}
    assert sharded.fail(failed, RetryPolicy(max_attempts=1)) == (0, 2)
    for i in range(8):  # the rest of each batch, processed; then some queued again
        sharded.shard(i).commit(*(m for m, _ in sharded.shard(i).reserve(1000)))
    sharded.add({f"doc:{i}": float(i) for i in range(20) if i not in (7, 8)})
    Dehydrator(client, "parked", 1).push("doc:10", "payload", 60_000)
    return redis_url


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "line", "code"), CLI_BLOCKS, ids=[f"{page}:{line}" for page, line, _ in CLI_BLOCKS]
)
def test_every_cli_example_exits_as_its_text_says(
    page: str,
    line: int,
    code: str,
    seeded: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("REDIS_URL", seeded)
    for command in command_lines(code):
        expected = int(m[1]) if (m := EXIT.search(command)) else 0
        args = shlex.split(command.replace(DEFAULT_URL, seeded), comments=True)[1:]
        if runs_until_stopped(args):  # a server or a loop: it parses, tests of its own run it
            build_parser().parse_args(args)
            assert expected == 0, f"{page}:{line}: {command!r} runs until Ctrl-C"
            continue
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # no answer to a question
        try:
            code_ = main(args)
        except SystemExit as exc:  # argparse: bad usage
            code_ = int(exc.code or 0)
        out = capsys.readouterr()
        assert code_ == expected, (
            f"{page}:{line}: {command!r} exited {code_}, the docs say {expected}:\n"
            f"{out.out}{out.err}"
        )


def test_every_cli_line_of_a_bash_block_parses() -> None:
    """Lines the exit test cannot run (a block of another tool's) still parse."""
    for page, line, code in blocks("bash"):
        for command in command_lines(code):
            try:
                build_parser().parse_args(shlex.split(command, comments=True)[1:])
            except SystemExit as exc:
                pytest.fail(f"{page}:{line}: {command!r} does not parse (exit {exc.code})")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page`` as MkDocs makes them: its headings' slugs."""
    text = FENCE.sub("", page.read_text())
    found = set()
    for heading in HEADING.findall(text):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        found.add(slugify(plain, "-"))
    return found


def resolves(page: Path, target: str) -> str | None:
    """Why the link ``target`` of ``page`` does not resolve (None: it does)."""
    if re.match(r"[a-z]+:", target):  # http:, https:, mailto: (no network here)
        return None
    path, _, anchor = target.partition("#")
    goal = (page.parent / path).resolve() if path else page
    goal = GENERATED.get(goal, goal)
    if not goal.exists():
        return f"no file {path}"
    if not anchor:
        return None
    if goal.name == "api.md" and anchor.startswith("pyspark_ick."):  # mkdocstrings' ids
        module, _, name = anchor.rpartition(".")
        while module:
            try:
                obj: Any = importlib.import_module(module)
                break
            except ImportError:
                module, _, outer = module.rpartition(".")
                name = f"{outer}.{name}"
        for part in name.split("."):
            if not hasattr(obj, part):
                return f"{anchor}: no such object"
            obj = getattr(obj, part)
        return None
    if goal.suffix == ".md" and anchor not in anchors(goal):
        return f"{rel(goal)} has no anchor #{anchor}"
    return None


def broken_links(pages: list[Path]) -> list[str]:
    broken = []
    for page in pages:
        text = FENCE.sub(lambda m: "\n" * m[0].count("\n"), page.read_text())
        for match in LINK.finditer(text):
            why = resolves(page, match[1])
            if why:
                line = text.count("\n", 0, match.start()) + 1
                broken.append(f"{rel(page)}:{line}: ({match[1]}) {why}")
    return broken


def test_every_link_and_anchor_resolves() -> None:
    assert broken_links(PAGES) == []


def test_the_checks_catch_a_broken_anchor_a_stale_line_and_a_silent_skip(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Runbook: dead letters\n\n[ok](#runbook-dead-letters) "
        "[stale](#dead-letters) [gone](nowhere.md)\n"
    )
    assert [b.split(": ", 1)[1] for b in broken_links([page])] == [
        "(#dead-letters) page.md has no anchor #dead-letters",
        "(nowhere.md) no file nowhere.md",
    ]
    with pytest.raises(SystemExit):
        build_parser().parse_args(shlex.split("dehydrator look|ttn|pull parked ...")[0:])
    assert SKIP.match("# docs-test: skip")["reason"] is None  # type: ignore[index]
    assert SKIP.match("# docs-test: skip (needs Redis Sentinel)")["reason"]  # type: ignore[index]
    assert EXIT.search("pyspark-ick stats nosuch   # exit 3: no such Ick")[1] == "3"  # type: ignore[index]


def test_the_pages_agree_on_what_wait_replicas_1_costs_a_writer() -> None:
    """README.md and deploying.md give sizing.md's measured ratio (issue 41 finding 9)."""
    sizing = (DOCS / "sizing.md").read_text()
    rows = re.findall(
        r"\| writer \(writes of 10,000\), waitReplicas=\d \| .*? \| ([\d,]+) ", sizing
    )
    without, with_one = (int(r.replace(",", "")) for r in rows)
    said = f"about {with_one / without:.1f}x"
    for page in (ROOT / "README.md", DOCS / "deploying.md"):
        assert said in " ".join(page.read_text().split()), f"{page.name} lacks {said!r}"


def test_the_extras_table_lists_every_extra_with_its_pyspark() -> None:
    """deploying.md's extras are pyproject.toml's, and say the pyspark each asks for
    (issue 41 finding 10: `pipelines` was missing, `connect` said 4.0+)."""
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads TOML")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    table = dict(re.findall(r"^\| `(\w+)` \| (.*)$", (DOCS / "deploying.md").read_text(), re.M))
    assert set(table) == set(extras["optional-dependencies"])
    for name, requires in extras["optional-dependencies"].items():
        for spec in requires:
            found = re.match(r"pyspark(?:\[\w+\])?>=([\d.]+)", spec)
            if found and name != "dev":
                assert f"pyspark {found[1]}+" in table[name], (name, table[name])


NEWCOMERS_COPY = [
    ROOT / "README.md",
    *(p for p in sorted(DOCS.rglob("*.md")) if not p.is_relative_to(DOCS / "records")),
    *(p for p in sorted((ROOT / "examples").rglob("*")) if p.suffix in (".py", ".sh", ".yml")),
    *sorted((ROOT / "connector").rglob("*.py")),
]
EPOCH = re.compile(r"(?<![\w.,])(\d(?:_?\d){9}(?:\.\d+)?)(?![\w,])")  # 1_700_000_000 too


def fixed_epochs(paths: list[Path]) -> list[str]:
    """Every number in ``paths`` that reads as a Unix time in seconds (lanes.is_time)."""
    from pyspark_ick.lanes import TIME_MAX, TIME_MIN

    found = []
    for path in paths:
        for n, text in enumerate(path.read_text().splitlines(), 1):
            for number in EPOCH.findall(text):
                # past TIME_MIN itself: 1_000_000_000 is a billion (ns per second)
                if TIME_MIN < float(number.replace("_", "")) < TIME_MAX:
                    found.append(f"{rel(path)}:{n}: {number}")
    return found


def test_no_page_or_example_scores_with_a_fixed_old_time(tmp_path: Path) -> None:
    """A fixed epoch score (1700000000) makes every age in the console, stats and the
    exporter read as years, and fires the backlog-age alert at once: what a newcomer
    copies scores with now-ish times (time.time(), as the writer's default does)."""
    assert fixed_epochs(NEWCOMERS_COPY) == []
    page = tmp_path / "page.md"
    page.write_text(
        '[("doc:1", 1700000000.0)] at_ms 1795747903848, 1,700,000,000 members, 1_700_000_001\n'
    )
    assert fixed_epochs([page]) == ["page.md:1: 1700000000.0", "page.md:1: 1_700_000_001"]


USER_PAGES = [
    ROOT / "README.md",
    *(p for p in sorted(DOCS.rglob("*.md")) if not p.is_relative_to(DOCS / "records")),
]
ISSUE = re.compile(r"(?i)\bissues? #?\d+|(?<![\w/.-])#\d+(?![\w-])")


def issue_numbers(pages: list[Path]) -> list[str]:
    """Every mention of an issue number in ``pages``."""
    return [
        f"{rel(page)}:{n}: {found}"
        for page in pages
        for n, text in enumerate(page.read_text().splitlines(), 1)
        for found in ISSUE.findall(text)
    ]


def test_no_guide_reference_or_explanation_names_an_issue(tmp_path: Path) -> None:
    """A user's page states what holds and how to reproduce it; how it was found (which
    issue, which session) belongs in docs/records/ and the CHANGELOG."""
    assert issue_numbers(USER_PAGES) == []
    page = tmp_path / "page.md"
    page.write_text("Issue 34's ideas; fixed in #12. See [x](design.md#45-trigger) (#7-x)\n")
    assert issue_numbers([page]) == ["page.md:1: Issue 34", "page.md:1: #12"]
