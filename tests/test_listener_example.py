"""examples/listener.py, the StreamingQueryListener of docs/monitoring.md, prints its line:
the page shows the example's code, the drain returns only once the listener has printed
(Spark calls it on a thread of its own, after the batch), and the script run as a
newcomer runs it prints the line before it exits."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import load_module

from pyspark_ick import ShardedIck

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "listener.py"
LINE = re.compile(
    r"^query indexer: \d+ queued, oldest (-|\d+) ms, \d+ dead letters, "
    r"freshness p50 (-|\d+) ms, p99 (-|\d+) ms$",
    re.M,
)


def example() -> ModuleType:
    return load_module(EXAMPLE, "listener_example")


def test_the_pages_listener_is_the_examples() -> None:
    code = EXAMPLE.read_text()
    start, end = "# --8<-- [start:listener]\n", "# --8<-- [end:listener]"
    region = code[code.index(start) + len(start) : code.index(end)].strip()
    page = (ROOT / "docs" / "monitoring.md").read_text()
    assert f"```python\n{region}\n```" in page, "monitoring.md's listener is not the example's"


def test_the_drain_returns_once_the_listener_printed(
    spark: Any, client: Any, redis_url: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ShardedIck(client, "dirty_docs", 2).add({"doc:1": 1.0, "doc:2": 2.0})
    listener = example().drain(spark, redis_url, "dirty_docs", str(tmp_path / "ckpt"))
    out = capfd.readouterr().out  # at once: the line is there when drain() returns
    assert listener.reported.is_set()
    assert LINE.search(out), out
    assert "batch 0: 2 documents reindexed" in out


@pytest.mark.slow  # a Spark of its own, as a newcomer runs the script
def test_the_script_prints_its_line_before_it_exits(redis_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--url", redis_url, "--ick", "watched", "--shards", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert LINE.search(done.stdout), done.stdout + done.stderr[-3000:]
    assert "StreamingQueryListenerBus" not in done.stderr, done.stderr[-3000:]
