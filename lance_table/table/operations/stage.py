"""Staged writes: rows into new fragments of a dataset, not committed (the worker's half of a
distributed write; the driver commits the fragments with ``Dataset.commit``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from lance_table.errors import DatasetNotFoundError, EmptyDataError, UnsupportedFormatError
from lance_table.format.bases import DatasetBasePath, base_paths
from lance_table.format.manifest import Fragment
from lance_table.schema import build_tree
from lance_table.storage import Storage
from lance_table.table.blob_locations import external_reference
from lance_table.table.operations.write import (
    LEGACY_FORMAT,
    WriteMode,
    WritePlan,
    prepare_write,
    write_fragments,
)
from lance_table.table.operations.write_bases import plan_bases
from lance_table.table.progress import Progress, known_rows, reporter
from lance_table.table.snapshot import load


def stage_fragments(
    storage: Storage,
    data: Any,
    schema: pa.Schema | None,
    mode: WriteMode,
    data_storage_version: str | None,
    *,
    initial_bases: Sequence[Any] | None = None,
    target_bases: Sequence[str] | None = None,
    target_all_bases: bool | None = None,
    allow_external_blob_outside_bases: bool = False,
    **options: Any,
) -> tuple[list[Fragment], WritePlan, tuple[DatasetBasePath, ...]]:
    """Write ``data`` into new fragments (ids 0) planned against the latest version, or as the
    first version of a new dataset; return them, the plan (its read version and schema) and the
    base paths a new dataset registers (ids assigned).

    ``mode="append"`` into a missing dataset writes the fragments of a new one, as pylance does.
    ``initial_bases``, ``target_bases`` and ``target_all_bases`` place the data files in base
    paths as ``write_dataset`` does (see :func:`~.write_bases.plan_bases`); blob v2 values given
    as external URIs are stored as ``write_dataset`` stores them (``allow_external_blob_outside_bases``
    as there). On any error the files written so far are deleted.

    Raises:
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        SchemaError: the data does not match the dataset's schema (append) or cannot be stored.
        UnsupportedFormatError: the dataset needs features lance_table does not write, or is a
            legacy dataset with dictionary columns (whose values the manifest must record).
        BasePathError: see :func:`~.write_bases.plan_bases`.
    """
    try:
        base = load(storage).manifest
    except DatasetNotFoundError:
        base = None
    plan, reader = prepare_write(
        base, mode if base is not None else "create", data, schema, storage.uri, data_storage_version
    )
    if plan.data_format == LEGACY_FORMAT and any(
        pa.types.is_dictionary(n.arrow_type) for root in build_tree(plan.fields) for n in root.walk()
    ):
        raise UnsupportedFormatError(
            f"{storage.uri}: fragments with dictionary columns of a legacy dataset cannot be staged "
            "(the manifest must record their values); use write_dataset"
        )
    placed = plan_bases(base, mode, initial_bases, target_bases, target_all_bases, uri=storage.uri)
    registered = dict(placed.bases) if placed.bases is not None else dict(base_paths(base) if base else {})
    externals = functools.partial(
        external_reference, bases=registered, allow_outside=bool(allow_external_blob_outside_bases)
    )
    frags, _, _ = write_fragments(
        storage,
        reader,
        plan.schema,
        list(plan.fields),
        data_format=plan.data_format,
        targets=placed.open(storage),
        blob_externals=externals,
        **options,
    )
    return frags, plan, placed.initial


def create_fragment(
    storage: Storage,
    data: Any,
    fragment_id: int | None,
    schema: pa.Schema | None,
    mode: WriteMode,
    data_storage_version: str | None,
    progress: Progress = None,
) -> Fragment:
    """All of ``data`` as one new fragment (one data file) with id ``fragment_id`` (0 if None), not
    committed: pylance's ``LanceFragment.create``. ``progress`` as ``write_fragments``'s (fragment
    hooks see ``fragment_id``).

    Raises:
        ValueError: ``fragment_id`` is negative or past 2**32-1.
        EmptyDataError: the data has no rows (also a ValueError and an OSError, as pylance's).
        InputTypeError: ``progress`` is of no kind taken.
        (and as :func:`stage_fragments`)
    """
    fid = 0 if fragment_id is None else int(fragment_id)
    if not 0 <= fid < 1 << 32:
        raise ValueError(f"fragment_id must be in [0, 2**32), got {fragment_id}")
    with reporter("write_fragments", progress, fragment_id=fid) as report:
        report.phase("write", rows_total=known_rows(data))
        frags, _, _ = stage_fragments(
            storage,
            data,
            schema,
            mode,
            data_storage_version,
            max_rows_per_file=1 << 62,
            max_bytes_per_file=1 << 62,
            progress=report,
        )
    if not frags:
        raise EmptyDataError(f"{storage.uri}: LanceFragment.create was given no rows (input data was empty)")
    return replace(frags[0], id=fid)
