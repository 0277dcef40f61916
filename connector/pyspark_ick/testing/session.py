"""A local SparkSession for tests and demos."""

from __future__ import annotations

import os
import sys
from typing import Any

from .servers import HOST


def spark_session(app: str = "pyspark-ick-tests", **conf: str) -> Any:
    """A local[2] SparkSession whose Python workers run this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", HOST)  # only loopback, and no warning about it
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.bindAddress", HOST)
        .config("spark.driver.host", HOST)
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
