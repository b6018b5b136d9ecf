"""What changed between two versions of a dataset (pylance's ``ds.delta(...)`` and its
``DatasetDelta``): the transactions in between and the row ids deleted.

The range is ``(begin, end]``: the transactions of versions ``begin + 1`` to ``end``. Deleted row
ids are the stable row ids live at ``begin`` and not at ``end`` (as pylance, this needs a dataset
with stable row ids). pylance's ``get_inserted_rows`` and ``get_updated_rows`` read the row
version columns (``_row_created_at_version``, ``_row_last_updated_at_version``) that lance_table
does not scan yet: they raise :class:`~lance_table.errors.UnsupportedOperationError` (the change
data feed, ``ds.table_changes``, answers the same question in Delta Lake's shape).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedOperationError
from lance_table.format import flags
from lance_table.table.deletion import read_deletions
from lance_table.table.lance_operation import Transaction
from lance_table.table.operations.transactions import read_transaction
from lance_table.table.row_ids import fragment_row_ids
from lance_table.table.snapshot import Snapshot

ROW_ID = "_rowid"
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

    def __init__(self, begin: Snapshot, end: Snapshot) -> None:
        self._begin = begin
        self._end = end

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
        """pylance's rows inserted in the range (not implemented here).

        Raises:
            UnsupportedOperationError: always; ``ds.table_changes(...)`` lists inserted rows.
        """
        raise UnsupportedOperationError(
            "DatasetDelta.get_inserted_rows: lance_table does not read the row version columns; "
            "use ds.table_changes(...)"
        )

    def get_updated_rows(self) -> pa.RecordBatchReader:
        """pylance's rows updated in the range (not implemented here).

        Raises:
            UnsupportedOperationError: always; ``ds.table_changes(...)`` lists updated rows.
        """
        raise UnsupportedOperationError(
            "DatasetDelta.get_updated_rows: lance_table does not read the row version columns; "
            "use ds.table_changes(...)"
        )


class _NoStableRowIdsError(UnsupportedOperationError, ValueError):
    """Deleted row ids of a dataset without stable row ids (pylance raises ValueError)."""


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
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)


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
    return DatasetDelta(begin_snap, end_snap)


__all__ = ["DatasetDelta", "delta"]
