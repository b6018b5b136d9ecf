"""Blob v2 columns on the write paths of format 2.2 datasets.

pylance 14 stores a blob field of a 2.2 dataset (``large_binary`` with ``lance-encoding:blob``
metadata, or its ``BlobType`` extension) as a ``lance.blob.v2`` struct (``data: large_binary,
uri: string``, plus ``position, size`` when the input had them). This module turns such input
schemas and columns into that logical struct (:func:`logical_schema`, :func:`blob_column`), which
the file writer stores as descriptors and sidecars (:mod:`lance_table.file.v2_1.blob_v2_encode`),
and gives compaction the bytes behind stored descriptors (:func:`with_blob_bytes`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import SchemaError, UnsupportedFormatError, UnsupportedOperationError
from lance_table.file.fields import BLOB_KEY
from lance_table.file.runs import Runs
from lance_table.file.v2_1.blob_v2 import EXTENSION_KEY, EXTENSION_NAME, BlobKind, is_blob_v2
from lance_table.schema import LanceField, build_tree
from lance_table.table.blobs import take_blobs
from lance_table.table.fragment import FragmentReader
from lance_table.table.snapshot import BLOB_V2_FORMATS, Snapshot

# The children of pylance's logical blob struct, in order (the last two are optional).
LOGICAL_CHILDREN = (
    pa.field("data", pa.large_binary()),
    pa.field("uri", pa.utf8()),
    pa.field("position", pa.uint64()),
    pa.field("size", pa.uint64()),
)
EXTENSION_METADATA_KEY = b"ARROW:extension:metadata"
# Compaction hands the writer blob bytes in batches of about this many bytes (at least one row).
RESOLVE_BATCH_BYTES = 64 * 1024 * 1024


def is_blob_v2_arrow(field: pa.Field) -> bool:
    """Whether an Arrow field of a dataset's schema is a blob v2 column (the logical struct)."""
    return (
        pa.types.is_struct(field.type)
        and (field.metadata or {}).get(EXTENSION_KEY.encode()) == EXTENSION_NAME
    )


def _is_extension(field: pa.Field) -> bool:
    return isinstance(field.type, pa.ExtensionType) and field.type.extension_name == EXTENSION_NAME.decode()


def _is_descriptor_column(field: pa.Field) -> bool:
    """A column of ``BlobDescriptorArrayBuilder`` (blobs already stored, see
    :mod:`lance_table.blob_descriptors`)."""
    return is_blob_v2_arrow(field) and field.type.get_field_index("kind") >= 0


def _is_v1_blob(field: pa.Field) -> bool:
    binary = pa.types.is_large_binary(field.type) or pa.types.is_binary(field.type)
    return binary and BLOB_KEY.encode() in (field.metadata or {})


def _nested_blob(t: pa.DataType) -> bool:
    """Whether a nested type holds a blob field below its top."""
    children: list[pa.Field] = []
    if pa.types.is_struct(t):
        children = list(t)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        children = [t.value_field]
    elif pa.types.is_map(t):
        children = [t.key_field, t.item_field]
    return any(_is_extension(c) or _is_v1_blob(c) or _nested_blob(c.type) for c in children)


def logical_schema(schema: pa.Schema, data_format: str) -> pa.Schema:
    """The schema a new dataset of ``data_format`` stores for data of ``schema``: in format 2.2
    each top-level blob field becomes its ``lance.blob.v2`` struct, as pylance does.

    Raises:
        UnsupportedFormatError: a ``BlobType`` field in a format before 2.2 (pylance refuses it
            too), or a blob field inside another field of a 2.2 dataset.
    """
    v2 = data_format in BLOB_V2_FORMATS
    out = []
    for f in schema:
        md = dict(f.metadata or {})
        if v2 and _nested_blob(f.type):
            raise UnsupportedFormatError(
                f"field {f.name!r} holds blob fields; lance_table writes blob v2 columns only at the "
                "top level"
            )
        if _is_extension(f) or (not v2 and _is_descriptor_column(f)):
            if not v2:
                raise UnsupportedFormatError(
                    f"field {f.name!r} is a blob v2 column, which needs data_storage_version 2.2, "
                    f"not {data_format}"
                )
            md[EXTENSION_KEY.encode()] = EXTENSION_NAME
            md[EXTENSION_METADATA_KEY] = b""
            out.append(pa.field(f.name, f.type.storage_type, f.nullable, metadata=md))
        elif v2 and (_is_v1_blob(f) or _is_descriptor_column(f)):  # (as pylance stores both)
            md.pop(BLOB_KEY.encode(), None)
            md[EXTENSION_KEY.encode()] = EXTENSION_NAME
            out.append(pa.field(f.name, pa.struct(LOGICAL_CHILDREN[:2]), f.nullable, metadata=md))
        else:
            out.append(f)
    return pa.schema(out, metadata=schema.metadata)


