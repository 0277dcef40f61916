#!/usr/bin/env bash
# The test command of README.md: installs what the tests need, lints, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi

python3 -m pip install -q --disable-pip-version-check -e ".[dev]"
python3 -m ruff check .
python3 -m mypy
exec python3 -m pytest "$@"
