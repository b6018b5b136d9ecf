"""Spark integration: the ``lance_table`` Python data source (needs ``pip install 'lance_table[spark]'``).

``spark.read.format("lance_table").load(uri)`` and ``df.write.format("lance_table").save(uri)`` work
without registration (Spark finds :mod:`pyspark_lance_table`); :func:`register` does it explicitly
(and hands the session's ``spark.lance_table.*`` storage options to the driver's side of every read
and write; tasks find them in the conf by themselves). :func:`create_table`, :func:`attach` and
:func:`table_source` make Spark SQL tables that read and write a dataset. :func:`merge_insert`,
:func:`update`, :func:`delete`, :func:`compact` and :func:`add_columns` run those operations as
Spark jobs (per-fragment work in the tasks, one commit on the driver).
"""

from __future__ import annotations

import warnings
from typing import Any

from lance_table.spark.catalog import attach, create_table, table_source
from lance_table.spark.jobs_merge import merge_insert
from lance_table.spark.jobs_ops import add_columns, compact, delete, update

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, *, pushdown: bool = False) -> None:
    """Register the data source with a SparkSession.

    The session's ``spark.lance_table.<option>`` settings become storage options of every read and
    write (options given to a read or write win). Spark gives a Python data source's planning on
    the driver no access to the session's conf, so without this call only the tasks see them.

    With ``pushdown=True`` the source also takes Spark's filters (comparisons, IN, IS [NOT] NULL,
    string prefix/suffix/contains, NOT) and applies them while reading, so fewer rows leave the
    scan, and Spark's Python filter pushdown setting is turned on. Spark still applies every filter
    after the scan, and a query that reuses a DataFrame's planned read (Spark 4.3 keeps the last
    one, pushed filters included) reads without filters pushed by another query:
    ``df.filter("id < 10").count()`` followed by ``df.count()`` counts every row.

    Warning:
        Spark 4.3 gives every scan of one DataFrame in a single query the read planned last: in
        ``df.filter("id < 10").union(df)`` the unfiltered side also reads only the rows below
        10, and no task can tell the two sides apart. Pushdown therefore stays off unless asked
        for: use it when a query does not read one DataFrame twice (a self-join or union of a
        DataFrame with a filtered copy of itself), or rely on the ``filter`` read option, which
        is always exact.

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
            "lance_table filter pushdown: Spark 4.3 reads every scan of one DataFrame in a query with "
            "the filters one of them pushed; do not union or join a DataFrame with a filtered copy "
            "of itself (see lance_table.spark.register)",
            stacklevel=2,
        )
        spark.conf.set(PUSHDOWN_CONF, "true")
    base: type = PushdownDataSource if pushdown else LanceTableDataSource
    storage = session_storage_options(spark)
    if storage:
        attrs = {"session_storage": storage, "__module__": "lance_table.spark.catalog"}
        base = type(f"Session{base.__name__}", (base,), attrs)
    spark.dataSource.register(base)


__all__ = [
    "PUSHDOWN_CONF",
    "add_columns",
    "attach",
    "compact",
    "create_table",
    "delete",
    "merge_insert",
    "register",
    "table_source",
    "update",
]
