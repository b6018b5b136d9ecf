"""The Dataset handle (a thin facade over one snapshot) and the entry points ``dataset()`` and
``write_dataset()``.

A handle is pinned to one version and never changes. Every write goes through the one commit path
and returns a handle on the version it made: that is decided once, in :meth:`Dataset._committed`.
"""

from __future__ import annotations

import datetime as dt
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import DatasetNotFoundError, UnsupportedOperationError
from lance_table.format.manifest import Manifest
from lance_table.format.transaction import Overwrite as OverwriteOp
from lance_table.storage import Storage, open_storage
from lance_table.table import index_list, versions
from lance_table.table import scanner as scans
from lance_table.table.blobs import BlobFile, take_blobs
from lance_table.table.commit import CommitLock, CommitOptions, check_can_commit, commit
from lance_table.table.commit.protocol import DEFAULT_MAX_RETRIES
from lance_table.table.fragment_metadata import FragmentMetadata
from lance_table.table.index_list import IndexDescription
from lance_table.table.lance_fragment import LanceFragment, fragment_of
from lance_table.table.lance_operation import LanceOperation, Transaction
from lance_table.table.lance_schema import LanceSchema
from lance_table.table.operations.cleanup import (
    DEFAULT_GRACE_PERIOD,
    DEFAULT_OLDER_THAN,
    CleanupStats,
    cleanup_old_versions,
)
from lance_table.table.operations.commit_operation import commit_operation
from lance_table.table.operations.compaction import DEFAULT_TARGET_ROWS, compact_files
from lance_table.table.operations.delete import plan_delete
from lance_table.table.operations.manifest_paths import (
    DEFAULT_V2_MANIFEST_PATHS,
    migrate_manifest_paths_v2,
    scheme_for_new_dataset,
)
from lance_table.table.operations.restore import plan_restore
from lance_table.table.operations.transactions import (
    DEFAULT_RECENT_TRANSACTIONS,
    get_transactions,
    merge_appends,
    read_transaction,
)
from lance_table.table.operations.write import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    ProgressCallback,
    WriteMode,
    prepare_write,
    write_fragments,
)
from lance_table.table.scan import Predicate
from lance_table.table.scan_spec import Columns, scan_spec
from lance_table.table.scanner import LanceScanner
from lance_table.table.snapshot import Snapshot, load
from lance_table.table.tags import Tags


