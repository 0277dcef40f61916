"""The Spark matrix: the core of the suite on pyspark 4.0.x and 4.1.x (docs/sizing.md "Tested
versions"), each in a venv of its own, against a real redis-server.

The rest of the suite runs on the pyspark of this python (4.2+). .ci/spark-venvs.sh builds
one venv per older release under ``$PYSPARK_ICK_VENVS`` (default
``~/.cache/pyspark-ick/venvs``, kept between runs) and installs this checkout into each.
Each row runs tests/spark_versions_job.py (a batch write, a capped stream drain crashed
twice and replayed, Trigger.AvailableNow, the dehydrator's streaming sink and source) in a
subprocess with that venv's python, as Spark's driver and worker python. A venv missing
here is skipped, except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the older pyspark releases, each in a venv of its own

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "spark_versions_job.py"
VENVS = Path(
    os.environ.get("PYSPARK_ICK_VENVS") or Path.home() / ".cache" / "pyspark-ick" / "venvs"
)
RELEASES = ["4.0", "4.1"]


def venv_python(release: str) -> Path | None:
    """The python of the newest complete venv of ``release`` (``pyspark-4.1.4``), or None."""
    found = sorted(
        VENVS.glob(f"pyspark-{release}.*/.complete"),
        key=lambda p: [int(x) for x in p.parent.name.split("-")[1].split(".")],
    )
    return found[-1].parent / "bin" / "python" if found else None


@pytest.mark.parametrize("release", RELEASES)
def test_core_on_older_pyspark(release: str, redis_url: str, tmp_path: Path) -> None:
    python = venv_python(release)
    if python is None:
        message = f"no pyspark {release} venv under {VENVS} (run .ci/spark-venvs.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_", "PYTHON"))
    }
    env.update(
        PYSPARK_PYTHON=str(python),
        PYSPARK_DRIVER_PYTHON=str(python),
        PYTHONPATH=str(ROOT / "connector"),  # this checkout, whatever the venv holds
        SPARK_SUBMIT_OPTS=os.environ.get("SPARK_SUBMIT_OPTS", ""),  # conftest's JVM options
    )
    done = subprocess.run(
        [str(python), str(JOB), redis_url, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    seen = json.loads(lines[-1]) if lines else {}
    print(json.dumps(seen))  # what it saw (pytest -rP shows it)
    assert done.returncode == 0, f"pyspark {release}: {seen}\n{done.stderr[-4000:]}"
    assert seen["pyspark"].startswith(f"{release}.")
