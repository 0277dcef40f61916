"""What every task does first in its Python worker (spark/task.py)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc
from pyspark_ick.spark.task import start_task
start_task()
first = gc.get_freeze_count()
later = [[i] for i in range(1000)]
start_task()
print(first, gc.get_freeze_count())
"""


def test_a_workers_heap_is_frozen_once_so_the_daemons_collect_after_each_task_skips_it() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    first, second = map(int, out.stdout.split())
    assert first > 10_000  # pyspark, pyarrow and redis, imported by the package
    assert second == first  # what later tasks make is collected as ever
