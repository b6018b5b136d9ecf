"""A fragment made of a data file already in the dataset's ``data/`` directory (pylance's
``LanceFragment.create_from_file``): a file written with the file API, recorded with the ids of the
dataset's fields (whatever ids the file stores: a fragment's columns are read by the manifest's
``column_indices``), ready to commit with ``LanceOperation.Append`` or ``Rewrite``."""

from __future__ import annotations

import pyarrow as pa

from lance_table.errors import AppendSchemaError
from lance_table.extensions import storage_schema
from lance_table.format.manifest import DataFile, Fragment
from lance_table.schema import LanceField, arrow_schema_from_fields
from lance_table.table.data_file_layout import layout as _layout
from lance_table.table.data_file_layout import open_data_file
from lance_table.table.snapshot import Snapshot


def fragment_from_file(snapshot: Snapshot, filename: str, fragment_id: int) -> Fragment:
    """The fragment ``fragment_id`` whose one data file is ``data/<filename>`` of the dataset.

    Raises:
        LanceFileNotFoundError: there is no such file (also a FileNotFoundError).
        AppendSchemaError: the file's schema is not the dataset's (fields missing, extra, in
            another order or of another type; also an OSError, as pylance raises).
        UnsupportedFormatError: the file is not a Lance 2.x file.
    """
    uri = f"{snapshot.uri.rstrip('/')}/data/{filename}"
    meta, version = open_data_file(snapshot.storage, uri)
    fields = snapshot.manifest.fields
    _check_schema(storage_schema(meta.schema), fields, uri)
    ids, columns = _layout(fields, version.value)
    major, minor = version.manifest_version
    data_file = DataFile(
        path=filename, fields=ids, column_indices=columns, file_major_version=major, file_minor_version=minor
    )
    return Fragment(id=fragment_id, files=(data_file,), physical_rows=meta.num_rows)


def _check_schema(file_schema: pa.Schema, fields: tuple[LanceField, ...], uri: str) -> None:
    expected = storage_schema(arrow_schema_from_fields(fields))
    missing = [n for n in expected.names if n not in file_schema.names]
    extra = [n for n in file_schema.names if n not in expected.names]
    if missing or extra:
        raise AppendSchemaError(
            f"Append with different schema: fields did not match, missing={missing}, "
            f"unexpected={extra} ({uri})"
        )
    if file_schema.names != expected.names:
        raise AppendSchemaError(
            f"Append with different schema: fields in different order, expected: {expected.names}, "
            f"actual: {file_schema.names} ({uri})"
        )
    for want, got in zip(expected, file_schema):
        if want.type != got.type:
            raise AppendSchemaError(
                f"Append with different schema: `{want.name}` should have type {want.type} "
                f"but type was {got.type} ({uri})"
            )
