"""The entry points ``dataset()`` (open) and ``write_dataset()`` (create, append, overwrite), with
pylance's parameters in pylance's order."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_table.table.commit import CommitLock
from lance_table.table.dataset import Dataset, LanceDataset
from lance_table.table.opening import open_snapshot, refuse, scan_defaults
from lance_table.table.operations.manifest_paths import (
    DEFAULT_V2_MANIFEST_PATHS,
)
from lance_table.table.operations.write_plan import DEFAULT_MAX_BYTES_PER_FILE, DEFAULT_MAX_ROWS_PER_FILE
from lance_table.table.progress import Progress
from lance_table.table.session import apply_cache_limits

if TYPE_CHECKING:
    from lance_table.table.operations.write import WriteMode


def dataset(
    uri: str | os.PathLike[str] | None = None,
    version: int | str | None = None,
    asof: dt.datetime | str | None = None,
    block_size: int | None = None,
    commit_lock: CommitLock | None = None,
    index_cache_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    default_scan_options: Mapping[str, Any] | None = None,
    metadata_cache_size_bytes: int | None = None,
    index_cache_size_bytes: int | None = None,
    read_params: Mapping[str, Any] | None = None,
    session: Any = None,
    namespace_client: Any = None,
    table_id: Sequence[str] | None = None,
    base_store_params: Mapping[str, Any] | None = None,
    *,
    unsafe_commit: bool = False,
) -> Dataset:
    """Open a dataset at its latest version, a version number, a tag, or the version current at
    ``asof`` (pylance's ``lance.dataset``, its parameters in its order).

    ``asof``: a datetime (a naive one is local time, as in pylance; an aware one is converted) or
    an ISO string; the newest version committed at or before it. ``block_size``,
    ``index_cache_size``, ``index_cache_size_bytes``, ``read_params`` and ``session`` tune
    pylance's engine and are accepted as no-ops, but ``metadata_cache_size_bytes=0`` (or a
    ``Session`` made with it) makes the handle cache no file metadata (see
    :mod:`lance_table.table.session`).
    ``default_scan_options``: scan options (``with_row_id``, ``columns``, ``filter``, ...) every
    scan of the handle starts from (and its ``schema`` shows), as in pylance.
    ``unsafe_commit`` (lance_table's) allows commits on a store without atomic create-if-absent.
    ``base_store_params``: storage options of other base paths, by base path URI exactly as
    registered (the dataset's ``storage_options`` are used for a base not named; see
    :mod:`lance_table.table.base_storage`); the handle keeps them, pickled too.

    Raises:
        DatasetNotFoundError: there is no dataset at ``uri`` (also a ValueError, as in pylance).
        VersionNotFoundError: the version or time does not resolve.
        TagError: the tag does not exist.
        UnsupportedOptionError: ``namespace_client`` or ``table_id`` is set.
        TypeError: ``default_scan_options`` is not a dict (its options are checked by each scan).
        UnsupportedFormatError: the dataset needs features lance_table does not have.
        StorageOptionsError: a storage option is unknown, unsafe or has a bad value.

    Example:
        ```python
        latest = lt.dataset(uri)
        first = lt.dataset(uri, version=1)
        now = lt.dataset(uri, asof=datetime.datetime.now())  # the version current at a time
        ```
    """
    refuse(
        "dataset",
        {
            "namespace_client": namespace_client,
            "table_id": table_id,
        },
    )
    defaults = scan_defaults(default_scan_options)
    if uri is None:
        raise ValueError("dataset() needs a uri (namespaces are not supported)")
    snapshot = open_snapshot(
        uri,
        version,
        asof,
        storage_options=storage_options,
        commit_lock=commit_lock,
        unsafe_commit=unsafe_commit,
        base_store_params=base_store_params,
    )
    apply_cache_limits(snapshot.storage, metadata_cache_size_bytes, session)
    handle = Dataset(snapshot)
    handle._default_scan_options = defaults
    return handle


def write_dataset(
    data_obj: Any,
    uri: str | os.PathLike[str] | Dataset | None = None,
    schema: pa.Schema | None = None,
    mode: WriteMode = "create",
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = 1024,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    data_cache_bytes: int | None = None,
    max_page_bytes: int | None = None,
    commit_lock: CommitLock | None = None,
    progress: Progress = None,
    storage_options: Mapping[str, Any] | None = None,
    data_storage_version: str | None = None,
    use_legacy_format: bool | None = None,
    enable_v2_manifest_paths: bool = DEFAULT_V2_MANIFEST_PATHS,
    enable_stable_row_ids: bool = False,
    auto_cleanup_options: Mapping[str, Any] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    initial_bases: Sequence[Any] | None = None,
    target_bases: Sequence[str] | None = None,
    target_all_bases: bool | None = None,
    base_store_params: Mapping[str, Any] | None = None,
    external_blob_mode: str = "reference",
    allow_external_blob_outside_bases: bool = False,
    blob_pack_file_size_threshold: int | None = None,
    namespace_client: Any = None,
    table_id: Sequence[str] | None = None,
    session: Any = None,
    unsafe_commit: bool = False,
    max_retries: int | None = None,
) -> Dataset:
    """Write data as a new dataset, or append to / overwrite an existing one, in one atomic commit
    (pylance's ``lance.write_dataset``, its parameters in its order).

    ``data_obj`` may be anything pylance takes (a pyarrow Table, RecordBatch, RecordBatchReader, Dataset
    or Scanner, a pandas or Polars DataFrame, a dict of columns, a list of row dicts, an iterable of
    RecordBatches, a dataset or scanner of either library) or an object with ``__arrow_c_stream__``;
    ``schema`` casts it (see :func:`~lance_table.table.operations.inputs.coerce_reader`). Rows are
    streamed: memory stays bounded whatever the size, and a new data file (fragment) is started every
    ``max_rows_per_file`` rows or ``max_bytes_per_file`` bytes. An append may leave out nullable
    columns: they read as nulls, as in pylance.

    ``data_storage_version`` chooses the data file format of a new dataset or of an overwrite
    (``"2.0"``, ``"2.1"``, ``"2.2"``, ``"stable"``, ``"legacy"``, ``"next"``, as pylance names them;
    ``use_legacy_format``, pylance's older switch, picks ``"legacy"`` or ``"stable"``); an append
    keeps the dataset's format. ``max_rows_per_group``, ``data_cache_bytes``, ``max_page_bytes``,
    ``blob_pack_file_size_threshold`` and ``session`` tune pylance's engine and are accepted as
    no-ops. ``unsafe_commit`` and ``max_retries`` are lance_table's.

    ``enable_v2_manifest_paths`` (manifest names of a new dataset) and ``enable_stable_row_ids``
    (a new dataset whose rows keep their ids through compaction) apply when the dataset is created
    and are ignored for an existing one, as in pylance. ``transaction_properties`` are stored in
    the transaction (``commit_message`` under its own key, taking precedence).
    ``auto_cleanup_options`` (pylance's ``AutoCleanupConfig``) turns on automatic cleanup of a
    new dataset (see :mod:`lance_table.table.operations.auto_cleanup`); ignored for an existing one.

    Multi-base datasets, as in pylance: ``initial_bases`` (:class:`~lance_table.DatasetBasePath`)
    are registered by the write that creates the dataset (``add_bases`` registers more later);
    ``target_bases`` (base names, else base paths as registered) or ``target_all_bases`` (every
    base, the dataset's own directory first when True) choose where new data files go, one file
    each in turn; without them new files go to the dataset's own directory. See
    :mod:`lance_table.table.operations.write_bases`. ``base_store_params`` gives bases on other
    stores their own storage options (by base path URI, never stored), as in :func:`dataset`;
    the handle returned keeps them. Blob v2 values given as external URIs (pylance's
    ``blob_array`` of URIs or ``Blob.from_uri``) are stored as references, as pylance stores
    them: relative to the deepest registered base path they lie below (not a dataset root), else,
    with ``allow_external_blob_outside_bases``, as absolute URIs (see
    :func:`~lance_table.table.blob_locations.external_reference`).

    ``progress``: a bar on stderr when it is a terminal (None, the default; needs tqdm, the
    ``progress`` extra), always (True) or never (False); a callable receiving
    :class:`~lance_table.progress.ProgressEvent` records; or, as in pylance, a
    :class:`~lance_table.progress.FragmentWriteProgress` told of each data file begun and complete.

    Raises:
        InputTypeError: the data is of no kind a write takes, or ``progress`` of no kind taken
            (also a TypeError).
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        SchemaError: the data does not match the dataset's schema (append) or cannot be stored.
        UnsupportedFormatError: the dataset uses a data format or features lance_table cannot write.
        BasePathError: ``initial_bases`` for an existing dataset, bases that collide (one name,
            path or id twice), a ``target_bases`` reference that names no base, or
            ``target_all_bases`` with ``target_bases`` (also a ValueError and an OSError).
        UnsupportedOptionError: ``external_blob_mode="ingest"`` or a namespace.
        BlobLocationError: a blob v2 value's external URI lies outside the registered base paths
            (without ``allow_external_blob_outside_bases``), or is not an absolute URI (also an
            OSError, as in pylance).
        CommitConflictError: a concurrent commit makes this write impossible.
        StorageOptionsError: a storage option is unknown, unsafe or has a bad value.
        TypeError, ValueError: ``auto_cleanup_options`` has a bad value.

    Example:
        ```python
        new = lt.write_dataset(table, f"{tmp}/new")  # mode="create"
        lt.write_dataset(table, f"{tmp}/new", mode="append", commit_message="more rows")
        lt.write_dataset(table, f"{tmp}/new", mode="overwrite", data_storage_version="2.0")
        ```
    """
    from lance_table.table.operations.write_dataset import write_snapshot

    if isinstance(uri, LanceDataset):
        storage_options = uri._storage.storage_options if storage_options is None else storage_options
        if base_store_params is None:  # (as pylance: a handle's are inherited)
            base_store_params = uri._storage.base_store_params
        uri = uri.uri
    return Dataset(
        write_snapshot(
            data_obj=data_obj,
            uri=uri,
            schema=schema,
            mode=mode,
            max_rows_per_file=max_rows_per_file,
            max_rows_per_group=max_rows_per_group,
            max_bytes_per_file=max_bytes_per_file,
            data_cache_bytes=data_cache_bytes,
            max_page_bytes=max_page_bytes,
            commit_lock=commit_lock,
            progress=progress,
            storage_options=storage_options,
            data_storage_version=data_storage_version,
            use_legacy_format=use_legacy_format,
            enable_v2_manifest_paths=enable_v2_manifest_paths,
            enable_stable_row_ids=enable_stable_row_ids,
            auto_cleanup_options=auto_cleanup_options,
            commit_message=commit_message,
            transaction_properties=transaction_properties,
            initial_bases=initial_bases,
            target_bases=target_bases,
            target_all_bases=target_all_bases,
            base_store_params=base_store_params,
            external_blob_mode=external_blob_mode,
            allow_external_blob_outside_bases=allow_external_blob_outside_bases,
            blob_pack_file_size_threshold=blob_pack_file_size_threshold,
            namespace_client=namespace_client,
            table_id=table_id,
            session=session,
            unsafe_commit=unsafe_commit,
            max_retries=max_retries,
        )
    )


__all__ = ["dataset", "write_dataset"]
