"""Field metadata that chooses how a field is stored, whatever the file version: blobs, packed
structs, compression; and how much of a page budget an array of a field takes."""

from __future__ import annotations

import pyarrow as pa

from lance_table.schema import FieldNode

PACKED_LEGACY_KEY = "packed"
PACKED_KEY = "lance-encoding:packed"
BLOB_KEY = "lance-encoding:blob"
COMPRESSION_KEY = "lance-encoding:compression"
# Blob columns store one (absolute position, size) descriptor per row; nulls are (1, 0).
BLOB_DESCRIPTOR = pa.struct([("position", pa.uint64()), ("size", pa.uint64())])


def meta(node: FieldNode, key: str) -> str | None:
    """A field's metadata value as text (None when absent)."""
    value = node.field.metadata.get(key)
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def is_blob(node: FieldNode) -> bool:
    """Whether a binary field is stored as out-of-line blobs."""
    t = node.arrow_type
    return (pa.types.is_large_binary(t) or pa.types.is_binary(t)) and meta(node, BLOB_KEY) is not None


def array_overhead(t: pa.DataType) -> int:
    """What pylance's writer counts for each array of type ``t`` it buffers beyond the array's
    buffers: the size of its in-memory array objects (Arrow's Rust structs on 64-bit machines).
    Counted, a column's page fills at the same batch as pylance's, and so a file's bytes, which
    ``max_bytes_per_file`` checks, grow at the same rows."""
    if pa.types.is_fixed_size_list(t):
        return 104 + array_overhead(t.value_type)
    if pa.types.is_boolean(t):
        return 112
    if (
        pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
    ):
        return 120
    return 96
