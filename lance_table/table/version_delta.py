"""What changed between two versions of a dataset (pylance's ``ds.delta(...)`` and its
``DatasetDelta``): the transactions in between, the rows inserted and updated, the row ids deleted.

The range is ``(begin, end]``: the transactions of versions ``begin + 1`` to ``end``. Inserted and
updated rows are found by the row version sequences of ``end``'s fragments (a row's
created-at and last-updated-at versions, kept beside its stable row id): inserted, created in
the range; updated, created before it and updated in it. Deleted row ids are the stable row ids
live at ``begin`` and not at ``end``. All of it needs stable row ids, as in pylance (without
them: no inserted or updated rows, and a ValueError for deleted ids). The change data feed,
``ds.table_changes``, answers the same questions in Delta Lake's shape for any dataset.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table._numpy import sorted_unique
from lance_table.errors import UnsupportedOperationError
from lance_table.format import flags
from lance_table.format.row_ids import RowMeta
from lance_table.table.deletion import read_deletions
from lance_table.table.lance_operation import Transaction
from lance_table.table.operations.transactions import read_transaction
from lance_table.table.row_ids import fragment_row_ids
from lance_table.table.scan_spec import scan_spec
from lance_table.table.scanner import take_by_ids
from lance_table.table.snapshot import Snapshot

ROW_ID = "_rowid"
CREATED = "_row_created_at_version"
UPDATED = "_row_last_updated_at_version"
_DELETED_SCHEMA = pa.schema([pa.field(ROW_ID, pa.uint64())])


class DatasetDelta:
    """The changes between two versions of a dataset (pylance's ``DatasetDelta``), made by
    :meth:`LanceDataset.delta`: versions ``begin_version`` (exclusive) to ``end_version``.

    Example:
        ```python
        sds = lt.write_dataset(pa.table({"x": [1, 2]}), f"{tmp}/delta", enable_stable_row_ids=True)
        sds.insert(pa.table({"x": [3]}))
        sds.delete("x = 1")
        delta = sds.delta(compared_against=1)
        print([type(t.operation).__name__ for t in delta.list_transactions()])  # Append, Delete
        print(delta.get_deleted_row_ids().read_all())  # _rowid: [0]
        ```
    """

    def __init__(self, begin: Snapshot, end: Snapshot, source: Snapshot | None = None) -> None:
        self._begin = begin
        self._end = end
        self._source = end if source is None else source

    @property
    def begin_version(self) -> int:
        """The version the range starts after."""
        return self._begin.version

    @property
    def end_version(self) -> int:
        """The last version of the range."""
        return self._end.version

    def list_transactions(self) -> list[Transaction]:
        """The transactions of versions ``begin_version + 1`` to ``end_version``, oldest first
        (versions without a transaction left out).

        Raises:
            VersionGoneError: a version of the range was cleaned up.
            CorruptFileError: a manifest or transaction is damaged.
        """
        storage = self._end.storage
        found = (read_transaction(storage, v) for v in range(self.begin_version + 1, self.end_version + 1))
        return [t for t in found if t is not None]

    def get_deleted_row_ids(self) -> pa.RecordBatchReader:
        """The stable row ids live at ``begin_version`` and gone at ``end_version``, as batches of
        one ``_rowid`` column (uint64, ascending).

        Raises:
            ValueError: (as :class:`~lance_table.errors.UnsupportedOperationError`) the begin
                version does not use stable row ids.
            CorruptFileError: a row id sequence or deletion file is damaged.
        """
        before = _live_row_ids(self._begin)
        after = _live_row_ids(self._end)
        gone = np.setdiff1d(before, after, assume_unique=True)
        batch = pa.record_batch([pa.array(gone, pa.uint64())], schema=_DELETED_SCHEMA)
        return pa.RecordBatchReader.from_batches(_DELETED_SCHEMA, [batch])

    def get_inserted_rows(self) -> pa.RecordBatchReader:
        """The rows created after ``begin_version`` and up to ``end_version``, as they are in the
        version of the handle that made the delta (as pylance reads them), with ``_rowid``,
        ``_row_created_at_version`` and ``_row_last_updated_at_version`` after the data columns
        (none for a dataset without stable row ids, as pylance).

        Raises:
            CorruptFileError: a row id or version sequence or a deletion file is damaged.
            UnsupportedFormatError: row ids or versions are kept in external files.
        """
        return self._rows(inserted=True)

    def get_updated_rows(self) -> pa.RecordBatchReader:
        """The rows created at or before ``begin_version`` and last updated after it and up to
        ``end_version``, as they are in the version of the handle that made the delta (as
        pylance), with the same columns as :meth:`get_inserted_rows`.

        Raises:
            CorruptFileError: a row id or version sequence or a deletion file is damaged.
            UnsupportedFormatError: row ids or versions are kept in external files.
        """
        return self._rows(inserted=False)

    def _rows(self, *, inserted: bool) -> pa.RecordBatchReader:
        source, begin, end = self._source, self.begin_version, self.end_version
        ids, created, updated = _row_versions(source)
        if inserted:
            keep = (created > begin) & (created <= end)
        else:
            keep = (created <= begin) & (updated > begin) & (updated <= end)
        ids, created, updated = ids[keep], created[keep], updated[keep]
        data = take_by_ids(source, ids, scan_spec({}, "delta"))
        table = data.append_column(ROW_ID, pa.array(ids, pa.uint64()))
        table = table.append_column(CREATED, pa.array(created, pa.uint64()))
        table = table.append_column(UPDATED, pa.array(updated, pa.uint64()))
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())


class _NoStableRowIdsError(UnsupportedOperationError, ValueError):
    """Deleted row ids of a dataset without stable row ids (pylance raises ValueError)."""


def _row_versions(snapshot: Snapshot) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row id, created-at version, last-updated-at version) of every live row of a version with
    stable row ids, in fragment order (nothing without stable row ids). A fragment without version
    sequences counts its rows as created and updated at version 1."""
    manifest = snapshot.manifest
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    if manifest.reader_feature_flags & flags.STABLE_ROW_IDS:
        for fragment in manifest.fragments:
            meta = RowMeta(fragment.row_id_meta, snapshot.uri)
            if meta.ids is None:
                continue
            ones = np.ones(fragment.physical_rows, np.uint64)
            created = ones if meta.created is None else meta.created
            updated = created if meta.updated is None else meta.updated
            rows = (meta.ids.astype(np.uint64), created, updated)
            if fragment.deletion_file is not None:
                deleted = read_deletions(
                    snapshot.storage, fragment, version=snapshot.version, bases=snapshot.bases
                )
                rows = tuple(np.delete(a, deleted.astype(np.int64)) for a in rows)  # type: ignore[assignment]
            parts.append(rows)
    if not parts:
        empty = np.zeros(0, np.uint64)
        return empty, empty, empty
    return tuple(np.concatenate(c) for c in zip(*parts))  # type: ignore[return-value]


def _live_row_ids(snapshot: Snapshot) -> np.ndarray:
    manifest = snapshot.manifest
    where = snapshot.uri
    if not manifest.reader_feature_flags & flags.STABLE_ROW_IDS:
        raise _NoStableRowIdsError(
            f"deleted row ids need stable row ids; version {snapshot.version} of {where} does not use them"
        )
    parts = []
    for fragment in manifest.fragments:
        ids = fragment_row_ids(fragment, where)
        if ids is None:
            continue
        if fragment.deletion_file is not None:
            deleted = read_deletions(
                snapshot.storage, fragment, version=snapshot.version, bases=snapshot.bases
            )
            ids = np.delete(ids, deleted.astype(np.int64))
        parts.append(ids.astype(np.uint64))
    return sorted_unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)