class Dataset:
    """One version of a Lance dataset. It never changes: writes return a new handle.

    Open with :func:`lance_table.dataset`; create with :func:`lance_table.write_dataset`.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def _committed(self, snapshot: Snapshot) -> Dataset:
        """The handle a write returns: on the version it committed (as pylance does)."""
        return Dataset(snapshot)

    @property
    def _storage(self) -> Storage:
        return self._snapshot.storage

    # -- identity ---------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self._snapshot.uri

    @property
    def version(self) -> int:
        """The version this handle is pinned to."""
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
        """Another version (or tag) of the same dataset.

        Raises:
            VersionNotFoundError: the version does not exist.
            TagError: the tag does not exist.
        """
        return Dataset(self._snapshot.checkout(version))

    def checkout_latest(self) -> Dataset:
        """The newest version (this handle stays pinned)."""
        return Dataset(self._snapshot.checkout())

    @property
    def tags(self) -> Tags:
        return Tags(self._storage)

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

    def delete(self, predicate: Predicate, *, commit_message: str | None = None) -> Dataset:
        """Delete the rows matching ``predicate``; returns the new version.

        Only the predicate's columns are read. Each touched fragment gets a new cumulative deletion
        file; a fragment whose rows are all deleted is dropped.

        Raises:
            FilterError: the predicate does not parse.
            CommitConflictError: a concurrent commit makes this delete impossible.
        """
        versions.check_writable(self.manifest, self.uri)
        check_can_commit(self._snapshot.commit_options, self._storage)
        pending = plan_delete(self._snapshot, predicate)
        return self._committed(self._snapshot.commit(pending, message=commit_message))

    def restore(self, *, commit_message: str | None = None) -> Dataset:
        """Make this (old) version the latest again, as a new version.

        Raises:
            VersionNotFoundError: this version has been cleaned up.
        """
        latest = self._snapshot.checkout()
        return self._committed(latest.commit(plan_restore(self._snapshot, latest), message=commit_message))

    def compact_files(
        self,
        *,
        target_rows_per_fragment: int = DEFAULT_TARGET_ROWS,
        max_rows_per_group: int = 1024,
        materialize_deletions: bool = True,
        materialize_deletions_threshold: float = 0.1,
        max_bytes_per_file: int | None = None,
        num_threads: int | None = None,
        batch_size: int | None = None,
        defer_index_remap: bool | None = None,
    ) -> Dataset:
        """Rewrite small fragments (and fragments with many deletions) into larger ones.

        Like pylance, commits two versions (a fragment id reservation, then the rewrite) and returns
        the second, or this handle when there is nothing to compact. ``max_rows_per_group``,
        ``num_threads`` and ``batch_size`` are accepted for pylance compatibility.

        Indices stay valid as with pylance's ``defer_index_remap=True``: moved indexed rows are
        recorded in pylance's fragment reuse index (lance_table does not rewrite index files);
        with stable row ids the index coverage moves to the new fragments.

        Raises:
            UnsupportedFormatError: data files lance_table does not write.
            CorruptFileError: the dataset's fragment reuse index does not parse.
            CommitConflictError: a concurrent delete or compaction touched the same fragments.
        """
        result = compact_files(
            self._snapshot,
            target_rows_per_fragment=target_rows_per_fragment,
            max_rows_per_group=max_rows_per_group,
            materialize_deletions=materialize_deletions,
            materialize_deletions_threshold=materialize_deletions_threshold,
            max_bytes_per_file=max_bytes_per_file,
            num_threads=num_threads,
            batch_size=batch_size,
            defer_index_remap=defer_index_remap,
        )
        return self if result is self._snapshot else self._committed(result)

    def cleanup_old_versions(
        self,
        older_than: dt.timedelta = DEFAULT_OLDER_THAN,
        *,
        grace_period: dt.timedelta = DEFAULT_GRACE_PERIOD,
        delete_unverified: bool = False,
        error_if_tagged_old_versions: bool = True,
    ) -> CleanupStats:
        """Delete versions older than ``older_than`` (never the latest, never a tagged one) and the
        files only they reference; unreferenced files younger than ``grace_period`` stay unless
        ``delete_unverified``.

        Raises:
            TagError: a tagged version is older than the cutoff and ``error_if_tagged_old_versions``.
            CorruptFileError: a tag file is damaged; nothing is deleted.
        """
        return cleanup_old_versions(
            self._storage,
            older_than=older_than,
            grace_period=grace_period,
            delete_unverified=delete_unverified,
            error_if_tagged_old_versions=error_if_tagged_old_versions,
        )

    # -- indices (read from the manifest; lance_table builds none) ---------------------------------

    def describe_indices(self) -> list[IndexDescription]:
        """The indices of this version as pylance describes them (name, type, fields, segments with
        the fragments each covers, rows indexed), read from the manifest alone."""
        return index_list.describe_indices(self.manifest)

    def list_indices(self) -> list[dict[str, Any]]:
        """One dict per index segment, as pylance's deprecated ``list_indices`` gives them (and, like
        it, with a DeprecationWarning pointing at :meth:`describe_indices`)."""
        warnings.warn(
            "The 'list_indices' method is deprecated. Use describe_indices() instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return index_list.list_indices(self.manifest)

    @property
    def has_index(self) -> bool:
        """Whether this version has any index."""
        return bool(index_list.describe_indices(self.manifest))

    def create_index(
        self, column: str | list[str], index_type: str, name: str | None = None, **kwargs: Any
    ) -> None:
        """Not supported: lance_table does not build indices (build them with pylance).

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(index_list.unsupported("create_index"))

    def create_scalar_index(
        self, column: str, index_type: str, name: str | None = None, **kwargs: Any
    ) -> None:
        """Not supported: lance_table does not build indices (build them with pylance).

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(index_list.unsupported("create_scalar_index"))

    def drop_index(self, name: str) -> None:
        """Not supported yet: lance_table does not write index transactions.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(index_list.unsupported("drop_index"))

    def index_statistics(self, index_name: str) -> dict[str, Any]:
        """Not supported: index statistics need the index files, which lance_table does not read.

        Raises:
            UnsupportedOperationError: always.
        """
        raise UnsupportedOperationError(index_list.unsupported("index_statistics"))


