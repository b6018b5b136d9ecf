"""Spark SQL tables over datasets: sources bound to one dataset, catalog tables, whole folders.

Spark 4.3 hands a Python data source nothing of a catalog table but its schema: neither its
``LOCATION`` nor its ``OPTIONS`` reach reads or writes of the table (Spark's table provider for
Python sources drops a table's properties). Two ways around it:

- A table created by ``CREATE TABLE t USING lance_table LOCATION '<uri>'`` (schema left to the
  source) carries its location and options in its first column's metadata, which Spark stores
  with the schema and passes back to every read. Writes never trust that metadata: a query's
  columns carry it from whatever table they were read from.
- :func:`table_source` registers a source bound to one dataset under its own name; a table made
  with it (:func:`create_table`, :func:`attach`, ``CREATE TABLE ... USING <name>``) reads and
  writes that dataset whatever Spark passes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from lance_table.errors import DatasetNotFoundError
from lance_table.spark.options import SourceOptions, conf_storage_options

#: the suffix of a table's directory in lance-namespace's directory layout (``<root>/<name>.lance``)
TABLE_SUFFIX = ".lance"


def session_storage_options(spark: Any) -> dict[str, str]:
    """The ``spark.lance_table.*`` storage options set in a session's conf."""
    conf = spark.conf.getAll
    return conf_storage_options(conf() if callable(conf) else conf)


def table_source(
    spark: Any, uri: str, *, storage_options: Mapping[str, Any] | None = None, **options: Any
) -> str:
    """Register a ``lance_table`` source bound to one dataset and return its name.

    ``spark.read.format(name).load()``, ``df.write.format(name).saveAsTable(t)``, ``CREATE TABLE t
    USING name [AS SELECT ...]`` and ``INSERT INTO`` / ``INSERT OVERWRITE`` such a table all read or
    write the dataset at ``uri``, with ``options`` (read options such as ``version``) and
    ``storage_options``. The session's ``spark.lance_table.*`` storage options are captured too
    (explicit ones win). The name depends on ``uri`` and ``options`` only, so registering again in a
    later session (with fresh credentials, say) restores tables a persistent catalog kept.

    Raises:
        ValueError: an unknown option or a malformed value (naming it).

    Example:
        ```python
        import lance_table.spark

        source = lance_table.spark.table_source(spark, f"{tmp}/ids.lance")
        spark.range(5).write.format(source).saveAsTable("ids")
        ```
    """
    from lance_table.spark.source import LanceTableDataSource

    bound = {k.lower(): str(v) for k, v in options.items()}
    bound["path"] = str(uri)
    SourceOptions.parse(bound)  # refuse bad options now, not at the first query
    digest = hashlib.sha256(json.dumps(bound, sort_keys=True).encode()).hexdigest()[:16]
    name = f"lance_table_{digest}"
    if storage_options:
        bound["storage_options"] = json.dumps(dict(storage_options))
    cls = type(
        f"BoundLanceTable_{digest}",
        (LanceTableDataSource,),
        {
            "provider": name,
            "bound_options": bound,
            "session_storage": session_storage_options(spark),
            "__module__": __name__,
            "__doc__": f"The lance_table source bound to {uri}.",
        },
    )
    spark.dataSource.register(cls)
    return name


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_table(
    spark: Any, name: str, uri: str, *, storage_options: Mapping[str, Any] | None = None, **options: Any
) -> str:
    """Make the catalog table ``name`` over the existing dataset at ``uri`` (unless it exists).

    The table reads the dataset's latest version at each query (or the one ``options`` pin) and
    takes ``INSERT INTO`` / ``INSERT OVERWRITE`` and ``df.write.insertInto``. Returns the name of
    the bound source (:func:`table_source`).

    Raises:
        DatasetNotFoundError: there is no dataset at ``uri``.
        ValueError: an unknown option or a malformed value (naming it).

    Example:
        ```python
        import lance_table.spark

        lance_table.spark.create_table(spark, "events", uri)
        spark.sql("INSERT INTO events SELECT * FROM events WHERE id < 10")
        ```
    """
    provider = table_source(spark, uri, storage_options=storage_options, **options)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING {provider} LOCATION {_quote(str(uri))}")
    return provider


def dataset_names(root_uri: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The datasets directly under a folder in lance-namespace's directory layout: table name ->
    dataset URI, for each ``<name>.lance`` directory holding a dataset."""
    from lance_table.storage import open_storage
    from lance_table.table import versions

    root = str(root_uri).rstrip("/")
    storage = open_storage(root, storage_options)
    fs = getattr(storage, "fs", None)
    if fs is None:
        names = storage.list_names("")
    else:
        try:
            infos = fs.ls(getattr(storage, "root", root), detail=True, refresh=True)
        except FileNotFoundError:
            infos = []
        names = [str(i["name"]).rstrip("/").rsplit("/", 1)[-1] for i in infos if i.get("type") == "directory"]
    found: dict[str, str] = {}
    for entry in sorted(names):
        if not entry.endswith(TABLE_SUFFIX) or len(entry) == len(TABLE_SUFFIX):
            continue
        uri = f"{root}/{entry}"
        try:
            versions.latest_entry(open_storage(uri, storage_options))
        except DatasetNotFoundError:
            continue  # a folder named like a table, without a dataset in it
        found[entry[: -len(TABLE_SUFFIX)]] = uri
    return found


def attach(
    spark: Any,
    root_uri: str,
    database: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> list[str]:
    """Register one catalog table for each dataset under ``root_uri`` (lance-namespace's directory
    layout: the dataset of table ``t`` is the folder ``<root_uri>/t.lance``).

    With ``database``, the tables go into that database (created if missing), else into the current
    one. Tables that already exist are left alone (their sources are registered again, so tables a
    persistent catalog kept work in a new session). Returns the qualified table names.

    Raises:
        ValueError: an option is malformed.

    Example:
        ```python
        import lance_table.spark

        lance_table.spark.attach(spark, tmp, database="lake")  # one table per <name>.lance under tmp
        spark.sql("SHOW TABLES IN lake").show()
        ```
    """
    if database:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    tables = []
    for table, uri in dataset_names(root_uri, storage_options).items():
        quoted = f"`{database}`.`{table}`" if database else f"`{table}`"
        create_table(spark, quoted, uri, storage_options=storage_options)
        tables.append(f"{database}.{table}" if database else table)
    return tables
