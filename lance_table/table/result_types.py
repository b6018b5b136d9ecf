"""The typed dictionaries pylance's dataset methods return or take (``lance.dataset.UpdateResult``,
``DeleteResult``, ...): the same keys, for code that annotates with them. lance_table's methods
return plain dictionaries with these keys."""

from __future__ import annotations

import datetime as dt
from typing import Any, TypedDict

import pyarrow as pa


class UpdateResult(TypedDict):
    """What ``update`` returns.

    Example:
        ```python
        from lance_table.table.result_types import UpdateResult

        result: UpdateResult = ds.update({"score": "score + 1"}, where="id < 3")
        print(result["num_rows_updated"])
        ```
    """

    num_rows_updated: int


class DeleteResult(TypedDict):
    """What ``delete`` returns.

    Example:
        ```python
        from lance_table.table.result_types import DeleteResult

        result: DeleteResult = ds.delete("id < 3")
        print(result["num_deleted_rows"])
        ```
    """

    num_deleted_rows: int


class ExecuteResult(TypedDict):
    """What a merge insert's ``execute`` returns.

    Example:
        ```python
        from lance_table.table.result_types import ExecuteResult

        result: ExecuteResult = ds.merge_insert("id").when_matched_update_all().execute(table)
        print(result["num_updated_rows"])
        ```
    """

    num_inserted_rows: int
    num_updated_rows: int
    num_deleted_rows: int


class AlterColumn(TypedDict, total=False):
    """One change of ``alter_columns``: the column's ``path`` and what to change.

    Example:
        ```python
        from lance_table.table.result_types import AlterColumn

        change: AlterColumn = {"path": "kind", "name": "category"}
        ds.alter_columns(change)
        print(ds.schema.names)
        ```
    """

    path: str
    name: str | None
    nullable: bool | None
    data_type: pa.DataType | None


class BulkCommitResult(TypedDict):
    """What ``commit_batch`` returns: the new version's dataset and the merged transaction.

    Example:
        ```python
        from lance_table.fragment import write_fragments
        from lance_table.table.result_types import BulkCommitResult

        txns = [write_fragments(table, uri, return_transaction=True)]
        result: BulkCommitResult = lt.LanceDataset.commit_batch(uri, txns)
        print(result["dataset"].version)
        ```
    """

    dataset: Any
    merged: Any


class DatasetStats(TypedDict):
    """What ``ds.stats.dataset_stats()`` returns.

    Example:
        ```python
        from lance_table.table.result_types import DatasetStats

        stats: DatasetStats = ds.stats.dataset_stats()
        print(stats["num_fragments"])
        ```
    """

    num_deleted_rows: int
    num_fragments: int
    num_small_files: int


class Version(TypedDict):
    """One entry of ``versions()``.

    Example:
        ```python
        from lance_table.table.result_types import Version

        first: Version = ds.versions()[0]
        print(first["version"], first["timestamp"])
        ```
    """

    version: int
    timestamp: int | dt.datetime
    metadata: dict[str, str]
