"""The wheel: built from this checkout, installed into a clean venv (no system
site-packages: only what the wheel asks for, redis-py), used from there. And README's
install line and example, as a newcomer runs them (issue 41).

A missing package-data entry (the Lua scripts) or a module left out of the wheel makes the
installed copy fail here, although the editable install of the checkout would still work;
so does a client module that imports numpy or pyarrow (extras) at its top.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from pyspark_ick.connection import DEFAULT_URL

pytestmark = pytest.mark.slow  # wheels and fresh venvs

ROOT = Path(__file__).resolve().parents[1]
# what this test process has that a newcomer's shell does not: the test session's Python
# for Spark, its venv, and paths into this checkout
OUTSIDE = {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "PYTHONPATH", "VIRTUAL_ENV"}

# runs inside the venv, from a directory that is not the checkout
SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path

    import importlib.util
    import subprocess

    import pyspark_dehydrator
    import pyspark_ick
    from pyspark_ick import Dehydrator, Ick, ShardedIck, connect, lua, scripts

    for extra in ("numpy", "pyarrow", "pyspark"):  # a base install has none of them
        assert importlib.util.find_spec(extra) is None, f"{extra} is installed here"

    venv = Path(sys.prefix).resolve()
    package = Path(pyspark_ick.__file__).resolve().parent
    assert venv in package.parents, f"pyspark_ick imported from {package}, not {venv}"
    assert venv in Path(pyspark_dehydrator.__file__).resolve().parents
    folder = lua.lua_dir().resolve()
    assert folder == package / "lua", f"Lua scripts read from {folder}, not the installed package"

    client = connect(sys.argv[1])
    ick = Ick(client, "packaged")
    assert ick.add({"a": 2, "b": 1}) == (2, 0)
    assert ick.reserve(5) == [("b", 1.0), ("a", 2.0)]
    assert ick.commit("a", "b") == 2
    assert ick.stats()["total_size"] == 0
    assert ShardedIck(client, "packaged_sharded", 3).add({"x": 1.0, "y": 2.0}) == (2, 0)
    parked = Dehydrator(client, "packaged_parked", 2)
    parked.push("p1", "payload", 0)
    assert parked.poll() == ["payload"]
    assert (package / "py.typed").exists()
    cli = Path(sys.executable).parent / "pyspark-ick"
    for args in (["dehydrator", "push", "packaged_parked", "p2", "x", "--delay", "1h"],
                 ["dehydrator", "ttn", "packaged_parked"], ["stats", "packaged", "--json"]):
        done = subprocess.run([str(cli), "--url", sys.argv[1], *args], capture_output=True,
                              text=True)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    print("round trip ok from", package)
""")


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def readme_section(title: str) -> str:
    """The text of README.md's ``## title`` section."""
    return (ROOT / "README.md").read_text().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def fenced(section: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", section, re.M | re.S)


def test_the_readme_install_line_and_example_run_in_a_fresh_venv(
    tmp_path: Path, redis_url: str
) -> None:
    """README's install line, exactly as printed, in a fresh venv (activated, as README
    says), from this checkout; then README's example from that venv, on a throwaway Redis."""
    (install,) = [
        line
        for block in fenced(readme_section("Install"), "bash")
        for line in block.splitlines()
        if "pip install" in line
    ]
    (example,) = fenced(readme_section("The example"), "python")

    venv = tmp_path / "venv"  # clean: nothing of this interpreter's packages
    run(sys.executable, "-m", "venv", venv)
    env = {k: v for k, v in os.environ.items() if k not in OUTSIDE}
    env |= {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"}
    run("bash", "-c", install, cwd=ROOT, env=env)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "example.py").write_text(example.replace(DEFAULT_URL, redis_url))
    out = run("python3", "example.py", cwd=elsewhere, env=env)
    assert "reindex doc:1" in out and "reindex doc:2" in out, out
    where = run("python3", "-c", "import pyspark_ick; print(pyspark_ick.__file__)", env=env)
    assert Path(where.strip()).resolve().is_relative_to(venv.resolve()), where


def test_the_installed_wheel_runs_an_ick_round_trip(tmp_path: Path, redis_url: str) -> None:
    wheels = tmp_path / "wheels"
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        wheels,
        ROOT,
    )
    (wheel,) = wheels.glob("pyspark_ick-*.whl")

    names = set(zipfile.ZipFile(wheel).namelist())
    for script in sorted((ROOT / "lua").glob("*.lua")):
        assert f"pyspark_ick/lua/{script.name}" in names, f"{script.name} not in the wheel"
    assert "pyspark_dehydrator/__init__.py" in names

    venv = tmp_path / "venv"  # clean: nothing of this interpreter's packages
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "check.py").write_text(SCRIPT)
    out = run(python, "check.py", redis_url, cwd=elsewhere)
    assert "round trip ok" in out
