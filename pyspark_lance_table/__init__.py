"""Lets Spark find the ``lance_table`` data source by itself: at the first data-source lookup Spark
scans top-level ``pyspark_*`` modules for a ``DefaultSource`` subclass of ``DataSource``."""

from __future__ import annotations

from lance_table.spark.source import LanceTableDataSource


class DefaultSource(LanceTableDataSource):
    """The ``lance_table`` data source, found by Spark without registration."""


__all__ = ["DefaultSource"]
