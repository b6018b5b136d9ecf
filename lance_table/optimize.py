"""pylance's ``lance.optimize``: compaction options and metrics, ``Compaction.execute``, and
distributed compaction (``Compaction.plan``, ``CompactionTask.execute`` on workers,
``Compaction.commit``)."""

from __future__ import annotations

from typing import Literal, TypedDict, cast

from lance_table.table import compaction_tasks
from lance_table.table.compaction_config import with_config
from lance_table.table.compaction_tasks import CompactionPlan, CompactionTask, RewriteResult
from lance_table.table.dataset import LanceDataset
from lance_table.table.operations.compaction import CompactionMetrics
from lance_table.table.optimize import DatasetOptimizer, check_compaction_options, compact
from lance_table.table.progress import Progress


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


def _known(options: CompactionOptions) -> None:
    unknown = set(options) - set(CompactionOptions.__annotations__)
    if unknown:
        raise TypeError(f"unknown compaction options: {sorted(unknown)}")


def _check(dataset: LanceDataset, options: CompactionOptions) -> None:
    _known(options)
    check_compaction_options(
        compaction_mode=options.get("compaction_mode"),
        binary_copy_read_batch_bytes=options.get("binary_copy_read_batch_bytes"),
        max_source_fragments=options.get("max_source_fragments"),
        max_source_rows=options.get("max_source_rows"),
        max_source_bytes=options.get("max_source_bytes"),
        excluded_fragment_ids=options.get("excluded_fragment_ids"),
        data_storage_version=options.get("data_storage_version"),
        current_format=dataset.data_storage_version,
    )


class Compaction:
    """pylance's ``Compaction``: ``execute`` compacts a dataset in one call (its handle moves);
    ``plan``, ``CompactionTask.execute`` and ``commit`` split it across processes.

    Example:
        ```python
        import pickle
        from lance_table.optimize import Compaction

        ds.delete("id % 2 = 0")
        plan = Compaction.plan(ds, {"target_rows_per_fragment": 1_000_000})
        tasks = [pickle.loads(pickle.dumps(task)) for task in plan.tasks]  # sent to workers
        rewrites = [task.execute(lt.dataset(uri)) for task in tasks]  # on each worker
        metrics = Compaction.commit(ds, rewrites)  # on the driver: one compaction
        ```
    """

    @staticmethod
    def execute(
        dataset: LanceDataset, options: CompactionOptions, *, progress: Progress = None
    ) -> CompactionMetrics:
        """Compact ``dataset`` with ``options`` (as ``dataset.optimize.compact_files(**options,
        progress=progress)``; ``progress`` is lance_table's).

        Raises:
            TypeError: an option pylance does not have.
            UnsupportedOperationError: see :meth:`DatasetOptimizer.compact_files`.
            InputTypeError: ``progress`` is of no kind taken.
        """
        _known(options)  # compact() checks the values
        return compact(dataset, **options, progress=progress)

    @staticmethod
    def plan(dataset: LanceDataset, options: CompactionOptions) -> CompactionPlan:
        """Plan a distributed compaction of ``dataset``'s version: one :class:`CompactionTask` per
        group of fragments, to run with ``task.execute(dataset)`` in any process (tasks pickle).

        Raises:
            TypeError: an option pylance does not have.
            UnsupportedOperationError: see :meth:`DatasetOptimizer.compact_files`.
        """
        _known(options)
        # the options left out take the dataset's lance.compaction.* config, as in pylance
        options = cast(CompactionOptions, with_config(options, dataset._snapshot.manifest.config))
        _check(dataset, options)
        return compaction_tasks.plan(dataset, options)

    @staticmethod
    def commit(
        dataset: LanceDataset, rewrites: list[RewriteResult], options: CompactionOptions | None = None
    ) -> CompactionMetrics:
        """Commit the tasks' results of one plan as one compaction; the handle moves to the
        version committed.

        Raises:
            ValueError: the results come from plans of different versions.
            CommitConflictError: a concurrent delete or compaction touched the same fragments.
        """
        done, metrics = compaction_tasks.commit(dataset, rewrites)
        return dataset._committed(done, metrics)


__all__ = [
    "Compaction",
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionTask",
    "DatasetOptimizer",
    "RewriteResult",
]
