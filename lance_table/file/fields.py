"""Field metadata that chooses how a field is stored, whatever the file version: blobs, packed
structs, compression."""

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
