"""Writing rows into a dataset as a new one, an append or an overwrite: the work of
``write_dataset`` (and of ``insert``), with pylance's parameters, returning the version committed."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from lance_table.errors import DatasetNotFoundError
from lance_table.format.bases import base_paths
from lance_table.format.transaction import Overwrite as OverwriteOp
from lance_table.storage import Storage, open_storage
from lance_table.table import latest_known
from lance_table.table.blob_locations import external_reference
from lance_table.table.commit import CommitLock, CommitOptions, check_can_commit, commit
from lance_table.table.opening import refuse
from lance_table.table.operations import auto_cleanup
from lance_table.table.operations.manifest_paths import (
    DEFAULT_V2_MANIFEST_PATHS,
    scheme_for_new_dataset,
)
from lance_table.table.operations.write import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    WriteMode,
    prepare_write,
    write_placed_fragments,
)
from lance_table.table.operations.write_bases import plan_bases
from lance_table.table.progress import Progress, known_rows, reporter
from lance_table.table.snapshot import Snapshot, load


def write_snapshot(
    data_obj: Any,
    uri: str | os.PathLike[str] | None = None,
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
) -> Snapshot:
    """What :func:`lance_table.write_dataset` does, given a URI: the version it commits.

    Raises:
        as :func:`lance_table.write_dataset`.
    """
    refuse(
        "write_dataset",
        {
            "external_blob_mode": external_blob_mode,
            "namespace_client": namespace_client,
            "table_id": table_id,
        },
        unset={"external_blob_mode": "reference"},
    )
    if uri is None:
        raise ValueError("write_dataset() needs a uri (namespaces are not supported)")
    cleanup_config = None
    if auto_cleanup_options is not None:
        cleanup_config = auto_cleanup.config_values(auto_cleanup_options)
    if data_storage_version is None and use_legacy_format is not None:
        data_storage_version = "legacy" if use_legacy_format else "stable"
    data = data_obj
    storage = open_storage(uri, storage_options, base_store_params)
    options = CommitOptions(
        commit_lock=commit_lock,
        unsafe_commit=unsafe_commit,
        **({"max_retries": max_retries} if max_retries is not None else {}),
    )
    check_can_commit(options, storage)
    latest = _open_latest(storage, mode, options)
    base = latest.manifest if latest is not None else None
    plan, reader = prepare_write(base, mode, data, schema, storage.uri, data_storage_version)
    bases = plan_bases(base, mode, initial_bases, target_bases, target_all_bases, uri=os.fspath(uri))
    targets = bases.open(storage)
    registered = dict(bases.bases) if bases.bases is not None else dict(base_paths(base) if base else {})
    externals = functools.partial(
        external_reference, bases=registered, allow_outside=bool(allow_external_blob_outside_bases)
    )
    with reporter("write", progress) as report:
        report.phase("write", rows_total=known_rows(data))
        frags, written, dictionaries, elsewhere = write_placed_fragments(
            storage,
            reader,
            plan.schema,
            list(plan.fields),
            max_rows_per_file=max_rows_per_file,
            max_bytes_per_file=max_bytes_per_file,
            progress=report,
            data_format=plan.data_format,
            dictionaries=plan.dictionaries,
            targets=targets,
            blob_externals=externals,
        )
    scheme = latest.scheme if latest is not None else scheme_for_new_dataset(enable_v2_manifest_paths)
    pending = plan.pending(frags, written, dictionaries, elsewhere)
    if bases.initial and isinstance(pending.operation, OverwriteOp):
        pending = replace(pending, operation=replace(pending.operation, initial_bases=bases.initial))
    if enable_stable_row_ids and isinstance(pending.operation, OverwriteOp):
        pending = replace(pending, operation=replace(pending.operation, stable_row_ids=True))
    if cleanup_config is not None and base is None and isinstance(pending.operation, OverwriteOp):
        # (as in pylance: only a new dataset takes them)
        upsert = {**pending.operation.config_upsert_values, **cleanup_config}
        pending = replace(pending, operation=replace(pending.operation, config_upsert_values=upsert))
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
    return Snapshot(storage, manifest, scheme, options)


def _open_latest(storage: Storage, mode: WriteMode, options: CommitOptions) -> Snapshot | None:
    """The latest version, or None when there is no dataset. An append takes the version this
    process committed last when ``_versions`` is provably as that commit left it (no listing: the
    commit lists, and rebases over anything newer; see :mod:`lance_table.table.latest_known`)."""
    if mode == "append":
        known = latest_known.latest(storage)
        if known is not None:
            entry, manifest = known
            return Snapshot(storage, manifest, entry.scheme, options)
    try:
        return load(storage)
    except DatasetNotFoundError:
        return None
