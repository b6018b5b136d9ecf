"""How a 2.0 file maps schema fields to physical columns.

Columns are allocated in pre-order: a struct gets a header column followed by its children's
columns (unless it is a *packed* struct, stored as one column), a list gets an offsets column
followed by its item's columns, and every other field is one leaf column.
"""

from __future__ import annotations

import pyarrow as pa

from lance_table.schema import FieldNode

PACKED_LEGACY_KEY = "packed"
PACKED_KEY = "lance-encoding:packed"
BLOB_KEY = "lance-encoding:blob"
COMPRESSION_KEY = "lance-encoding:compression"
# Blob columns store one (absolute position, size) descriptor per row; nulls are (1, 0).
BLOB_DESCRIPTOR = pa.struct([("position", pa.uint64()), ("size", pa.uint64())])


def _meta(node: FieldNode, key: str) -> str | None:
    value = node.field.metadata.get(key)
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def is_packed_struct(node: FieldNode) -> bool:
    """Whether a struct field is stored row-major in one column (pylance's 2.0 rule)."""
    if not pa.types.is_struct(node.arrow_type):
        return False
    legacy = _meta(node, PACKED_LEGACY_KEY)
    if legacy is not None:
        return legacy == "true"
    return _meta(node, PACKED_KEY) is not None


def is_blob(node: FieldNode) -> bool:
    """Whether a binary field is stored as out-of-line blobs."""
    t = node.arrow_type
    return (pa.types.is_large_binary(t) or pa.types.is_binary(t)) and _meta(node, BLOB_KEY) is not None


def column_assignment(roots: list[FieldNode]) -> dict[int, int]:
    """Map each field id that owns a physical column to its column index."""
    out: dict[int, int] = {}

    def visit(node: FieldNode) -> None:
        out[node.id] = len(out)
        if is_packed_struct(node):
            return
        for child in node.children:
            visit(child)

    for root in roots:
        visit(root)
    return out


def leaf_columns(roots: list[FieldNode]) -> dict[int, int]:
    """2.1/2.2 files: one column per leaf field, in pre-order (structs and lists own none)."""
    out: dict[int, int] = {}

    def visit(node: FieldNode) -> None:
        if not node.children:
            out[node.id] = len(out)
        for child in node.children:
            visit(child)

    for root in roots:
        visit(root)
    return out
