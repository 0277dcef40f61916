#!/usr/bin/env bash
# Running a pyspark-ick pipeline on a cluster with spark-submit.
#
# 1. Install the connector into the Python that Spark's executors run, on EVERY node
#    (driver and workers), e.g. in a venv at the same path everywhere:
#        python3 -m venv /opt/ick-venv
#        /opt/ick-venv/bin/pip install "pyspark-ick[spark,fast]"
#    Spark finds format("ick") and format("dehydrator") by itself once the package is
#    installed there (it imports installed top-level modules named pyspark_*).
# 2. Point Spark's Python at that interpreter (PYSPARK_PYTHON for executors,
#    PYSPARK_DRIVER_PYTHON for the driver), and hand the Redis URL to the job.
#    Keep passwords out of the URL in scripts: use redis.password from a secret instead.
set -euo pipefail
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-/opt/ick-venv/bin/python}
export PYSPARK_DRIVER_PYTHON=${PYSPARK_DRIVER_PYTHON:-$PYSPARK_PYTHON}
: "${REDIS_URL:?set REDIS_URL, e.g. redis://redis.internal:6379/0}"

exec spark-submit \
  --master "${SPARK_MASTER:-yarn}" \
  --deploy-mode "${DEPLOY_MODE:-cluster}" \
  --conf spark.pyspark.python="$PYSPARK_PYTHON" \
  --conf spark.pyspark.driver.python="$PYSPARK_DRIVER_PYTHON" \
  --conf spark.sql.execution.arrow.pyspark.enabled=true \
  --conf spark.executorEnv.REDIS_URL="$REDIS_URL" \
  "$(dirname "$0")/rehydrate.py" --url "$REDIS_URL" "$@"