def delta(
    snapshot: Snapshot,
    compared_against: int | None = None,
    *,
    begin_version: int | None = None,
    end_version: int | None = None,
) -> DatasetDelta:
    """The delta of pylance's ``ds.delta(...)``: ``compared_against`` (which wins, as in pylance,
    when a range is given too) to the handle's version, or ``begin_version`` to ``end_version``.

    Raises:
        ValueError: neither ``compared_against`` nor both ends of a range are given.
        VersionNotFoundError: a version of the range does not exist.
    """
    if compared_against is not None:
        begin, end = compared_against, snapshot.version
    elif begin_version is None and end_version is None:
        raise ValueError("delta needs compared_against or both begin_version and end_version")
    elif begin_version is None or end_version is None:
        raise ValueError("delta needs both begin_version and end_version")
    else:
        begin, end = begin_version, end_version
    for version in (begin, end):
        if isinstance(version, bool) or not isinstance(version, int):
            raise TypeError(f"a delta's versions are integers, not {version!r}")
    begin_snap = snapshot if begin == snapshot.version else snapshot.checkout(begin)
    end_snap = snapshot if end == snapshot.version else snapshot.checkout(end)
    return DatasetDelta(begin_snap, end_snap, snapshot)


__all__ = ["DatasetDelta", "delta"]
