"""The ``ds.optimize`` namespace (pylance's ``DatasetOptimizer``): compaction through the handle.

Compaction itself lives in :mod:`lance_table.table.operations.compaction`; this module checks
pylance's options, runs it, and moves the handle to the version it committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from lance_table.errors import UnsupportedOperationError
from lance_table.table.commit.retry import retry_on_conflict
from lance_table.table.compaction_config import with_config
from lance_table.table.operations import auto_cleanup
from lance_table.table.operations import config as config_ops
from lance_table.table.operations.auto_cleanup import AutoCleanupConfig
from lance_table.table.operations.compaction import CompactionMetrics, compact_files
from lance_table.table.operations.compaction_copy import COMPACTION_MODES
from lance_table.table.operations.config import CONFLICT_RETRIES, RETRY_TIMEOUT
from lance_table.table.progress import Progress
from lance_table.table.snapshot import Snapshot

_Result = TypeVar("_Result")


class Handle(Protocol):
    """What a write needs of a dataset handle (``LanceDataset``): its snapshot, and the one place
    that moves it to the version a write committed."""

    _snapshot: Snapshot

    def _committed(self, snapshot: Snapshot, result: _Result = ...) -> _Result: ...


def _refuse(option: str, why: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(f"compact_files({option}=...) is not supported: {why}")


def check_compaction_options(
    *,
    compaction_mode: str | None = None,
    binary_copy_read_batch_bytes: int | None = None,
    max_source_fragments: int | None = None,
    max_source_rows: int | None = None,
    max_source_bytes: int | None = None,
    excluded_fragment_ids: Sequence[int] | None = None,
    data_storage_version: str | None = None,
    current_format: str | None = None,
) -> None:
    """Refuse the pylance compaction options that would change the result and that lance_table does
    not implement (naming the option).

    Raises:
        ValueError: ``compaction_mode`` is not one of pylance's modes, or
            ``binary_copy_read_batch_bytes`` is below 1.
        UnsupportedOperationError: a limit on the sources, excluded fragments, or another data
            storage version than the dataset's.
    """
    if compaction_mode is not None and compaction_mode not in COMPACTION_MODES:
        raise ValueError(f"compaction_mode must be one of {COMPACTION_MODES}, not {compaction_mode!r}")
    if binary_copy_read_batch_bytes is not None and binary_copy_read_batch_bytes < 1:
        raise ValueError(f"binary_copy_read_batch_bytes must be positive, got {binary_copy_read_batch_bytes}")
    for name, value in (
        ("max_source_fragments", max_source_fragments),
        ("max_source_rows", max_source_rows),
        ("max_source_bytes", max_source_bytes),
    ):
        if value is not None:
            raise _refuse(name, "incremental compaction is not implemented")
    if excluded_fragment_ids:
        raise _refuse("excluded_fragment_ids", "every fragment is a compaction candidate")
    if data_storage_version is not None and data_storage_version != current_format:
        raise _refuse(
            "data_storage_version",
            f"compaction keeps the dataset's data format ({current_format}), not {data_storage_version!r}",
        )


def compact(
    ds: Handle,
    *,
    target_rows_per_fragment: int | None = None,
    max_rows_per_group: int | None = None,
    max_bytes_per_file: int | None = None,
    materialize_deletions: bool | None = None,
    materialize_deletions_threshold: float | None = None,
    defer_index_remap: bool | None = None,
    num_threads: int | None = None,
    batch_size: int | None = None,
    compaction_mode: str | None = None,
    binary_copy_read_batch_bytes: int | None = None,
    max_source_fragments: int | None = None,
    max_source_rows: int | None = None,
    max_source_bytes: int | None = None,
    excluded_fragment_ids: Sequence[int] | None = None,
    data_storage_version: str | None = None,
    io_buffer_size: int | None = None,
    progress: Progress = None,
) -> CompactionMetrics:
    """Compact ``ds`` and move the handle to the version the compaction committed (see
    :class:`DatasetOptimizer.compact_files`)."""
    snapshot = ds._snapshot
    # the options left None take the dataset's lance.compaction.* config, as in pylance
    given = {
        "target_rows_per_fragment": target_rows_per_fragment,
        "max_rows_per_group": max_rows_per_group,
        "max_bytes_per_file": max_bytes_per_file,
        "materialize_deletions": materialize_deletions,
        "materialize_deletions_threshold": materialize_deletions_threshold,
        "defer_index_remap": defer_index_remap,
        "batch_size": batch_size,
        "compaction_mode": compaction_mode,
        "binary_copy_read_batch_bytes": binary_copy_read_batch_bytes,
        "max_source_fragments": max_source_fragments,
        "max_source_rows": max_source_rows,
        "max_source_bytes": max_source_bytes,
        "data_storage_version": data_storage_version,
    }
    o = with_config(given, snapshot.manifest.config)
    check_compaction_options(
        compaction_mode=o["compaction_mode"],
        binary_copy_read_batch_bytes=o["binary_copy_read_batch_bytes"],
        max_source_fragments=o["max_source_fragments"],
        max_source_rows=o["max_source_rows"],
        max_source_bytes=o["max_source_bytes"],
        excluded_fragment_ids=excluded_fragment_ids,
        data_storage_version=o["data_storage_version"],
        current_format=snapshot.manifest.data_storage_version,
    )

    def attempt(current: Snapshot) -> tuple[Snapshot, CompactionMetrics]:
        return compact_files(
            current,
            target_rows_per_fragment=o["target_rows_per_fragment"],
            max_rows_per_group=o["max_rows_per_group"],
            materialize_deletions=o["materialize_deletions"],
            materialize_deletions_threshold=o["materialize_deletions_threshold"],
            max_bytes_per_file=o["max_bytes_per_file"],
            num_threads=num_threads,
            batch_size=o["batch_size"],
            progress=progress,
            compaction_mode=o["compaction_mode"],
            binary_copy_read_batch_bytes=o["binary_copy_read_batch_bytes"],
        )

    # a version that cleanup removed while its files were read is compacted again at the latest
    # version (conflicts with other writers are reported, as pylance reports them); the handle
    # then moves to the latest version even where that had nothing to compact
    done, metrics = retry_on_conflict(snapshot, attempt, CONFLICT_RETRIES, RETRY_TIMEOUT, conflicts=False)
    return ds._committed(done, metrics)


class DatasetOptimizer:
    """``ds.optimize``: pylance's ``DatasetOptimizer`` (compaction; indices are not supported).

    Example:
        ```python
        ds.optimize.compact_files(target_rows_per_fragment=1_000_000)
        ```
    """

    def __init__(self, dataset: Handle) -> None:
        self._dataset = dataset

    def compact_files(
        self,
        *,
        target_rows_per_fragment: int | None = None,
        max_rows_per_group: int | None = None,
        max_bytes_per_file: int | None = None,
        materialize_deletions: bool | None = None,
        materialize_deletions_threshold: float | None = None,
        defer_index_remap: bool | None = None,
        num_threads: int | None = None,
        batch_size: int | None = None,
        compaction_mode: str | None = None,
        binary_copy_read_batch_bytes: int | None = None,
        max_source_fragments: int | None = None,
        max_source_rows: int | None = None,
        max_source_bytes: int | None = None,
        excluded_fragment_ids: list[int] | None = None,
        data_storage_version: str | None = None,
        progress: Progress = None,
    ) -> CompactionMetrics:
        """Rewrite small fragments (and fragments with many deleted rows) into larger ones, keeping
        the row order; the handle moves to the version committed (two versions are committed, as in
        pylance: a fragment id reservation, then the rewrite). Returns pylance's metrics.

        An option left None takes its default (1024 * 1024 rows per fragment, deletions
        materialized above 10%). At most ``num_threads`` bins are rewritten at once (and each
        reads at most that many pieces ahead). ``max_rows_per_group`` and ``batch_size`` only
        tune pylance's engine and are accepted as no-ops. ``compaction_mode`` is pylance's:
        ``"reencode"`` (the default) decodes and writes the rows anew, ``"try_binary_copy"``
        concatenates the data files of a group of fragments page by page where they allow it (no
        deletion files, one data file each of the dataset's format and schema, no blob columns)
        and re-encodes the others, ``"force_binary_copy"`` fails where they do not; a copy reads
        at most ``binary_copy_read_batch_bytes`` of a file at once (16 MiB by default).

        An option left None takes the value the dataset's config gives it under the key
        ``lance.compaction.<option>`` (pylance's), if any.

        Indices (lance_table does not rewrite index files) stay valid: moved indexed rows are
        recorded in pylance's fragment reuse index, as ``defer_index_remap=True`` does in pylance,
        whatever ``defer_index_remap`` says; with stable row ids, see
        :func:`lance_table.table.operations.compaction.compact_files`.

        ``progress`` (lance_table's): a bar on stderr when it is a terminal (None, the default;
        needs tqdm), always (True) or never (False), or a callable receiving
        :class:`~lance_table.progress.ProgressEvent` records (phase ``rewrite``).

        Raises:
            ValueError: ``num_threads`` is below 1, ``compaction_mode`` is unknown, or a
                ``lance.compaction.*`` key of the dataset's config does not parse.
            BinaryCopyError: ``compaction_mode="force_binary_copy"`` and fragments that cannot
                be copied page by page (an OSError, as pylance raises).
            UnsupportedOperationError: ``max_source_fragments``, ``max_source_rows``,
                ``max_source_bytes``, ``excluded_fragment_ids`` or another
                ``data_storage_version`` than the dataset's.
            UnsupportedFormatError: data files lance_table does not write.
            CorruptFileError: the dataset's fragment reuse index does not parse.
            CommitConflictError: a concurrent delete or compaction touched the same fragments.
            InputTypeError: ``progress`` is of no kind taken.
        """
        return compact(
            self._dataset,
            target_rows_per_fragment=target_rows_per_fragment,
            max_rows_per_group=max_rows_per_group,
            max_bytes_per_file=max_bytes_per_file,
            materialize_deletions=materialize_deletions,
            materialize_deletions_threshold=materialize_deletions_threshold,
            defer_index_remap=defer_index_remap,
            num_threads=num_threads,
            batch_size=batch_size,
            compaction_mode=compaction_mode,
            binary_copy_read_batch_bytes=binary_copy_read_batch_bytes,
            max_source_fragments=max_source_fragments,
            max_source_rows=max_source_rows,
            max_source_bytes=max_source_bytes,
            excluded_fragment_ids=excluded_fragment_ids,
            data_storage_version=data_storage_version,
            progress=progress,
        )

    def optimize_indices(self, **kwargs: Any) -> None:
        """Not supported: lance_table has no indices.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError("optimize_indices() is not supported: lance_table has no indices")

    def enable_auto_cleanup(self, auto_cleanup_config: AutoCleanupConfig, **kwargs: Any) -> None:
        """Turn on automatic cleanup (pylance's): every ``interval`` versions a commit removes the
        versions older than ``older_than_seconds``. The keys go into the dataset config in one
        commit; the handle moves to it.

        Raises:
            KeyError: ``interval`` or ``older_than_seconds`` is missing.
            CommitConflictError: a concurrent change of the same config keys.
        """
        values = auto_cleanup.enable_values(auto_cleanup_config)
        self._dataset._committed(config_ops.update_config(self._dataset._snapshot, values, False))

    def disable_auto_cleanup(self, **kwargs: Any) -> None:
        """Turn automatic cleanup off: the config keys go, in one commit; the handle moves to it.

        Raises:
            CommitConflictError: a concurrent change of the same config keys.
        """
        keys = [auto_cleanup.INTERVAL_KEY, auto_cleanup.OLDER_THAN_KEY]
        self._dataset._committed(config_ops.delete_config_keys(self._dataset._snapshot, keys))
