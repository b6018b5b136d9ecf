"""The Dataset handle, a thin facade over one snapshot (the entry points ``dataset()`` and
``write_dataset()`` are in :mod:`lance_table.table.entry`).

A handle reads one version until a write through it moves it, as pylance's handles move: every
write goes through the one commit path, and where the handle goes and what the write returns is
decided once, in :meth:`LanceDataset._committed`. ``checkout_version()`` returns another handle;
``checkout_latest()`` moves this one.
"""

from __future__ import annotations

import datetime as dt
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedOperationError
from lance_table.format.manifest import Manifest
from lance_table.storage import Storage, open_storage
from lance_table.table import scanner as scans
from lance_table.table import versions
from lance_table.table.blobs import BlobFile, take_blobs
from lance_table.table.commit import CommitLock, CommitOptions
from lance_table.table.commit.protocol import DEFAULT_MAX_RETRIES
from lance_table.table.fragment_metadata import FragmentMetadata
from lance_table.table.lance_fragment import LanceFragment, fragment_of
from lance_table.table.lance_operation import LanceOperation, Transaction
from lance_table.table.lance_schema import LanceSchema
from lance_table.table.maintenance import LanceStats, drop, validate
from lance_table.table.opening import handle_state, open_snapshot, refuse, snapshot_of_state
from lance_table.table.operations import config as config_ops
from lance_table.table.operations import update as update_ops
from lance_table.table.operations.cleanup import (
    DEFAULT_GRACE_PERIOD,
    CleanupExplanation,
    CleanupStats,
    cleanup_old_versions,
    explain_cleanup,
)
from lance_table.table.operations.commit_operation import commit_operation
from lance_table.table.operations.compaction import CompactionMetrics
from lance_table.table.operations.delete import DEFAULT_RETRY_TIMEOUT, delete_rows
from lance_table.table.operations.manifest_paths import (
    migrate_manifest_paths_v2,
)
from lance_table.table.operations.restore import plan_restore
from lance_table.table.operations.transactions import (
    DEFAULT_RECENT_TRANSACTIONS,
    get_transactions,
    merge_appends,
    read_transaction,
)
from lance_table.table.operations.truncate import truncate
from lance_table.table.operations.write import WriteMode
from lance_table.table.operations.write_dataset import write_snapshot
from lance_table.table.optimize import DatasetOptimizer
from lance_table.table.scan import Predicate
from lance_table.table.scan_spec import Columns, scan_spec
from lance_table.table.scanner import LanceScanner
from lance_table.table.snapshot import Snapshot
from lance_table.table.tags import Tags

_Result = TypeVar("_Result")


