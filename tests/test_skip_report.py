"""Rows dropped by ``onInvalid=skip`` are reported where operators look (issue 35): a
WARNING naming the Ick and the count at the writer's commit (batch and stream), not only
an INFO line."""

from __future__ import annotations

import logging

from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from pyspark_ick.spark.ick_writer import IckCommitMessage, batch_writer, stream_writer

MS = StructType([StructField("member", StringType()), StructField("score", DoubleType())])


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_the_commit_warns_with_the_ick_and_the_count(redis_url, caplog):
    options = {"redis.url": redis_url, "ick": "skips", "shards": "2", "onInvalid": "skip"}
    batch, stream = batch_writer(options, MS, False), stream_writer(options, MS, False)
    with caplog.at_level(logging.INFO, logger="pyspark_ick"):
        batch.commit([IckCommitMessage(5, 3, 0, 2), IckCommitMessage(4, 3, 0, 1), None])
        stream.commit([IckCommitMessage(4, 4, 0, 0)], 7)  # nothing skipped: no warning
        stream.commit([IckCommitMessage(6, 2, 0, 4)], 8)
    assert warnings(caplog) == [
        "write to Ick 'skips' (2 shards): 3 of 9 rows skipped (onInvalid=skip: a null "
        "member, or a null or NaN score); they were not added",
        "batch 8 to Ick 'skips' (2 shards): 4 of 6 rows skipped (onInvalid=skip: a null "
        "member, or a null or NaN score); they were not added",
    ]
    assert any(
        "batch 8 wrote to" in r.getMessage() and "4 skipped" in r.getMessage()
        for r in caplog.records
    )
