"""Spark SQL tables ``USING ick`` / ``USING dehydrator``: the error when Spark passes no
options.

Spark (checked on 4.3.0) keeps a catalog table's ``OPTIONS (...)`` from a Python data
source: ``CREATE TABLE t ... USING ick OPTIONS (...)`` stores them, but
``PythonDataSourceV2.getTable`` (SPARK-45597, which made Python sources usable in SQL)
ignores the table properties it is given, so ``INSERT INTO t``, ``INSERT OVERWRITE t`` and
``SELECT ... FROM t`` reach the Python ``DataSource`` with only the statement's own options,
none at all unless the statement has a ``WITH (...)`` clause. The connector cannot see the
table from the Python worker, so it fails early, saying what works instead:

- options in the statement: ``INSERT INTO t WITH ('redis.url' = '...', 'ick' = 'q') ...``
  (SPARK-49098, Spark 4.0) and ``SELECT * FROM t WITH (...)``;
- a temporary view, which keeps its options for reads and writes:
  ``CREATE TEMPORARY VIEW v (member STRING, score DOUBLE) USING ick OPTIONS (...)``, then
  ``INSERT INTO v ...`` / ``INSERT OVERWRITE v ...`` / ``SELECT * FROM v``;
- from Python, ``df.write.format('ick').option(...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import IckConfigError

URL = "'redis.url' = 'redis://host:6379/0'"

# per format: the view's columns, example options, the statements a table of it takes
FORMATS = {
    "ick": (
        "member STRING, score DOUBLE",
        f"{URL}, 'ick' = 'q'",
        "INSERT INTO, INSERT OVERWRITE or SELECT",
    ),
    "dehydrator": (
        "id STRING, element STRING",
        f"{URL}, 'dehydrator' = 'd', 'delay' = '30s'",
        "INSERT INTO",
    ),
}


def require_options(options: Mapping[str, Any], fmt: str) -> None:
    """Raise IckConfigError when Spark passed no options at all (a SQL table's case).

    Options that are there but incomplete are left to the usual per-option errors."""
    if len(options) > 0:
        return
    columns, example, statements = FORMATS[fmt]
    raise IckConfigError(
        f"format({fmt!r}) needs option {fmt!r} and got no options at all. If this is "
        f"{statements} on a table created USING {fmt} OPTIONS (...): Spark does not pass "
        f"a catalog table's OPTIONS to a Python data source (PythonDataSourceV2.getTable "
        f"ignores the table properties; seen on Spark 4.3.0). Give the options in the "
        f"statement, e.g. INSERT INTO t WITH ({example}) VALUES ...; or use a temporary "
        f"view, which keeps them: CREATE TEMPORARY VIEW t ({columns}) USING {fmt} "
        f"OPTIONS ({example}); from Python: df.write.format({fmt!r}).option(...)."
    )
