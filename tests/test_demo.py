"""The README's demo runs to its self-check: the index equals the store, parked documents
came back through the dehydrator, and the figures are printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyspark_ick.freshness import bucket_of

pytestmark = pytest.mark.slow  # the demo, end to end

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.py"


def test_demo_runs_to_its_self_check(redis_url):
    env = {**os.environ, "REDIS_URL": redis_url}
    done = subprocess.run(
        [sys.executable, str(DEMO), "--seconds", "4", "--rate", "100", "--shards", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    out = done.stdout
    assert "self-check: the index equals the store" in out and "-> OK" in out
    parked = int(re.search(r"parked and rehydrated\s+(\d+)", out).group(1))
    assert parked > 0  # the dehydrator loop really ran
    own = re.search(r"add-to-index latency\s+p50\s+(\d+) ms\s+p99\s+(\d+) ms", out)
    product = re.search(r"the Ick's freshness\s+p50\s+(\d+) ms\s+p99\s+(\d+) ms", out)
    assert own and product, out
    for q in (1, 2):  # p50, p99: the product's figure and the demo's agree within one bucket
        buckets = [bucket_of(int(found.group(q)) / 1000) for found in (own, product)]
        assert abs(buckets[0] - buckets[1]) <= 1, (own.group(0), product.group(0))
