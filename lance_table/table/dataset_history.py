"""A handle's version, the changes and transactions between versions, the dataset's files and
the handle's reads

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from lance_table.table import file_listing, handle_info, version_delta
from lance_table.table.handle import Handle
from lance_table.table.lance_operation import Transaction
from lance_table.table.operations.manifest_paths import migrate_manifest_paths_v2
from lance_table.table.operations.transactions import (
    DEFAULT_RECENT_TRANSACTIONS,
    get_transactions,
    read_transaction,
)


class _History(Handle):
    """A handle's version, the changes between versions, the dataset's files and the handle's reads."""

    def get_version(self) -> dict[str, Any]:
        """This handle's version as pylance's ``get_version()``: ``version``, ``timestamp`` (naive
        local time, as ``versions()``) and ``metadata`` (the version's fragment, file and row
        totals, strings), from the loaded manifest: nothing is read.

        Raises:
            Nothing: everything comes from the loaded manifest.
        """
        return handle_info.current_version(self.manifest)

    def delta(
        self,
        compared_against: int | None = None,
        *,
        begin_version: int | None = None,
        end_version: int | None = None,
    ) -> version_delta.DatasetDelta:
        """The changes from version ``compared_against`` to this handle's, or from
        ``begin_version`` (exclusive) to ``end_version``, as pylance's ``delta`` (see
        :mod:`lance_table.table.version_delta`).

        Raises:
            ValueError: neither ``compared_against`` nor both ends of a range are given.
            VersionNotFoundError: a version of the range does not exist.
        """
        return version_delta.delta(
            self._snapshot, compared_against, begin_version=begin_version, end_version=end_version
        )

    def all_files(self) -> pa.RecordBatchReader:
        """Every file under the dataset's root (``base_uri``, ``path``, ``size_bytes``,
        ``last_modified``), as pylance's ``all_files()``.

        Raises:
            OSError: the store cannot be listed.
        """
        return file_listing.all_files(self._storage)

    def tracked_files(
        self,
        *,
        min_version: int | None = None,
        progress: Callable[[int, int | None], object] | None = None,
    ) -> pa.RecordBatchReader:
        """Every file a version (at or above ``min_version``) references: ``version``,
        ``base_uri``, ``path``, ``type`` (manifest, transaction, data, deletion or index file),
        as pylance's ``tracked_files()``.

        Raises:
            CorruptFileError: a manifest is damaged.
            TypeError: ``min_version`` is not an integer.
        """
        return file_listing.tracked_files(self._storage, min_version=min_version, progress=progress)

    def io_stats_snapshot(self) -> handle_info.DatasetIOStats:
        """The reads lance_table made since this handle's last :meth:`io_stats_incremental`
        (every handle's and thread's: the counts are per process), the counts left as they are.

        Raises:
            Nothing: the counters are in memory.
        """
        return handle_info.io_mark(self).snapshot()

    def io_stats_incremental(self) -> handle_info.DatasetIOStats:
        """As :meth:`io_stats_snapshot`, then the counts start again from zero.

        Raises:
            Nothing: the counters are in memory.
        """
        return handle_info.io_mark(self).incremental()

    def read_transaction(self, version: int) -> Transaction | None:
        """The transaction that made ``version`` (pylance's ``Transaction``), or None if it has none.

        Raises:
            VersionGoneError: there is no such version (also an OSError, as pylance's error).
        """
        return read_transaction(self._storage, version)

    def get_transactions(
        self, recent_transactions: int = DEFAULT_RECENT_TRANSACTIONS
    ) -> list[Transaction | None]:
        """The transactions of this version and up to ``recent_transactions - 1`` before it, newest
        first (None where a version has none)."""
        return get_transactions(self._snapshot, recent_transactions)

    def table_changes(
        self,
        starting_version: int,
        ending_version: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
    ) -> pa.RecordBatchReader:
        """The change rows of versions ``starting_version`` to ``ending_version`` (default: this
        handle's version), both included, as Delta Lake's ``table_changes``: the data columns,
        then ``_change_type`` (``insert``, ``delete``, ``update_preimage``, ``update_postimage``),
        ``_commit_version`` and ``_commit_timestamp``. Not in pylance. Updates pair their old and
        new rows where the dataset has stable row ids, else show as a delete and an insert; a
        compaction changes nothing (see :mod:`lance_table.table.changes`). Streams, reading
        only the changed rows.

        Raises:
            VersionNotFoundError: a version of the range (or the one before it) does not exist.
            ScanOptionError: the range is empty or starts below 1, or ``batch_size`` is below 1.
            SchemaError: a column is not in the starting version, or a version of the range drops,
                renames or retypes one.

        Example:
            ```python
            ds = lt.dataset(uri)
            v = ds.version
            ds.delete("id < 10")
            changes = ds.table_changes(v + 1).read_all()  # one "delete" row per deleted row
            ```
        """
        from lance_table.table.changes import table_changes

        last = self.version if ending_version is None else ending_version
        return table_changes(self._storage, starting_version, last, columns, batch_size)

    def migrate_manifest_paths_v2(self) -> None:
        """Rename the manifests to the V2 naming scheme (pylance's ``migrate_manifest_paths_v2``).
        Idempotent; must not run while other writers commit."""
        migrate_manifest_paths_v2(self._storage)
