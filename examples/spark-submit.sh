#!/usr/bin/env bash
# Running a pyspark-ick pipeline (examples/rehydrate.py) on a cluster with spark-submit.
#
#   SPARK_MASTER=spark://master.internal:7077 REDIS_URL=redis://redis.internal:6379/0 \
#     PYSPARK_PYTHON=/opt/ick-venv/bin/python examples/spark-submit.sh --shards 8
#
# 1. Install the connector into the Python that Spark runs, on EVERY node (driver and
#    workers), e.g. in a venv at the same path everywhere:
#        python3 -m pip wheel --no-deps -w dist .      # in a clone: the wheel, once
#        python3 -m venv /opt/ick-venv
#        /opt/ick-venv/bin/pip install "dist/pyspark_ick-0.2.0-py3-none-any.whl[spark,fast]"
#    Spark finds format("ick") and format("dehydrator") by itself once the package is
#    installed there (it imports installed top-level modules named pyspark_*).
# 2. PYSPARK_PYTHON must be in the ENVIRONMENT of spark-submit (or in spark-env.sh of its
#    conf dir): Spark looks the formats up, and picks the Python its executors run for them,
#    from the driver JVM's PYSPARK_DRIVER_PYTHON / PYSPARK_PYTHON (else `python3` on PATH).
#    --conf spark.pyspark.python alone is not enough for format("ick") (docs/deploying.md).
# 3. Deploy mode: `client` (the default here) runs the driver where this script runs; a
#    standalone master refuses `cluster` for Python applications. YARN and Kubernetes run
#    Python in cluster mode (DEPLOY_MODE=cluster): the driver then runs on a cluster node,
#    so the same PYSPARK_PYTHON path must exist there; it is handed to the driver's
#    environment below.
# Keep passwords out of the URL in scripts: use redis.password from a secret instead.
set -euo pipefail
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-/opt/ick-venv/bin/python}
export PYSPARK_DRIVER_PYTHON=${PYSPARK_DRIVER_PYTHON:-$PYSPARK_PYTHON}
: "${SPARK_MASTER:?set SPARK_MASTER, e.g. spark://master.internal:7077, yarn or k8s://https://...}"
: "${REDIS_URL:?set REDIS_URL to a Redis every node reaches, e.g. redis://redis.internal:6379/0}"
deploy_mode=${DEPLOY_MODE:-client}

# spark-submit: $SPARK_SUBMIT, else on PATH, else next to PYSPARK_PYTHON (a venv with
# pyspark installed has it in bin/), else in that pyspark's own bin/.
submit=${SPARK_SUBMIT:-}
if [ -z "$submit" ]; then
  if command -v spark-submit >/dev/null; then
    submit=spark-submit
  elif [ -x "$(dirname "$PYSPARK_PYTHON")/spark-submit" ]; then
    submit=$(dirname "$PYSPARK_PYTHON")/spark-submit
  else
    submit=$("$PYSPARK_PYTHON" -c \
      'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit"))') \
      || { echo "no spark-submit: install pyspark into $PYSPARK_PYTHON, or set SPARK_SUBMIT" >&2; exit 1; }
  fi
fi

cluster_env=()
if [ "$deploy_mode" = cluster ]; then
  if [[ "$SPARK_MASTER" == spark://* ]]; then
    echo "a standalone master runs Python applications in client mode only: DEPLOY_MODE=client" >&2
    exit 2
  fi
  # the driver runs on the cluster: its environment comes from these settings
  cluster_env=(--conf "spark.yarn.appMasterEnv.PYSPARK_PYTHON=$PYSPARK_PYTHON"
               --conf "spark.kubernetes.driverEnv.PYSPARK_PYTHON=$PYSPARK_PYTHON")
fi

exec "$submit" \
  --master "$SPARK_MASTER" \
  --deploy-mode "$deploy_mode" \
  --conf spark.pyspark.python="$PYSPARK_PYTHON" \
  --conf spark.pyspark.driver.python="$PYSPARK_DRIVER_PYTHON" \
  --conf spark.sql.execution.arrow.pyspark.enabled=true \
  --conf spark.executorEnv.REDIS_URL="$REDIS_URL" \
  "${cluster_env[@]}" \
  "$(dirname "$0")/rehydrate.py" --url "$REDIS_URL" "$@"
