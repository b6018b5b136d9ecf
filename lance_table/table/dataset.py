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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_table.format.bases import DatasetBasePath
from lance_table.table import versions
from lance_table.table.branch_checkout import checkout_reference
from lance_table.table.commit import CommitLock
from lance_table.table.commit.protocol import DEFAULT_COMMIT_TIMEOUT, DEFAULT_MAX_RETRIES
from lance_table.table.commit.retry import DEFAULT_CONFLICT_RETRIES, DEFAULT_RETRY_TIMEOUT
from lance_table.table.dataset_arrow import _ArrowDataset
from lance_table.table.dataset_branches import _Branching
from lance_table.table.dataset_history import _History
from lance_table.table.dataset_indices import _Indices
from lance_table.table.dataset_maintenance import _Maintenance
from lance_table.table.dataset_meta import _Metadata
from lance_table.table.dataset_models import _Models
from lance_table.table.dataset_read import _Reading
from lance_table.table.dataset_schema import _SchemaEvolution
from lance_table.table.lance_operation import LanceOperation, Transaction
from lance_table.table.lance_schema import LanceSchema
from lance_table.table.opening import handle_state, open_snapshot, refuse, scan_defaults, snapshot_of_state
from lance_table.table.operations.delete import delete_rows
from lance_table.table.progress import Progress
from lance_table.table.scan import Predicate
from lance_table.table.session import apply_cache_limits
from lance_table.table.snapshot import Snapshot
from lance_table.table.tags import Tags

if TYPE_CHECKING:
    from lance_table.table.operations.merge_insert import MergeInsertBuilder
    from lance_table.table.operations.write import WriteMode


