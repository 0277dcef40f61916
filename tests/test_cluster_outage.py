"""A Redis Cluster that does not answer at all (every node paused, as in a network
partition): a call fails at ``redis.retryTimeout`` with the error that says so, not one
topology refresh later (issue 33).

One attempt of redis-py's cluster client refreshes the slots from every node in turn, each
wait up to ``redis.timeout``; pyspark_ick.bounded caps those waits by the time left.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from cluster_faults import start_cluster_with_replicas, wait_healthy

from pyspark_ick import IckConnectionError, ShardedIck, connect

pytestmark = pytest.mark.slow  # a cluster that stops answering, calls waiting for their deadline

TIMEOUT, RETRY_TIMEOUT = 2.0, 3.0


def test_a_call_to_a_cluster_that_does_not_answer_fails_at_its_deadline():
    cluster = start_cluster_with_replicas(3, replicas=1)
    try:
        client = connect(cluster.url, timeout=TIMEOUT, retry_timeout=RETRY_TIMEOUT)
        queue = ShardedIck(client, "paused", 1)
        assert queue.add({"a": 1.0}) == (1, 0)
        pids = [node.process.pid for node in cluster.nodes if node.process is not None]
        assert len(pids) == 6
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        try:
            with pytest.raises(IckConnectionError, match=r"redis\.retryTimeout"):
                queue.add({"b": 2.0})
            took = time.monotonic() - started
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        # the first attempt (redis.timeout), then retries until the deadline; uncapped, the
        # refresh alone waits for each of the 6 nodes in turn: 2 + 6 x 2 s and more. The
        # bound lies halfway, not at the capped time, which a loaded machine passes
        uncapped = TIMEOUT + 6 * TIMEOUT
        assert took < (RETRY_TIMEOUT + TIMEOUT + uncapped) / 2, took
        wait_healthy(cluster)
        # the same client, once the cluster is back (b may be in: its call may have run)
        assert queue.add({"c": 3.0}) == (1, 0)
    finally:
        cluster.stop()
