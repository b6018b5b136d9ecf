"""Staged writes: rows into new fragments of a dataset, not committed (the worker's half of a
distributed write; the driver commits the fragments with ``Dataset.commit``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_table.errors import DatasetNotFoundError, UnsupportedFormatError
from lance_table.format.manifest import Fragment
from lance_table.schema import build_tree
from lance_table.storage import Storage
from lance_table.table.operations.write import (
    LEGACY_FORMAT,
    WriteMode,
    WritePlan,
    prepare_write,
    write_fragments,
)
from lance_table.table.snapshot import load


def stage_fragments(
    storage: Storage,
    data: Any,
    schema: pa.Schema | None,
    mode: WriteMode,
    data_storage_version: str | None,
    **options: Any,
) -> tuple[list[Fragment], WritePlan]:
    """Write ``data`` into new fragments (ids 0) planned against the latest version, or as the
    first version of a new dataset; return them and the plan (its read version and schema).

    ``mode="append"`` into a missing dataset writes the fragments of a new one, as pylance does.
    On any error the files written so far are deleted.

    Raises:
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        SchemaError: the data does not match the dataset's schema (append) or cannot be stored.
        UnsupportedFormatError: the dataset needs features lance_table does not write, or is a
            legacy dataset with dictionary columns (whose values the manifest must record).
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
    frags, _, _ = write_fragments(
        storage, reader, plan.schema, list(plan.fields), data_format=plan.data_format, **options
    )
    return frags, plan