class LanceDataset:
    """A Lance dataset, read at one version (pylance's ``LanceDataset``).

    A write through the handle (``delete``, ``restore``, ``optimize.compact_files``, ...) moves it to
    the version it committed, as in pylance. Open with :func:`lance_table.dataset`; create with
    :func:`lance_table.write_dataset`.
    """

    def __init__(
        self,
        uri: str | os.PathLike[str] | Snapshot,
        version: int | str | None = None,
        block_size: int | None = None,
        index_cache_size: int | None = None,
        metadata_cache_size: int | None = None,
        commit_lock: CommitLock | None = None,
        storage_options: Mapping[str, Any] | None = None,
        serialized_manifest: bytes | None = None,
        default_scan_options: Mapping[str, Any] | None = None,
        metadata_cache_size_bytes: int | None = None,
        index_cache_size_bytes: int | None = None,
        read_params: Mapping[str, Any] | None = None,
        session: Any = None,
        namespace_client: Any = None,
        table_id: Sequence[str] | None = None,
        namespace_client_managed_versioning: bool = False,
        base_store_params: Mapping[str, Any] | None = None,
    ) -> None:
        """Open ``uri`` as pylance's ``LanceDataset(uri, version, ...)`` does (see :func:`dataset`;
        ``serialized_manifest``, the bytes of a manifest file as a pickled handle carries them,
        opens that version without listing the store), or wrap a snapshot (lance_table's own use).

        Raises:
            DatasetNotFoundError: there is no dataset at ``uri``.
            VersionNotFoundError: the version does not resolve.
            UnsupportedOptionError: an option that would change the result is set (see
                :func:`dataset`).
        """
        if isinstance(uri, Snapshot):
            self._snapshot = uri
            return
        refuse(
            "LanceDataset",
            {
                "default_scan_options": default_scan_options,
                "namespace_client": namespace_client,
                "table_id": table_id,
                "namespace_client_managed_versioning": namespace_client_managed_versioning,
                "base_store_params": base_store_params,
            },
            unset={"namespace_client_managed_versioning": False},
        )
        self._snapshot = open_snapshot(
            uri,
            version,
            storage_options=storage_options,
            commit_lock=commit_lock,
            serialized_manifest=serialized_manifest,
        )

    def __getstate__(self) -> dict[str, Any]:
        """A handle pickles as its URI, storage options, version and manifest (as pylance's)."""
        return handle_state(self._snapshot)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Open exactly the pickled version, without listing the store."""
        self._snapshot = snapshot_of_state(state)

    def __copy__(self) -> LanceDataset:
        return LanceDataset(self._snapshot)

    def _committed(self, snapshot: Snapshot, result: _Result = None) -> _Result:  # type: ignore[assignment]
        """Where every write through this handle ends: the handle moves to the version the write
        committed (as pylance's does), and the caller gets ``result`` (what pylance returns for that
        write: None, a dict of counts, metrics)."""
        self._snapshot = snapshot
        return result

    @property
    def _storage(self) -> Storage:
        return self._snapshot.storage

    # -- identity ---------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._snapshot.uri

    @property
    def version(self) -> int:
        """The version this handle reads (a write through it moves it)."""
        return self._snapshot.version

    @property
    def latest_version(self) -> int:
        """The newest version in storage right now."""
        return versions.latest_entry(self._storage).version

    @property
    def manifest(self) -> Manifest:
        return self._snapshot.manifest

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this version."""
        return self._snapshot.schema

    @property
    def data_storage_version(self) -> str | None:
        return self.manifest.data_storage_version

    def __repr__(self) -> str:
        return f"Dataset({self.uri!r}, version={self.version}, rows={self.count_rows()})"

    # -- versions ---------------------------------------------------------------------------------

    def versions(self) -> list[dict[str, Any]]:
        """Every version: number, timestamp (naive UTC), operation and commit message."""
        return versions.history(self._storage)

    def checkout(self, version: int | str) -> Dataset:
        """Another handle on a version (or tag) of the same dataset; this one stays where it is.

        Raises:
            VersionNotFoundError: the version does not exist.
            TagError: the tag does not exist.
        """
        return Dataset(self._snapshot.checkout(version))

    def checkout_version(self, version: int | str) -> Dataset:
        """Another handle on a version (or tag) of the same dataset, as pylance's
        ``checkout_version``; this one stays where it is.

        Raises:
            VersionNotFoundError: the version does not exist.
            TagError: the tag does not exist.
        """
        return self.checkout(version)

    def checkout_latest(self) -> None:
        """Move this handle to the newest version (pylance's ``checkout_latest``; returns None).

        Raises:
            DatasetNotFoundError: the dataset was dropped.
        """
        self._snapshot = self._snapshot.checkout()

    @property
    def tags(self) -> Tags:
        return Tags(self._storage, self.version)

    # -- reading ----------------------------------------------------------------------------------

    def get_fragments(self, filter: Any = None) -> list[LanceFragment]:
        """The fragments of this version (pylance's ``LanceFragment`` basics; ``filter`` must be
        None, as in pylance)."""
        if filter is not None:
            raise ValueError("get_fragments() does not support filter yet")
        return [LanceFragment(self._snapshot, f) for f in self.manifest.fragments]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        """The fragment with this id, or None."""
        try:
            return fragment_of(self._snapshot, fragment_id)
        except ValueError:
            return None

    def count_rows(self, filter: Predicate | None = None, **options: Any) -> int:
        """Rows of this version (matching ``filter``, if given); ``options`` as :meth:`scanner`'s
        (``fragments=`` counts those fragments' rows).

        Raises:
            FilterError: the filter does not parse.
            ScanOptionError: a ``limit`` or ``offset`` is given (as in pylance).
        """
        return LanceScanner(
            self._snapshot, scan_spec({"filter": filter, **options}, "count_rows")
        ).count_rows()

    def scanner(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        fragments: Sequence[LanceFragment | FragmentMetadata] | None = None,
        index_segments: Any = None,
        full_text_query: Any = None,
        **options: Any,
    ) -> LanceScanner:
        """A scanner over this version, taking pylance's ``scanner`` options.

        ``columns``: names (nested ``"s.x"`` and ``_rowid``, ``_rowaddr``, ``_rowoffset`` too) or a
        dict of output names to SQL expressions. ``filter``: SQL or a pyarrow compute expression
        (it may read ``_rowid`` and ``_rowaddr``). ``fragments``: only those, in that order.
        Keyword-only options: ``with_row_id``, ``with_row_address``, ``use_stats``,
        ``strict_batch_size`` and pylance's tuning knobs, which change no result (see
        :mod:`lance_table.table.scan_spec`).

        Raises:
            TypeError: an option pylance does not have, or ``columns`` of the wrong type.
            ScanOptionError: a negative limit or offset, a batch size below 1.
            UnsupportedOperationError: an option that would change the result and is not implemented
                (``nearest``, ``full_text_query``, ``order_by``, ...).
        """
        return LanceScanner(self._snapshot, scan_spec({**locals(), **options}, "scanner"))

    def to_batches(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        **options: Any,
    ) -> pa.RecordBatchReader:
        """The rows as a RecordBatchReader (streams; DuckDB, Polars and pandas can consume it);
        options as :meth:`scanner`'s.

        Raises:
            as :meth:`scanner` and :meth:`to_table`.
        """
        return LanceScanner(self._snapshot, scan_spec({**locals(), **options}, "to_batches")).to_reader()

    def to_table(
        self,
        columns: Columns = None,
        filter: Predicate | None = None,
        limit: int | None = None,
        offset: int | None = None,
        nearest: Any = None,
        batch_size: int | None = None,
        batch_size_bytes: int | None = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        **options: Any,
    ) -> pa.Table:
        """The rows as one table; options as :meth:`scanner`'s (``fragments=`` too).

        Raises:
            SchemaError: a column does not exist, or an output column is named twice.
            FilterError: the filter or a column expression does not parse.
            ValueError: a fragment is not in this version.
            TypeError, ScanOptionError, UnsupportedOperationError: as :meth:`scanner`.
        """
        return LanceScanner(self._snapshot, scan_spec({**locals(), **options}, "to_table")).to_table()

    def head(self, num_rows: int, **options: Any) -> pa.Table:
        """The first ``num_rows`` rows; options as :meth:`scanner`'s.

        Raises:
            as :meth:`to_table`.
        """
        return LanceScanner(self._snapshot, scan_spec({**options, "limit": num_rows}, "head")).to_table()

    def slice(self, start: int, end: int, columns: Columns = None) -> pa.Table:
        """Rows ``[start, end)`` by position (pylance's ``slice``: an offset/limit scan).

        Raises:
            ScanOptionError: ``start`` is negative or ``end`` is below ``start``.
        """
        return LanceScanner(self._snapshot, scans.slice_spec(start, end, columns)).to_table()

    def take(
        self,
        indices: Sequence[int] | np.ndarray | pa.Array,
        columns: Columns = None,
    ) -> pa.Table:
        """Rows by position in this version (deleted rows do not count), in the order given;
        ``columns`` as :meth:`scanner`'s.

        Raises:
            IndexError: an index is outside ``[0, count_rows())``.
            SchemaError: a column does not exist.
        """
        return scans.take(self._snapshot, indices, scan_spec({"columns": columns}, "take"))

    def _take_rows(
        self,
        row_ids: Sequence[int] | np.ndarray | pa.Array,
        columns: Columns = None,
        *,
        ignore_deletions: bool = False,
        **options: Any,
    ) -> pa.Table:
        """Rows by row id (stable ids on datasets with stable row ids, else row addresses), in the
        order given; deleted rows are left out (pylance's unstable ``_take_rows``).
        ``ignore_deletions`` is accepted: the result holds the live rows either way.

        Raises:
            IndexError: an address names no fragment of this version, or an offset past its rows.
            SchemaError: a column does not exist.
        """
        return scans.take_by_ids(self._snapshot, row_ids, scan_spec({"columns": columns}, "_take_rows"))

    def sample(
        self,
        num_rows: int,
        columns: Columns = None,
        randomize_order: bool = True,
        **options: Any,
    ) -> pa.Table:
        """``num_rows`` distinct rows at random (in random order unless ``randomize_order`` is False).

        Raises:
            ValueError: ``num_rows`` is negative or above the number of rows.
            SchemaError: a column does not exist.
        """
        return scans.sample(
            self._snapshot, num_rows, scan_spec({"columns": columns}, "sample"), randomize_order
        )

    def take_blobs(
        self,
        blob_column: str,
        ids: Sequence[int] | np.ndarray | pa.Array | None = None,
        addresses: Sequence[int] | np.ndarray | pa.Array | None = None,
        indices: Sequence[int] | np.ndarray | pa.Array | None = None,
        *,
        allow_external: bool = False,
    ) -> list[BlobFile | None]:
        """The values of a blob column as lazy, seekable binary files (pylance's ``take_blobs``).

        Select rows by exactly one of ``ids`` (row ids), ``addresses`` (fragment id << 32 | offset)
        or ``indices`` (positions in this version); one element per selected row, None for a null
        blob. Blobs at URIs outside the dataset are opened only with ``allow_external``, and
        only below one of the dataset's registered base paths (object store schemes only).

        Raises:
            ValueError: not exactly one selection is given.
            SchemaError: the column is not a top-level blob column.
            IndexError: an index or address names no row.
            UnsupportedFormatError: an external blob without ``allow_external``; row ids of a
                dataset with stable row ids.
            BlobLocationError: an external blob outside the registered base paths, with an
                unknown scheme or escaping its base (never opened).
            CorruptFileError: a blob descriptor is damaged, points outside its file or names a
                sidecar that does not exist.
            DataFileNotFoundError: a data file does not exist.
        """
        return take_blobs(
            self._snapshot,
            blob_column,
            ids=ids,
            addresses=addresses,
            indices=indices,
            allow_external=allow_external,
        )

    # -- writing ----------------------------------------------------------------------------------

    @staticmethod
    def commit(
        base_uri: str | os.PathLike[str] | Dataset,
        operation: LanceOperation.BaseOperation | Transaction,
        read_version: int | None = None,
        commit_lock: CommitLock | None = None,
        storage_options: Mapping[str, Any] | None = None,
        enable_v2_manifest_paths: bool | None = None,
        detached: bool | None = False,
        max_retries: int = DEFAULT_MAX_RETRIES,
        *,
        commit_message: str | None = None,
        enable_stable_row_ids: bool | None = None,
    ) -> Dataset:
        """Commit an operation built by hand (pylance's ``LanceDataset.commit``), typically fragments
        written by :func:`lance_table.fragment.write_fragments` on workers; returns the new version.

        ``enable_v2_manifest_paths`` and ``enable_stable_row_ids`` apply to a dataset this commit
        creates (an Overwrite of nothing); they are ignored for an existing one, as in pylance.

        Goes through the one commit path: a commit that lost a race rebases as any write does.
        Fragments are checked before anything is written (see
        :mod:`lance_table.table.operations.commit_operation`); a refused commit changes nothing.

        Overwrite, Append, Delete, Rewrite, Restore, Merge, Update, Project, UpdateConfig and
        DataReplacement are committed; conflicts with concurrent commits are decided per pair of
        operations as pylance decides them (retryable or not).

        Raises:
            ValueError: no ``read_version`` for an operation other than Overwrite and Restore;
                fragments that are not the dataset's (an Update's, a Merge's, a Delete's).
            TypeError: an operation or schema of the wrong kind.
            UnsupportedOperationError: a LanceOperation lance_table does not commit, or ``detached``.
            DatasetNotFoundError: no dataset at ``base_uri`` (except for an Overwrite).
            VersionNotFoundError: ``read_version`` does not exist.
            DataFileNotFoundError: a fragment's data file is not in the dataset.
            SchemaError: the fragments disagree with the schema; a Project's or Merge's field ids
                or types disagree with the dataset's.
            CommitConflictError: a concurrent commit makes this one impossible.
        """
        if detached:
            raise UnsupportedOperationError("detached commits are not supported")
        if isinstance(base_uri, Dataset):
            storage, opts = base_uri._storage, base_uri._snapshot.commit_options
        else:
            storage, opts = open_storage(base_uri, storage_options), CommitOptions()
        if commit_lock is not None:
            opts = replace(opts, commit_lock=commit_lock)
        opts = replace(opts, max_retries=max_retries)
        return Dataset(
            commit_operation(
                storage,
                operation,
                read_version,
                opts,
                commit_message,
                v2_manifest_paths=enable_v2_manifest_paths,
                stable_row_ids=bool(enable_stable_row_ids),
            )
        )

    @staticmethod
    def commit_batch(
        dest: str | os.PathLike[str] | Dataset,
        transactions: Sequence[Transaction],
        commit_lock: CommitLock | None = None,
        storage_options: Mapping[str, Any] | None = None,
        enable_v2_manifest_paths: bool | None = None,
        detached: bool | None = False,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> dict[str, Any]:
        """Commit several transactions as one version (pylance's ``LanceDataset.commit_batch``):
        their appends merged into one Append. Returns ``{"dataset": ..., "merged": Transaction}``.

        Raises:
            BatchCommitError: no transactions, or one other than an Append.
            UnsupportedOperationError: ``detached``.
            CommitConflictError: a concurrent commit makes this one impossible.
        """
        merged = merge_appends(transactions)
        ds = Dataset.commit(
            dest, merged, None, commit_lock, storage_options, enable_v2_manifest_paths, detached, max_retries
        )
        return {"dataset": ds, "merged": merged}

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

    def migrate_manifest_paths_v2(self) -> None:
        """Rename the manifests to the V2 naming scheme (pylance's ``migrate_manifest_paths_v2``).
        Idempotent; must not run while other writers commit."""
        migrate_manifest_paths_v2(self._storage)

    @property
    def lance_schema(self) -> LanceSchema:
        """The schema with Lance field ids (pylance's ``LanceSchema``), as ``Project`` takes it."""
        return LanceSchema(self.manifest.fields, self.manifest.schema_metadata)

    def delete(
        self,
        predicate: Predicate,
        *,
        conflict_retries: int | None = None,
        retry_timeout: dt.timedelta = DEFAULT_RETRY_TIMEOUT,
        commit_message: str | None = None,
    ) -> dict[str, int]:
        """Delete the rows matching ``predicate`` (SQL or a pyarrow expression); the handle moves to
        the version committed. Returns pylance's ``{"num_deleted_rows": n}``.

        Only the predicate's columns are read. Each touched fragment gets a new cumulative deletion
        file; a fragment whose rows are all deleted is dropped. ``conflict_retries`` bounds the
        retries after a lost race (None: the handle's ``max_retries``); ``retry_timeout``, pylance's
        time bound on them, is accepted and not enforced.

        Raises:
            FilterError: the predicate does not parse.
            CommitConflictError: a concurrent commit makes this delete impossible.
        """
        done, deleted = delete_rows(self._snapshot, predicate, conflict_retries, commit_message)
        return self._committed(done, {"num_deleted_rows": deleted})

    # -- changing data and metadata in place (update, insert, truncate, config, metadata) ---------

    def update(
        self,
        updates: Mapping[str, str],
        where: Predicate | None = None,
        conflict_retries: int = update_ops.DEFAULT_CONFLICT_RETRIES,
        retry_timeout: dt.timedelta = update_ops.DEFAULT_RETRY_TIMEOUT,
        data_storage_version: str | None = None,
        *,
        commit_message: str | None = None,
    ) -> dict[str, int]:
        """Set columns to SQL values (``{"x": "x * 2"}``) in the rows matching ``where`` (all rows if
        None); the handle moves to the version committed. Returns ``{"num_rows_updated": n}``.

        As pylance's ``update``: the rows are written again into new fragments and deleted where
        they were, in one ``Update`` transaction; stable row ids stay; a conflict with a concurrent
        update or delete of the same fragments re-runs it, up to ``conflict_retries`` times within
        ``retry_timeout``. Values are cast to their column's type.

        Raises:
            TypeError: ``updates`` is not a dict of column names to SQL text.
            UpdateError: no columns, a nested field or a blob column named.
            ColumnNotFoundError: a column the dataset does not have.
            FilterError: a value or ``where`` does not compile, or a value cannot be cast.
            UnsupportedFormatError: ``data_storage_version`` is not the dataset's data format.
            CommitConflictError: the conflicts outlast the retries, or cannot be retried.
        """
        done, result = update_ops.update_rows(
            self._snapshot,
            updates,
            where,
            conflict_retries=conflict_retries,
            retry_timeout=retry_timeout,
            data_storage_version=data_storage_version,
            message=commit_message,
        )
        return self._committed(done, result)

    def insert(self, data: Any, *, mode: WriteMode = "append", **kwargs: Any) -> None:
        """Write ``data`` into this dataset (pylance's ``insert``: :func:`write_dataset` with
        ``mode``, ``"append"`` by default, and its other options); the handle moves to the version
        committed.

        Raises:
            as :func:`write_dataset`.
        """
        kwargs.setdefault("storage_options", self._storage.storage_options)
        self._committed(write_snapshot(data, self.uri, mode=mode, **kwargs))

    def truncate_table(self, *, commit_message: str | None = None) -> None:
        """Delete every row (one Delete of all fragments); the schema, config and indices stay and the
        handle moves to the version committed.

        Raises:
            CommitConflictError: a concurrent commit makes this one impossible.
        """
        self._committed(truncate(self._snapshot, commit_message))

    def config(self) -> dict[str, str]:
        """The dataset's config (key-value settings)."""
        return dict(self.manifest.config)

    @property
    def metadata(self) -> dict[str, str]:
        """The table metadata (key-value pairs)."""
        return dict(self.manifest.table_metadata)

    @property
    def schema_metadata(self) -> dict[str, str]:
        """The schema metadata, as text."""
        return config_ops.string_map(self.manifest.schema_metadata)

    def update_config(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set config keys (a None value removes one; ``replace`` drops every other key) in one
        ``UpdateConfig`` commit; the handle moves to it. Returns the config after.

        Raises:
            TypeError: keys or values other than strings (values may be None).
            CommitConflictError: a concurrent change of the same keys.
        """
        done = config_ops.update_config(self._snapshot, values, replace)
        return self._committed(done, dict(done.manifest.config))

    def delete_config_keys(self, keys: list[str]) -> None:
        """Remove config keys (missing ones are ignored); the handle moves to the version committed.

        Raises:
            TypeError: ``keys`` is not a list of strings.
        """
        self._committed(config_ops.delete_config_keys(self._snapshot, keys))

    def update_metadata(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set table metadata keys (None removes one; ``replace`` drops the others). Returns the
        table metadata after.

        Raises:
            TypeError: keys or values other than strings (values may be None).
        """
        done = config_ops.update_table_metadata(self._snapshot, values, replace)
        return self._committed(done, dict(done.manifest.table_metadata))

    def update_schema_metadata(
        self, values: Mapping[str, str | None], *, replace: bool = False
    ) -> dict[str, str]:
        """Set schema metadata keys (None removes one; ``replace`` drops the others). Returns the
        schema metadata after.

        Raises:
            TypeError: keys or values other than strings (values may be None).
            CommitConflictError: a concurrent change of the schema metadata.
        """
        done = config_ops.update_schema_metadata(self._snapshot, values, replace)
        return self._committed(done, config_ops.string_map(done.manifest.schema_metadata))

    def update_field_metadata(
        self, field_updates: Mapping[str, Mapping[str, str | None]], *, replace: bool = False
    ) -> None:
        """Set metadata keys of fields named by path (``"a"``, ``"s.x"``; None removes a key;
        ``replace`` drops a field's other keys), in one commit.

        Raises:
            TypeError: paths, keys or values other than strings (values may be None).
            FieldNotFoundError: a path names no field (also an OSError, as pylance's).
            CommitConflictError: a concurrent change of the same fields' metadata.
        """
        self._committed(config_ops.update_field_metadata(self._snapshot, field_updates, replace))

    def replace_schema_metadata(self, new_metadata: Mapping[str, str]) -> None:
        """Deprecated (as in pylance): ``update_schema_metadata(new_metadata, replace=True)``.

        Raises:
            as :meth:`update_schema_metadata`.
        """
        warnings.warn(
            "replace_schema_metadata is deprecated; use update_schema_metadata(metadata, replace=True)",
            DeprecationWarning,
            stacklevel=2,
        )
        self.update_schema_metadata(new_metadata, replace=True)

    def replace_field_metadata(self, field_name: str, new_metadata: Mapping[str, str]) -> None:
        """Deprecated (as in pylance): ``update_field_metadata({field_name: new_metadata}, replace=True)``.

        Raises:
            as :meth:`update_field_metadata`.
        """
        warnings.warn(
            "replace_field_metadata is deprecated; use update_field_metadata({path: metadata}, replace=True)",
            DeprecationWarning,
            stacklevel=2,
        )
        self.update_field_metadata({field_name: new_metadata}, replace=True)

    def restore(self, *, commit_message: str | None = None) -> None:
        """Make this (old) version the latest again, as a new version; the handle moves to it
        (pylance's ``restore``: returns None).

        Raises:
            VersionNotFoundError: this version has been cleaned up.
        """
        latest = self._snapshot.checkout()
        self._committed(latest.commit(plan_restore(self._snapshot, latest), message=commit_message))

    @property
    def optimize(self) -> DatasetOptimizer:
        """Compaction (pylance's ``ds.optimize``): ``ds.optimize.compact_files(...)``."""
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
    ) -> CompactionMetrics:
        """Shorthand for ``ds.optimize.compact_files(...)`` (see there): the handle moves to the
        version committed; returns pylance's compaction metrics.

        Raises:
            UnsupportedFormatError: the dataset has indices, or data files lance_table does not write.
            CommitConflictError: a concurrent delete or compaction touched the same fragments.
        """
        return self.optimize.compact_files(
            target_rows_per_fragment=target_rows_per_fragment,
            max_rows_per_group=max_rows_per_group,
            materialize_deletions=materialize_deletions,
            materialize_deletions_threshold=materialize_deletions_threshold,
            max_bytes_per_file=max_bytes_per_file,
            num_threads=num_threads,
            batch_size=batch_size,
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
    ) -> CleanupStats:
        """Delete versions older than ``older_than`` and not among the ``retain_versions`` newest
        (neither given: older than two weeks, as pylance), only those of ``versions`` if given,
        never the latest, never a tagged one, and the files only they reference; unreferenced files
        younger than ``grace_period`` stay unless ``delete_unverified``. ``dry_run=True`` returns
        what would be removed and removes nothing. ``delete_rate_limit`` and
        ``delete_concurrency`` tune pylance's engine and are accepted as no-ops.

        Raises:
            ValueError: ``retain_versions`` is not positive.
            TagError: a tagged version is older than the cutoff and ``error_if_tagged_old_versions``.
            CorruptFileError: a tag file is damaged; nothing is deleted.
        """
        return cleanup_old_versions(
            self._storage,
            older_than=older_than,
            retain_versions=retain_versions,
            only_versions=versions,
            grace_period=grace_period,
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
            dry_run=dry_run,
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


Dataset = LanceDataset  # the name lance_table used first

__all__ = ["Dataset", "LanceDataset"]
