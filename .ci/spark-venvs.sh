#!/usr/bin/env bash
# The older pyspark releases of the Spark matrix (tests/test_spark_versions.py): one venv
# per release under $PYSPARK_ICK_VENVS (default ~/.cache/pyspark-ick/venvs), built once and
# kept between runs like the Redis server wheels (a venv is complete once it holds
# .complete: venvs name their own path, so one is built where it stays). This checkout is
# installed into each, editable, with its own dependencies, on every run. A release that
# cannot be installed is reported and left out: its matrix row then fails under CI.
set -uo pipefail
cd "$(dirname "$0")/.."

venvs=${PYSPARK_ICK_VENVS:-$HOME/.cache/pyspark-ick/venvs}
python=${PYTHON:-python3}
deps=(pyarrow numpy "pandas<3" redis hiredis pytest pytest-timeout hypothesis hatchling)
pip=(-m pip install -q --disable-pip-version-check)
for pyspark in ${PYSPARK_ICK_SPARKS:-4.0.5 4.1.4}; do
  dir="$venvs/pyspark-$pyspark"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    if "$python" -m venv "$dir" && "$dir/bin/python" "${pip[@]}" "pyspark==$pyspark" "${deps[@]}"
    then
      touch "$dir/.complete"
    else
      rm -rf "$dir"
      echo "could not install pyspark $pyspark: its matrix row fails"
      continue
    fi
  fi
  # with the checkout's own dependencies (redis, msgpack): a new one reaches a cached venv
  "$dir/bin/python" "${pip[@]}" --no-build-isolation -e . \
    || echo "pyspark $pyspark: could not install this checkout: its matrix row fails"
done
