"""The field ids and column indices a data file records for some of a dataset's fields (as the
writers record them), and the record of an existing data file holding some of a dataset's columns
(pylance's ``DataFile.create``)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from lance_table.errors import CorruptFileError, SchemaError, UnsupportedFormatError
from lance_table.extensions import storage_schema
from lance_table.file.container import FileVersion
from lance_table.file.v2_0.layout import column_assignment
from lance_table.format.manifest import DataFile
from lance_table.schema import LanceField, arrow_schema_from_fields, build_tree
from lance_table.storage import Storage


def layout(fields: tuple[LanceField, ...], version: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The field ids and column indices a data file of ``version`` with ``fields`` records, as the
    writers record them (2.0: every field and its column; 2.1+: the leaves)."""
    if version == "2.0":
        cols = column_assignment(build_tree(list(fields)))
        return tuple(f.id for f in fields), tuple(cols.get(f.id, -1) for f in fields)
    from lance_table.file.writer import LanceFileWriter  # the writer's modules only when writing

    schema = arrow_schema_from_fields(fields)
    writer = LanceFileWriter(io.BytesIO(), storage_schema(schema), version=version, fields=fields)
    written = writer.close()
    return written.field_ids, written.column_indices


def open_data_file(storage: Storage, uri: str) -> tuple[Any, FileVersion]:
    """The metadata (pylance's ``LanceFileMetadata`` shape) and format version of the Lance 2.x
    data file at ``uri`` on ``storage``.

    Raises:
        LanceFileNotFoundError: there is no such file.
        UnsupportedFormatError: the file is not a Lance 2.x data file.
    """
    from lance_table.file.api import LanceFileReader  # pylance's file API imports the writer

    meta = LanceFileReader(uri, storage_options=storage.storage_options).metadata()
    try:
        return meta, FileVersion.from_footer(meta.major_version, meta.minor_version, uri)
    except CorruptFileError:
        raise UnsupportedFormatError(
            f"{uri}: a file of format {meta.major_version}.{meta.minor_version} is not a data file"
        ) from None


def data_file_from_file(
    storage: Storage,
    fields: Sequence[LanceField],
    path: str,
    base_id: int | None = None,
) -> DataFile:
    """The manifest record of ``data/<path>``, a Lance file holding some of the dataset's
    top-level columns (pylance's ``DataFile.create``, for a ``DataReplacement``): its fields
    matched to the dataset's by name, with the ids and column indices the writers record.

    Raises:
        LanceFileNotFoundError: there is no such file (also a FileNotFoundError and ValueError).
        SchemaError: the file has a column the dataset lacks, or of another type (a ValueError).
        UnsupportedFormatError: the file is not a Lance 2.x file, or ``base_id`` is given
            (lance_table reads such files from the dataset's own directory only).
    """
    if base_id is not None:
        raise UnsupportedFormatError(f"DataFile.create with base_id={base_id} is not supported")
    uri = f"{storage.uri.rstrip('/')}/data/{path}"
    meta, version = open_data_file(storage, uri)
    roots = {node.name: node for node in build_tree(list(fields))}
    file_schema = storage_schema(meta.schema)
    chosen: list[LanceField] = []
    for f in file_schema:
        node = roots.get(f.name)
        if node is None:
            raise SchemaError(f"Schema mismatch: file has extra field {f.name!r} ({uri})")
        fields = [n.field for n in node.walk()]
        want = storage_schema(arrow_schema_from_fields(fields)).field(0).type
        if want != f.type:
            raise SchemaError(
                f"Schema mismatch: field {f.name!r} is {f.type} in the file, {want} in the dataset ({uri})"
            )
        chosen.extend(fields)
    ids, columns = layout(tuple(chosen), version.value)
    major, minor = version.manifest_version
    return DataFile(
        path=path,
        fields=ids,
        column_indices=columns,
        file_major_version=major,
        file_minor_version=minor,
        file_size_bytes=storage.size(f"data/{path}"),
    )
