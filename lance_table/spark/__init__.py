"""Spark integration: the ``lance_table`` Python data source (needs ``pip install 'lance_table[spark]'``).

``spark.read.format("lance_table").load(uri)`` and ``df.write.format("lance_table").save(uri)`` work
without registration (Spark finds :mod:`pyspark_lance_table`); :func:`register` does it explicitly
(and hands the session's ``spark.lance_table.*`` storage options to the driver's side of every read
and write; tasks find them in the conf by themselves). :func:`create_table`, :func:`attach` and
:func:`table_source` make Spark SQL tables that read and write a dataset.
"""

from __future__ import annotations

import warnings
from typing import Any

from lance_table.spark.catalog import attach, create_table, table_source

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, *, pushdown: bool = False) -> None:
    """Register the data source with a SparkSession.

    The session's ``spark.lance_table.<option>`` settings become storage options of every read and
    write (options given to a read or write win). Spark gives a Python data source's planning on
    the driver no access to the session's conf, so without this call only the tasks see them.

    With ``pushdown=True`` the source also accepts Spark's filters (comparisons, IN, IS [NOT] NULL,
    string prefix/suffix/contains, NOT) and applies them while reading, and Spark's Python filter
    pushdown setting is turned on.

    Warning:
        Spark 4.3 keeps the planned read of a DataFrame after a query that pushed filters and reuses
        it for a later query on the same DataFrame that pushes none, with the old filters still in
        place: ``df.filter("id < 10").count()`` followed by ``df.count()`` returns 10. Use pushdown
        only with DataFrames that are not reused across queries, or rely on the ``filter`` read
        option, which is always exact.

    Example:
        ```python
        import lance_table.spark

        lance_table.spark.register(spark)  # the session's spark.lance_table.* options reach every read
        df = spark.read.format("lance_table").load(uri)
        ```
    """
    from lance_table.spark.catalog import session_storage_options
    from lance_table.spark.source import LanceTableDataSource, PushdownDataSource

    if pushdown:
        warnings.warn(
            "lance_table filter pushdown: Spark reuses a DataFrame's pushed filters in later queries "
            "that push none; do not reuse DataFrames across queries (see lance_table.spark.register)",
            stacklevel=2,
        )
        spark.conf.set(PUSHDOWN_CONF, "true")
    base: type = PushdownDataSource if pushdown else LanceTableDataSource
    storage = session_storage_options(spark)
    if storage:
        attrs = {"session_storage": storage, "__module__": "lance_table.spark.catalog"}
        base = type(f"Session{base.__name__}", (base,), attrs)
    spark.dataSource.register(base)


__all__ = ["PUSHDOWN_CONF", "attach", "create_table", "register", "table_source"]
