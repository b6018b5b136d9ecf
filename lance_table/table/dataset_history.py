"""A handle's version, the changes between versions, the dataset's files and the handle's reads

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from lance_table.table import file_listing, handle_info, version_delta
from lance_table.table.handle import Handle


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
