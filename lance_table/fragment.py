"""pylance's ``lance.fragment`` for distributed writes: workers call :func:`write_fragments` and send
the :class:`FragmentMetadata` (pickled, or as ``to_json()``) to a driver, which commits them with
``lance_table.Dataset.commit(uri, lance_table.LanceOperation.Append(fragments), read_version=...)``.

Metadata is interchangeable with pylance's through JSON: fragments written by either library can be
committed by the other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lance_table.format.bases import DatasetBasePath
from lance_table.progress import FragmentWriteProgress, NoopFragmentWriteProgress
from lance_table.storage import open_storage
from lance_table.table.dataset import Dataset
from lance_table.table.fragment_metadata import (
    DataFile,
    DeletionFile,
    FragmentMetadata,
    RowDatasetVersionMeta,
    RowIdMeta,
)
from lance_table.table.fragment_session import FragmentSession
from lance_table.table.lance_fragment import LanceFragment
from lance_table.table.lance_operation import LanceOperation, Transaction
from lance_table.table.opening import refuse
from lance_table.table.operations.stage import stage_fragments
from lance_table.table.operations.write import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    WriteMode,
)
from lance_table.table.progress import Progress, known_rows, reporter
from lance_table.table.row_id_api import RowIdSequence
from lance_table.table.session import Session
from lance_table.udf import BatchUDF


def write_fragments(
    data: Any,
    dataset_uri: str | os.PathLike[str] | Dataset,
    schema: pa.Schema | None = None,
    *,
    mode: WriteMode = "append",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int | None = 1024,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    data_cache_bytes: int | None = None,
    max_page_bytes: int | None = None,
    data_storage_version: str | None = None,
    use_legacy_format: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    enable_stable_row_ids: bool = False,
    return_transaction: bool = False,
    progress: Progress = None,
    target_bases: list[str] | None = None,
    target_all_bases: bool | None = None,
    initial_bases: list[DatasetBasePath] | None = None,
    base_store_params: Mapping[str, Mapping[str, Any]] | None = None,
    external_blob_mode: str = "reference",
    allow_external_blob_outside_bases: bool = False,
    namespace_client: Any = None,
    table_id: list[str] | None = None,
    session: Any = None,
) -> list[FragmentMetadata] | Transaction:
    """Write ``data`` into new data files of the dataset without committing them (pylance's
    ``lance.fragment.write_fragments``).

    Returns the fragments' metadata (ids 0: the commit gives ids), or with ``return_transaction``
    a :class:`Transaction` (an Append, or an Overwrite for ``mode="create"``/``"overwrite"``)
    that ``Dataset.commit`` takes. ``mode="append"`` checks the data against the dataset's schema
    (into a missing dataset it writes the fragments of a new one: commit them with an Overwrite);
    ``"create"`` and ``"overwrite"`` give field ids from the data's schema. ``max_rows_per_group`` is
    accepted for pylance compatibility. Files of a failed write are deleted. ``progress`` shows or
    reports the write as ``write_dataset``'s does (a pylance ``FragmentWriteProgress`` too).
    ``target_bases``, ``target_all_bases`` and ``initial_bases`` place the data files in base paths
    as ``write_dataset`` does (the Overwrite returned for a new dataset registers ``initial_bases``);
    ``base_store_params`` are their storage options (see ``dataset``; a handle's when not given).
    Blob v2 values given as external URIs are stored as ``write_dataset`` stores them
    (``allow_external_blob_outside_bases`` as there). ``use_legacy_format`` picks
    ``data_storage_version`` "legacy" or "stable", as in pylance. ``data_cache_bytes``,
    ``max_page_bytes`` and ``session`` tune pylance's engine and are accepted as no-ops;
    ``enable_stable_row_ids`` is accepted as pylance accepts it, without effect on the fragments
    (the commit that creates a dataset decides: ``LanceDataset.commit(enable_stable_row_ids=)``).

    Raises:
        InputTypeError: the data is of no kind a write takes (also a TypeError).
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        SchemaError: the data does not match the dataset's schema or cannot be stored.
        UnsupportedFormatError: the dataset needs features lance_table does not write.
        StorageOptionsError: a storage option is unknown, unsafe or has a bad value.
        InputTypeError: also when ``progress`` is of no kind taken.
        BasePathError: a base reference names no base, or bases collide (see ``write_dataset``).
        BlobLocationError: an external blob URI outside the registered base paths (see
            ``write_dataset``).
        UnsupportedOptionError: ``external_blob_mode="ingest"`` or a namespace.

    Example:
        ```python
        from lance_table.fragment import write_fragments

        metas = write_fragments(table, uri, max_rows_per_file=1_000_000)
        lt.LanceDataset.commit(uri, lt.LanceOperation.Append(metas), read_version=ds.version)
        ```
    """
    refuse(
        "write_fragments",
        {
            "external_blob_mode": external_blob_mode,
            "namespace_client": namespace_client,
            "table_id": table_id,
        },
        unset={"external_blob_mode": "reference"},
    )
    if data_storage_version is None and use_legacy_format is not None:
        data_storage_version = "legacy" if use_legacy_format else "stable"
    if isinstance(dataset_uri, Dataset):
        storage = dataset_uri._storage
        if base_store_params is not None:
            storage = open_storage(dataset_uri.uri, storage.storage_options, base_store_params)
    else:
        storage = open_storage(dataset_uri, storage_options, base_store_params)
    with reporter("write_fragments", progress) as report:
        report.phase("write", rows_total=known_rows(data))
        frags, plan, initial = stage_fragments(
            storage,
            data,
            schema,
            mode,
            data_storage_version,
            initial_bases=initial_bases,
            target_bases=target_bases,
            target_all_bases=target_all_bases,
            max_rows_per_file=max_rows_per_file,
            max_bytes_per_file=max_bytes_per_file,
            progress=report,
            allow_external_blob_outside_bases=allow_external_blob_outside_bases,
        )
    metas = [FragmentMetadata.from_fragment(f) for f in frags]
    if not return_transaction:
        return metas
    if plan.append:
        return Transaction(plan.read_version, LanceOperation.Append(metas))
    return Transaction(plan.read_version, LanceOperation.Overwrite(plan.schema, metas, list(initial) or None))


__all__ = [
    "DEFAULT_MAX_BYTES_PER_FILE",
    "BatchUDF",
    "DataFile",
    "DatasetBasePath",
    "DeletionFile",
    "FragmentMetadata",
    "FragmentSession",
    "FragmentWriteProgress",
    "LanceFragment",
    "NoopFragmentWriteProgress",
    "RowDatasetVersionMeta",
    "RowIdMeta",
    "RowIdSequence",
    "Session",
    "write_fragments",
]
