"""The docs cannot go stale (issue 35): every ```python block of README.md and docs/*.md
runs, and every ``pyspark-ick`` command line of a ```bash block parses.

Each Python block runs in a fresh namespace against a throwaway Redis (flushed, then an
Ick ``dirty_docs`` of 8 shards with a few members, what the examples assume) and the
shared SparkSession, with the names the examples leave to the reader: ``spark``,
``changes`` (member, score), ``later`` (element), ``reindex`` (a foreachBatch function),
``ckpt`` and ``later_ckpt`` (checkpoint folders). The docs name Redis as the default
``redis://localhost:6379/0``: the test points that URL at the throwaway server
(``connect``, and the formats' ``redis.url`` unless a block gives one). Stream queries a
block starts are run until idle, their errors raised, then stopped. A block that cannot
run here starts with ``# docs-test: skip (the reason)``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pyspark_ick
from pyspark_ick import ShardedIck
from pyspark_ick.cli.parser import build_parser
from pyspark_ick.connection import DEFAULT_URL

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SKIP = re.compile(r"^# docs-test: skip(?: \((?P<reason>.+)\))?\s*$")
FORMATS = ("ick", "dehydrator")


def blocks(language: str) -> list[tuple[str, int, str]]:
    """(page, line, code) of every fenced block in ``language``."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match[1] == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((page.relative_to(ROOT).as_posix(), line, match[2]))
    return found


PYTHON = blocks("python")


def command_lines() -> list[tuple[str, int, str]]:
    """(page, line, command) of every line of a bash block that runs pyspark-ick."""
    return [
        (page, line + 1 + i, text.strip())
        for page, line, code in blocks("bash")
        for i, text in enumerate(code.splitlines())
        if text.strip().startswith("pyspark-ick ")
    ]


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


@pytest.mark.parametrize(
    ("page", "line", "code"), PYTHON, ids=[f"{page}:{line}" for page, line, _ in PYTHON]
)
def test_every_python_block_runs(page: str, line: int, code: str, request: Any) -> None:
    first = code.splitlines()[0] if code.strip() else ""
    skip = SKIP.match(first)
    if skip:
        assert skip["reason"], f"{page}:{line}: a skipped block must say why: {first!r}"
        pytest.skip(f"{page}:{line}: {skip['reason']}")
    names = request.getfixturevalue("names")
    exec(compile(code, f"{page}:{line}", "exec"), dict(names))
    for query in names["spark"].streams.active:
        query.processAllAvailable()  # raises the query's error, if any
        assert query.exception() is None
    if "foreachBatch(reindex)" in code:
        assert sum(names["delivered"]) > 0, "the example's indexer delivered nothing"


def test_the_docs_have_python_blocks_and_skips_say_why() -> None:
    assert len(PYTHON) >= 4
    for page, line, code in PYTHON:
        for text in code.splitlines():
            if "docs-test" in text:
                match = SKIP.match(text)
                assert match and match["reason"], f"{page}:{line}: {text!r}"


@pytest.mark.parametrize(
    ("page", "line", "command"),
    command_lines(),
    ids=[f"{page}:{line}" for page, line, _ in command_lines()],
)
def test_every_cli_command_line_parses(page: str, line: int, command: str) -> None:
    args = shlex.split(command, comments=True)[1:]
    try:
        build_parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{page}:{line}: {command!r} does not parse (exit {exc.code})")


def test_the_checks_catch_a_stale_line_and_a_silent_skip() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(shlex.split("dehydrator look|ttn|pull parked ...")[0:])
    assert SKIP.match("# docs-test: skip")["reason"] is None  # type: ignore[index]
    assert SKIP.match("# docs-test: skip (needs Redis Sentinel)")["reason"]  # type: ignore[index]