def dataset(
    uri: str | os.PathLike[str],
    *,
    version: int | str | None = None,
    asof: dt.datetime | None = None,
    storage_options: Mapping[str, Any] | None = None,
    commit_lock: CommitLock | None = None,
    unsafe_commit: bool = False,
) -> Dataset:
    """Open a dataset at its latest version, a version number, a tag, or the version current at ``asof``.

    Raises:
        DatasetNotFoundError: there is no dataset at ``uri``.
        VersionNotFoundError: the version or time does not resolve.
        TagError: the tag does not exist.
        UnsupportedFormatError: the dataset needs features lance_table does not have.
        StorageOptionsError: a storage option is unknown, unsafe or has a bad value.
    """
    storage = open_storage(uri, storage_options)
    options = CommitOptions(commit_lock=commit_lock, unsafe_commit=unsafe_commit)
    return Dataset(load(storage, version, asof, options))


def write_dataset(
    data: Any,
    uri: str | os.PathLike[str],
    *,
    mode: WriteMode = "create",
    schema: pa.Schema | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    storage_options: Mapping[str, Any] | None = None,
    commit_message: str | None = None,
    commit_lock: CommitLock | None = None,
    unsafe_commit: bool = False,
    max_retries: int | None = None,
    progress: ProgressCallback | None = None,
    data_storage_version: str | None = None,
    enable_v2_manifest_paths: bool = DEFAULT_V2_MANIFEST_PATHS,
    enable_stable_row_ids: bool = False,
    transaction_properties: Mapping[str, str] | None = None,
) -> Dataset:
    """Write data as a new dataset, or append to / overwrite an existing one, in one atomic commit.

    ``data`` may be anything pylance takes (a pyarrow Table, RecordBatch, RecordBatchReader, Dataset
    or Scanner, a pandas or Polars DataFrame, a dict of columns, a list of row dicts, an iterable of
    RecordBatches, a dataset or scanner of either library) or an object with ``__arrow_c_stream__``;
    ``schema`` casts it (see :func:`~lance_table.table.operations.inputs.coerce_reader`). Rows are
    streamed: memory stays bounded whatever the size, and a new data file (fragment) is started every
    ``max_rows_per_file`` rows or ``max_bytes_per_file`` bytes. An append may leave out nullable
    columns: they read as nulls, as in pylance.

    ``data_storage_version`` chooses the data file format of a new dataset or of an overwrite
    (``"2.0"``, ``"2.1"``, ``"2.2"``, ``"stable"``, ``"legacy"``, ``"next"``, as pylance names them);
    an append keeps the dataset's format.

    ``enable_v2_manifest_paths`` (manifest names of a new dataset) and ``enable_stable_row_ids``
    (a new dataset whose rows keep their ids through compaction) apply when the dataset is created
    and are ignored for an existing one, as in pylance. ``transaction_properties`` are stored in
    the transaction (``commit_message`` under its own key, taking precedence).

    Raises:
        InputTypeError: the data is of no kind a write takes (also a TypeError).
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        SchemaError: the data does not match the dataset's schema (append) or cannot be stored.
        UnsupportedFormatError: the dataset uses a data format or features lance_table cannot write.
        CommitConflictError: a concurrent commit makes this write impossible.
        StorageOptionsError: a storage option is unknown, unsafe or has a bad value.
    """
    storage = open_storage(uri, storage_options)
    options = CommitOptions(
        commit_lock=commit_lock,
        unsafe_commit=unsafe_commit,
        **({"max_retries": max_retries} if max_retries is not None else {}),
    )
    check_can_commit(options, storage)
    try:
        latest: Snapshot | None = load(storage)
    except DatasetNotFoundError:
        latest = None
    base = latest.manifest if latest is not None else None
    plan, reader = prepare_write(base, mode, data, schema, storage.uri, data_storage_version)
    frags, written, dictionaries = write_fragments(
        storage,
        reader,
        plan.schema,
        list(plan.fields),
        max_rows_per_file=max_rows_per_file,
        max_bytes_per_file=max_bytes_per_file,
        progress=progress,
        data_format=plan.data_format,
        dictionaries=plan.dictionaries,
    )
    scheme = latest.scheme if latest is not None else scheme_for_new_dataset(enable_v2_manifest_paths)
    pending = plan.pending(frags, written, dictionaries)
    if enable_stable_row_ids and isinstance(pending.operation, OverwriteOp):
        pending = replace(pending, operation=replace(pending.operation, stable_row_ids=True))
    manifest = commit(
        storage,
        base,
        pending,
        options=options,
        properties=dict(transaction_properties or {}),
        message=commit_message,
        create_only=base is None and mode == "create",
        scheme=scheme,
    )
    return Dataset(Snapshot(storage, manifest, scheme, options))


__all__ = ["Dataset", "dataset", "write_dataset"]