class LanceDataset(
    _Reading,
    _Metadata,
    _Maintenance,
    _SchemaEvolution,
    _Indices,
    _History,
    _Branching,
    _Models,
    _ArrowDataset,
):
    """A Lance dataset, read at one version (pylance's ``LanceDataset``; a ``pyarrow.dataset.Dataset``
    that DuckDB, Polars and pyarrow read with projection and filter pushdown, see
    :mod:`lance_table.table.dataset_arrow`).

    A write through the handle (``delete``, ``restore``, ``optimize.compact_files``, ...) moves it to
    the version it committed, as in pylance. Open with :func:`lance_table.dataset`; create with
    :func:`lance_table.write_dataset`.

    Example:
        ```python
        ds = lt.dataset(uri)
        print(ds.version, ds.count_rows(), ds.schema)
        ds.delete("kind = 'view'")  # the handle moves to the version the delete committed
        old = ds.checkout_version(1)  # another handle, on version 1
        ```
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
                "namespace_client": namespace_client,
                "table_id": table_id,
                "namespace_client_managed_versioning": namespace_client_managed_versioning,
            },
            unset={"namespace_client_managed_versioning": False},
        )
        self._snapshot = open_snapshot(
            uri,
            version,
            storage_options=storage_options,
            commit_lock=commit_lock,
            serialized_manifest=serialized_manifest,
            base_store_params=base_store_params,
        )
        apply_cache_limits(self._snapshot.storage, metadata_cache_size_bytes, session)
        self._default_scan_options = scan_defaults(default_scan_options)

    def __getstate__(self) -> dict[str, Any]:
        """A handle pickles as its URI, storage options, version and manifest (as pylance's)."""
        return handle_state(self._snapshot)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Open exactly the pickled version, without listing the store."""
        self._snapshot = snapshot_of_state(state)

    def __copy__(self) -> LanceDataset:
        return self._carry(LanceDataset(self._snapshot))

    # -- identity ---------------------------------------------------------------------------------

    @property
    def latest_version(self) -> int:
        """The newest version in storage right now."""
        return versions.latest_entry(self._storage).version

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of this version (with ``default_scan_options``, of what a scan
        returns, as in pylance)."""
        if self._default_scan_options:
            return self.scanner().projected_schema
        return self._snapshot.schema

    @property
    def data_storage_version(self) -> str | None:
        """The data file format of this version ("0.1", "2.0", "2.1", "2.2"), as pylance names it."""
        return self.manifest.data_storage_version

    def __repr__(self) -> str:
        return f"Dataset({self.uri!r}, version={self.version}, rows={self.count_rows()})"

    # -- versions ---------------------------------------------------------------------------------

    def versions(self) -> list[dict[str, Any]]:
        """Every version: number, timestamp (naive UTC), operation and commit message."""
        return versions.history(self._storage)

    def checkout(self, version: int | str | tuple[str | None, int | None]) -> Dataset:
        """Another handle on a version (or tag) of the same dataset, or ``(branch, version)`` of a
        branch (None: main; its latest version); this one stays where it is.

        Raises:
            VersionNotFoundError: the version does not exist.
            TagError: the tag does not exist.
            BranchError: the branch does not exist.
        """
        return self._carry(Dataset(checkout_reference(self._snapshot, version)))

    def checkout_version(self, version: int | str | tuple[str | None, int | None]) -> Dataset:
        """Another handle on a version (or tag) of the same dataset, or ``(branch, version)`` of a
        branch, as pylance's ``checkout_version``; this one stays where it is.

        Raises:
            VersionNotFoundError: the version does not exist.
            TagError: the tag does not exist.
            BranchError: the branch does not exist.
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
        """The dataset's tags (names for versions, shared by all its branches): ``list()``,
        ``create``, ``update``, ``delete``; on a branch handle a version number names the branch's."""
        return Tags(self._storage, self.version)

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
        namespace_client: Any = None,
        table_id: Sequence[str] | None = None,
        namespace_client_managed_versioning: bool = False,
        base_store_params: Mapping[str, Mapping[str, Any]] | None = None,
        commit_timeout: dt.timedelta | None = DEFAULT_COMMIT_TIMEOUT,
    ) -> Dataset:
        """Commit an operation built by hand (pylance's ``LanceDataset.commit``), typically fragments
        written by :func:`lance_table.fragment.write_fragments` on workers; returns the new version.

        ``enable_v2_manifest_paths`` and ``enable_stable_row_ids`` apply to a dataset this commit
        creates (an Overwrite of nothing); they are ignored for an existing one, as in pylance.
        ``base_store_params``: storage options of other base paths (see :func:`dataset`); a
        handle's are used when it is not given.

        ``detached``: the new version is detached, as in pylance: a random number with the top
        bit set, outside the version line (never the latest, not in ``versions()``), opened with
        :meth:`checkout_version`; ``read_version`` may be another detached version.

        ``commit_timeout`` (pylance's bound on the time a commit and its retries take) is
        accepted: a commit here is bounded by ``max_retries``. Namespaces (``namespace_client``,
        ``table_id``) are not supported.

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
            UnsupportedOperationError: a LanceOperation lance_table does not commit.
            DetachedCommitError: ``detached`` on a dataset with V1 manifest names or on no dataset;
                an attached commit whose ``read_version`` is a detached version.
            DatasetNotFoundError: no dataset at ``base_uri`` (except for an Overwrite).
            VersionNotFoundError: ``read_version`` does not exist.
            DataFileNotFoundError: a fragment's data file is not in the dataset.
            BasePathError: a data file names a base id the dataset does not register, or an
                Overwrite of an existing dataset has ``initial_bases``.
            SchemaError: the fragments disagree with the schema; a Project's or Merge's field ids
                or types disagree with the dataset's.
            CommitConflictError: a concurrent commit makes this one impossible.
            UnsupportedOptionError: ``namespace_client``, ``table_id`` or
                ``namespace_client_managed_versioning`` is set.
        """
        from lance_table.table.operations.commit_operation import commit_operation, commit_storage

        namespace = {"namespace_client": namespace_client, "table_id": table_id}
        namespace["namespace_client_managed_versioning"] = namespace_client_managed_versioning
        refuse("commit", namespace, unset={"namespace_client_managed_versioning": False})
        target = base_uri._snapshot if isinstance(base_uri, Dataset) else base_uri
        storage, opts = commit_storage(target, storage_options, base_store_params)
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
                detached=bool(detached),
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
        base_store_params: Mapping[str, Mapping[str, Any]] | None = None,
        commit_timeout: dt.timedelta | None = DEFAULT_COMMIT_TIMEOUT,
    ) -> dict[str, Any]:
        """Commit several transactions as one version (pylance's ``LanceDataset.commit_batch``):
        their appends merged into one Append. Returns ``{"dataset": ..., "merged": Transaction}``.
        Options as :meth:`commit`'s (``commit_timeout`` accepted, as there).

        Raises:
            BatchCommitError: no transactions, or one other than an Append.
            DetachedCommitError: ``detached`` on a dataset with V1 manifest names.
            CommitConflictError: a concurrent commit makes this one impossible.
        """
        from lance_table.table.operations.transactions import merge_appends

        merged = merge_appends(transactions)
        ds = Dataset.commit(
            dest,
            merged,
            None,
            commit_lock,
            storage_options,
            enable_v2_manifest_paths,
            detached,
            max_retries,
            base_store_params=base_store_params,
        )
        return {"dataset": ds, "merged": merged}

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
            FilterEvaluationError: the predicate fails on the rows (a division by zero); also an
                OSError, as pylance raises.
            CommitConflictError: a concurrent commit makes this delete impossible.
        """
        done, deleted = delete_rows(self._snapshot, predicate, conflict_retries, commit_message)
        return self._committed(done, {"num_deleted_rows": deleted})

    # -- changing data and metadata in place (update, insert, truncate, config, metadata) ---------

    def update(
        self,
        updates: Mapping[str, str],
        where: Predicate | None = None,
        conflict_retries: int = DEFAULT_CONFLICT_RETRIES,
        retry_timeout: dt.timedelta = DEFAULT_RETRY_TIMEOUT,
        data_storage_version: str | None = None,
        *,
        commit_message: str | None = None,
        progress: Progress = None,
    ) -> dict[str, int]:
        """Set columns to SQL values (``{"x": "x * 2"}``) in the rows matching ``where`` (all rows if
        None); the handle moves to the version committed. Returns ``{"num_rows_updated": n}``.

        As pylance's ``update``: the rows are written again into new fragments and deleted where
        they were, in one ``Update`` transaction; stable row ids stay; a conflict with a concurrent
        update or delete of the same fragments re-runs it, up to ``conflict_retries`` times within
        ``retry_timeout``. Values are cast to their column's type. ``progress`` (lance_table's):
        a bar on stderr when it is a terminal (None, the default; needs tqdm), always (True) or
        never (False), or a callable receiving :class:`~lance_table.progress.ProgressEvent`
        records (phases ``scan`` and ``write``).

        Raises:
            TypeError: ``updates`` is not a dict of column names to SQL text.
            UpdateError: no columns, a nested field or a blob column named.
            ColumnNotFoundError: a column the dataset does not have.
            FilterError: a value or ``where`` does not compile, or a value cannot be cast.
            UnsupportedFormatError: ``data_storage_version`` is not the dataset's data format.
            CommitConflictError: the conflicts outlast the retries, or cannot be retried.
            InputTypeError: ``progress`` is of no kind taken.
            UpdateEvaluationError: a value or ``where`` fails on the rows (a division by zero);
                an OSError, as pylance's, and pyarrow's ``ArrowInvalid``.
        """
        from lance_table.table.operations import update as update_ops

        done, result = update_ops.update_rows(
            self._snapshot,
            updates,
            where,
            conflict_retries=conflict_retries,
            retry_timeout=retry_timeout,
            data_storage_version=data_storage_version,
            message=commit_message,
            progress=progress,
        )
        return self._committed(done, result)

    def insert(self, data: Any, *, mode: WriteMode = "append", **kwargs: Any) -> None:
        """Write ``data`` into this dataset (pylance's ``insert``: :func:`write_dataset` with
        ``mode``, ``"append"`` by default, and its other options); the handle moves to the version
        committed.

        Raises:
            as :func:`write_dataset`.
        """
        from lance_table.table.operations.write_dataset import write_snapshot

        kwargs.setdefault("storage_options", self._storage.storage_options)
        self._committed(write_snapshot(data, self.uri, mode=mode, **kwargs))

    def merge_insert(self, on: str | Iterable[str] | None = None) -> MergeInsertBuilder:
        """A builder for a merge_insert (upsert, insert-if-absent, replace a range) joining source
        rows to this dataset's rows on ``on`` (a column or several; None: the dataset's
        unenforced primary key), as pylance's ``merge_insert``.

        Raises:
            MergeInsertError: no join keys, or a key column the dataset does not have.
        """
        from lance_table.table.operations.merge_insert import MergeInsertBuilder

        return MergeInsertBuilder(self, on)

    def truncate_table(self, *, commit_message: str | None = None) -> None:
        """Delete every row (one Delete of all fragments); the schema, config and indices stay and the
        handle moves to the version committed.

        Raises:
            CommitConflictError: a concurrent commit makes this one impossible.
        """
        from lance_table.table.operations.truncate import truncate

        self._committed(truncate(self._snapshot, commit_message))

    # -- base paths (multi-base datasets) ----------------------------------------------------------

    def base_paths(self) -> dict[int, DatasetBasePath]:
        """The base paths this version registers, by id (pylance's ``base_paths``): places data
        files may live besides the dataset's own directory. Empty for most datasets.

        Example:
            ```python
            for base_id, base in ds.base_paths().items():
                print(base_id, base.name, base.path, base.is_dataset_root)
            ```
        """
        return dict(self._snapshot.bases)

    def add_bases(
        self, new_bases: Sequence[DatasetBasePath], transaction_properties: Mapping[str, str] | None = None
    ) -> LanceDataset:
        """Register more base paths (pylance's ``add_bases``), which writes may then target by name
        or path (``write_dataset(..., target_bases=[...])``); the handle moves to the version
        committed and is returned. Bases without an id get the next free ids.

        Raises:
            TypeError: ``new_bases`` holds something else than :class:`DatasetBasePath`.
            BasePathError: a new base's name, path or id is already registered (also a ValueError,
                as pylance raises).
            CommitConflictError: a concurrent commit makes this one impossible.
        """
        from lance_table.table.operations import write_bases

        return self._committed(write_bases.add_bases(self._snapshot, new_bases, transaction_properties), self)

    def shallow_clone(
        self,
        target_path: str | os.PathLike[str],
        reference: int | str | tuple[str | None, int | None],
        storage_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> LanceDataset:
        """Clone version ``reference`` (a number, a tag, or ``(branch, version)``) into a new dataset
        at ``target_path`` that references this dataset's files instead of copying them
        (pylance's ``shallow_clone``); returns the clone, opened with ``kwargs``. The clone takes
        writes; its new files go to its own directory (see
        :mod:`lance_table.table.operations.clone`). ``storage_options``: the clone's (this
        dataset's by default).

        Raises:
            VersionNotFoundError, TagError: the reference does not resolve.
            DatasetAlreadyExistsError: a dataset exists at ``target_path``.
            BranchError: the reference names a branch that does not exist.
        """
        from lance_table.table.operations import clone

        options = self._storage.storage_options if storage_options is None else storage_options
        clone.shallow_clone(self._snapshot, target_path, reference, options)
        return LanceDataset(os.fspath(target_path), storage_options=options, **kwargs)

    @property
    def _ds(self) -> LanceDataset:
        """pylance's handle on its native dataset, which ported code (and pylance's own tests) call
        ``base_paths()`` and the like through: here, the handle itself."""
        return self


Dataset = LanceDataset  # the name lance_table used first

__all__ = ["Dataset", "LanceDataset"]
