"""Spark integration: the ``lance_table`` Python data source (needs ``pip install 'lance_table[spark]'``).

``spark.read.format("lance_table").load(uri)`` and ``df.write.format("lance_table").save(uri)`` work
without registration (Spark finds :mod:`pyspark_lance_table`); :func:`register` does it explicitly.
"""

from __future__ import annotations

import warnings
from typing import Any

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, *, pushdown: bool = False) -> None:
    """Register the data source with a SparkSession.

    With ``pushdown=True`` the source also accepts Spark's filters (comparisons, IN, IS [NOT] NULL,
    string prefix/suffix/contains, NOT) and applies them while reading, and Spark's Python filter
    pushdown setting is turned on.

    Warning:
        Spark 4.3 keeps the planned read of a DataFrame after a query that pushed filters and reuses
        it for a later query on the same DataFrame that pushes none, with the old filters still in
        place: ``df.filter("id < 10").count()`` followed by ``df.count()`` returns 10. Use pushdown
        only with DataFrames that are not reused across queries, or rely on the ``filter`` read
        option, which is always exact.
    """
    from lance_table.spark.source import LanceTableDataSource, PushdownDataSource

    if pushdown:
        warnings.warn(
            "lance_table filter pushdown: Spark reuses a DataFrame's pushed filters in later queries "
            "that push none; do not reuse DataFrames across queries (see lance_table.spark.register)",
            stacklevel=2,
        )
        spark.conf.set(PUSHDOWN_CONF, "true")
        spark.dataSource.register(PushdownDataSource)
    else:
        spark.dataSource.register(LanceTableDataSource)


__all__ = ["PUSHDOWN_CONF", "register"]