def check_fields(fields: Sequence[LanceField], uri: str) -> None:
    """Refuse blob v2 columns lance_table does not write: those inside other fields.

    Raises:
        UnsupportedFormatError: such a field is among ``fields``.
    """
    for root in build_tree(fields):
        for node in root.walk():
            if node is not root and is_blob_v2(node.field):
                raise UnsupportedFormatError(
                    f"{uri}: field {node.name!r} inside {root.name!r} is a blob v2 column; lance_table "
                    "writes blob v2 columns only at the top level"
                )


def blob_column(col: pa.Array, field: pa.Field) -> pa.Array:
    """``col`` (blob bytes, or a blob struct or ``BlobType`` array) as the logical struct of the
    blob v2 ``field``; a null value stays a null row.

    Raises:
        SchemaError: ``col`` is of another type, or sets struct children the field does not have.
        UnsupportedOperationError: ``col`` is a blob descriptor column.
    """
    if isinstance(col, pa.ExtensionArray):
        col = col.storage
    target: pa.StructType = field.type
    if col.type == target:
        return col
    if pa.types.is_struct(col.type) and col.type.get_field_index("kind") >= 0:
        raise UnsupportedOperationError(
            f"column {field.name!r} is a blob descriptor column (BlobDescriptorArrayBuilder): write it "
            "with LanceFileSession.open_writer at its sidecars' data file path and commit that file"
        )
    t = col.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        data = col.cast(pa.large_binary())
        children = {"data": data}
        validity = data
    elif pa.types.is_struct(t):
        children = {}
        for child in t:
            values = col.field(child.name)
            if target.get_field_index(child.name) < 0:
                if values.null_count != len(values):
                    raise SchemaError(f"column {field.name!r}: the blob struct has no field {child.name!r}")
                continue
            children[child.name] = values
        validity = col
    else:
        raise SchemaError(f"column {field.name!r} is {t} but the dataset stores blobs ({target})")
    arrays = []
    for child in target:
        values = children.get(child.name)
        if values is None:
            arrays.append(pa.nulls(len(col), child.type))
            continue
        try:
            arrays.append(values.cast(child.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(f"column {field.name!r}: blob field {child.name!r} is {values.type}") from exc
    mask = pc.is_null(validity) if validity.null_count else None
    return pa.StructArray.from_arrays(arrays, fields=list(target), mask=mask)


def with_blob_bytes(
    snapshot: Snapshot, frag: FragmentReader, table: pa.Table, runs: Runs, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of ``table`` (read from ``frag`` at ``runs``) as batches of ``schema``, each blob v2
    descriptor replaced by its bytes (compaction writes them again). Batches hold about
    :data:`RESOLVE_BATCH_BYTES` of blobs; without blob v2 columns, ``table``'s own batches.

    Raises:
        UnsupportedFormatError: an external blob (lance_table does not write them).
        CorruptFileError, DataFileNotFoundError: a descriptor names bytes that are not there.
    """
    blob_names = [f.name for f in schema if is_blob_v2_arrow(f)]
    if not blob_names:
        yield from table.to_batches()
        return
    positions = runs.positions()
    sizes = np.zeros(table.num_rows, np.int64)
    for name in blob_names:
        desc = table.column(name).combine_chunks()
        kinds = desc.field("kind").to_numpy(zero_copy_only=False)
        valid = np.asarray(desc.is_valid())
        if bool(np.any(valid & (kinds == BlobKind.EXTERNAL))):
            raise UnsupportedFormatError(
                f"{snapshot.uri}: column {name!r} holds external blobs; lance_table does not write them"
            )
        sizes += np.where(valid, desc.field("size").to_numpy(zero_copy_only=False), 0).astype(np.int64)
    start = 0
    while start < table.num_rows:
        end = start + 1
        total = int(sizes[start])
        while end < table.num_rows and total + int(sizes[end]) <= RESOLVE_BATCH_BYTES:
            total += int(sizes[end])
            end += 1
        piece = table.slice(start, end - start)
        columns = []
        for f in schema:
            col = piece.column(f.name).combine_chunks()
            if f.name in blob_names:
                col = blob_column(_read_blobs(snapshot, frag, col, positions[start:end], f.name), f)
            columns.append(col)
        yield pa.RecordBatch.from_arrays(columns, schema=schema)
        start = end


def _read_blobs(
    snapshot: Snapshot, frag: FragmentReader, desc: pa.Array, positions: np.ndarray, name: str
) -> pa.Array:
    """The bytes behind descriptors ``desc`` of rows ``positions`` of ``frag`` (null stays null)."""
    valid = np.asarray(desc.is_valid())
    addresses = (np.uint64(frag.fragment.id) << np.uint64(32)) | positions[valid].astype(np.uint64)
    files = take_blobs(snapshot, name, addresses=addresses) if addresses.size else []
    it = iter(files)
    values: list[bytes | None] = []
    for ok in valid.tolist():
        blob = next(it) if ok else None
        values.append(None if blob is None else blob.readall())
    return pa.array(values, pa.large_binary())
