"""pylance's ``lance.optimize``: compaction options, metrics, and ``Compaction.execute``.

Distributed compaction (``Compaction.plan`` / ``commit``, ``CompactionTask``) is not implemented;
those raise :class:`~lance_table.errors.UnsupportedOperationError`.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from lance_table.errors import UnsupportedOperationError
from lance_table.table.dataset import LanceDataset
from lance_table.table.operations.compaction import CompactionMetrics
from lance_table.table.optimize import DatasetOptimizer, compact


class CompactionOptions(TypedDict, total=False):
    """pylance's compaction options (see :meth:`DatasetOptimizer.compact_files` for which apply).

    Example:
        ```python
        metrics = ds.optimize.compact_files(target_rows_per_fragment=1_000_000, materialize_deletions=True)
        ```
    """

    target_rows_per_fragment: int | None
    max_rows_per_group: int | None
    max_bytes_per_file: int | None
    materialize_deletions: bool | None
    materialize_deletions_threshold: float | None
    num_threads: int | None
    batch_size: int | None
    io_buffer_size: int | None
    compaction_mode: Literal["reencode", "try_binary_copy", "force_binary_copy"] | None
    binary_copy_read_batch_bytes: int | None
    defer_index_remap: bool | None
    max_source_fragments: int | None
    max_source_rows: int | None
    max_source_bytes: int | None
    excluded_fragment_ids: list[int] | None
    data_storage_version: str | None


class Compaction:
    """pylance's ``Compaction``: ``execute`` compacts a dataset in one call (its handle moves).

    Example:
        ```python
        from lance_table.optimize import Compaction

        metrics = Compaction.execute(ds, {"target_rows_per_fragment": 1_000_000})
        ```
    """

    @staticmethod
    def execute(dataset: LanceDataset, options: CompactionOptions) -> CompactionMetrics:
        """Compact ``dataset`` with ``options`` (as ``dataset.optimize.compact_files(**options)``).

        Raises:
            TypeError: an option pylance does not have.
            UnsupportedOperationError: see :meth:`DatasetOptimizer.compact_files`.
        """
        unknown = set(options) - set(CompactionOptions.__annotations__)
        if unknown:
            raise TypeError(f"unknown compaction options: {sorted(unknown)}")
        return compact(dataset, **options)

    @staticmethod
    def plan(dataset: LanceDataset, options: CompactionOptions) -> Any:
        """Not supported: distributed compaction.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError("Compaction.plan (distributed compaction) is not supported")

    @staticmethod
    def commit(dataset: LanceDataset, rewrites: list[Any], options: CompactionOptions | None = None) -> Any:
        """Not supported: distributed compaction.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError("Compaction.commit (distributed compaction) is not supported")


__all__ = ["Compaction", "CompactionMetrics", "CompactionOptions", "DatasetOptimizer"]
