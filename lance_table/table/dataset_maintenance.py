"""Versions kept and dropped: restore, compaction, cleanup, stats, validation

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lance_table.table.handle import Handle
from lance_table.table.maintenance import LanceStats, drop, validate
from lance_table.table.operations.cleanup import DEFAULT_GRACE_PERIOD
from lance_table.table.operations.restore import restore_version
from lance_table.table.progress import Progress

if TYPE_CHECKING:
    from lance_table.table.operations.cleanup import CleanupExplanation, CleanupStats
    from lance_table.table.operations.compaction import CompactionMetrics
    from lance_table.table.optimize import DatasetOptimizer


class _Maintenance(Handle):
    """Versions kept and dropped: restore, compaction, cleanup, stats, validation."""

    def restore(self, *, commit_message: str | None = None) -> None:
        """Make this (old) version the latest again, as a new version; the handle moves to it
        (pylance's ``restore``: returns None).

        Raises:
            VersionNotFoundError: this version has been cleaned up.
        """
        self._committed(restore_version(self._snapshot, commit_message))

    @property
    def optimize(self) -> DatasetOptimizer:
        """Compaction (pylance's ``ds.optimize``): ``ds.optimize.compact_files(...)``."""
        from lance_table.table.optimize import DatasetOptimizer

        return DatasetOptimizer(self)

    def compact_files(
        self,
        *,
        target_rows_per_fragment: int | None = None,
        max_rows_per_group: int | None = None,
        materialize_deletions: bool | None = None,
        materialize_deletions_threshold: float | None = None,
        max_bytes_per_file: int | None = None,
        num_threads: int | None = None,
        batch_size: int | None = None,
        defer_index_remap: bool | None = None,
        progress: Progress = None,
        compaction_mode: str | None = None,
        binary_copy_read_batch_bytes: int | None = None,
    ) -> CompactionMetrics:
        """Shorthand for ``ds.optimize.compact_files(...)`` (see there): the handle moves to the
        version committed; returns pylance's compaction metrics.

        Indices stay valid as with pylance's ``defer_index_remap=True``: moved indexed rows are
        recorded in pylance's fragment reuse index (lance_table does not rewrite index files);
        with stable row ids the index coverage moves to the new fragments.

        Raises:
            ValueError: ``num_threads`` is below 1, or ``compaction_mode`` is unknown.
            BinaryCopyError: ``compaction_mode="force_binary_copy"`` and fragments that cannot
                be copied page by page.
            UnsupportedFormatError: data files lance_table does not write.
            CorruptFileError: the dataset's fragment reuse index does not parse.
            CommitConflictError: a concurrent delete or compaction touched the same fragments.
            InputTypeError: ``progress`` is of no kind taken.
        """
        return self.optimize.compact_files(
            target_rows_per_fragment=target_rows_per_fragment,
            max_rows_per_group=max_rows_per_group,
            materialize_deletions=materialize_deletions,
            materialize_deletions_threshold=materialize_deletions_threshold,
            max_bytes_per_file=max_bytes_per_file,
            num_threads=num_threads,
            batch_size=batch_size,
            defer_index_remap=defer_index_remap,
            progress=progress,
            compaction_mode=compaction_mode,
            binary_copy_read_batch_bytes=binary_copy_read_batch_bytes,
        )

    def cleanup_old_versions(
        self,
        older_than: dt.timedelta | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        delete_rate_limit: int | None = None,
        versions: Sequence[int] | None = None,
        delete_concurrency: int | None = None,
        grace_period: dt.timedelta = DEFAULT_GRACE_PERIOD,
        dry_run: bool = False,
        progress: Progress = None,
    ) -> CleanupStats:
        """Delete versions older than ``older_than`` and not among the ``retain_versions`` newest
        (neither given: older than two weeks, as pylance), only those of ``versions`` if given,
        never the latest, never a tagged one, and the files only they reference; unreferenced files
        younger than ``grace_period`` stay unless ``delete_unverified``. ``dry_run=True`` returns
        what would be removed and removes nothing. ``delete_rate_limit`` and
        ``delete_concurrency`` tune pylance's engine and are accepted as no-ops. ``progress``
        (lance_table's): a bar on stderr when it is a terminal (None, the default; needs tqdm),
        always (True) or never (False), or a callable receiving
        :class:`~lance_table.progress.ProgressEvent` records (phases ``versions`` and ``files``).

        Raises:
            ValueError: ``retain_versions`` is not positive.
            TagError: a tagged version is older than the cutoff and ``error_if_tagged_old_versions``.
            CorruptFileError: a tag file is damaged; nothing is deleted.
            InputTypeError: ``progress`` is of no kind taken.
        """
        from lance_table.table.operations.cleanup import cleanup_old_versions

        return cleanup_old_versions(
            self._storage,
            older_than=older_than,
            retain_versions=retain_versions,
            only_versions=versions,
            grace_period=grace_period,
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
            dry_run=dry_run,
            progress=progress,
        )

    def explain_cleanup_old_versions(
        self,
        older_than: dt.timedelta | None = None,
        retain_versions: int | None = None,
        *,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
        delete_rate_limit: int | None = None,
        versions: Sequence[int] | None = None,
        include_files: bool = False,
        max_files: int = 1000,
    ) -> CleanupExplanation:
        """What :meth:`cleanup_old_versions` would remove, removing nothing (pylance's
        ``explain_cleanup_old_versions``); ``include_files`` lists up to ``max_files`` files.

        Raises:
            ValueError: ``max_files`` or ``retain_versions`` is not positive.
            TagError: a tagged version is older than the cutoff and ``error_if_tagged_old_versions``.
        """
        from lance_table.table.operations.cleanup import explain_cleanup

        return explain_cleanup(
            self._storage,
            self.version,
            include_files=include_files,
            max_files=max_files,
            older_than=older_than,
            retain_versions=retain_versions,
            only_versions=versions,
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
        )

    @property
    def stats(self) -> LanceStats:
        """pylance's ``ds.stats``: ``dataset_stats()`` of this version."""
        return LanceStats(self._snapshot)

    def validate(self) -> None:
        """Check this version's integrity (fragment ids, deletion counts, files present), as
        pylance's ``validate()``.

        Raises:
            SchemaError: two fragments share an id, or a fragment deletes more rows than it has.
            DataFileNotFoundError: a data or deletion file is missing.
        """
        validate(self._snapshot)

    @staticmethod
    def drop(
        base_uri: str | os.PathLike[str],
        storage_options: Mapping[str, Any] | None = None,
        ignore_not_found: bool | None = None,
    ) -> None:
        """Delete the dataset at ``base_uri`` and every file of it (pylance's ``LanceDataset.drop``).

        Raises:
            DatasetNotFoundError: there is no dataset there, unless ``ignore_not_found``.
        """
        drop(base_uri, storage_options, ignore_not_found)
