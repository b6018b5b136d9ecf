"""How a file maps schema fields to physical columns.

2.0: columns are allocated in pre-order: a struct gets a header column followed by its children's
columns (unless it is a *packed* struct, stored as one column), a list gets an offsets column
followed by its item's columns, and every other field is one leaf column.

2.1/2.2: only leaves own columns, and a packed struct counts as a leaf (:func:`leaf_columns`).
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


# Values pylance 14's 2.1/2.2 writer takes as "true" for the packed keys (checked by writing files
# with each; "t", " true", "banana", "off", "0" and "" are not packed).
_PACKED_TRUE = frozenset({"true", "yes", "y", "on", "1"})


def is_packed_struct21(node: FieldNode) -> bool:
    """Whether a struct field is stored as one packed column in a 2.1/2.2 file.

    pylance 14 packs a struct when either ``packed`` or ``lance-encoding:packed`` holds a true-ish
    value (``_PACKED_TRUE``, any case); unlike in 2.0, ``lance-encoding:packed: false`` does not pack.
    """
    if not pa.types.is_struct(node.arrow_type):
        return False
    for key in (PACKED_LEGACY_KEY, PACKED_KEY):
        value = _meta(node, key)
        if value is not None and value.lower() in _PACKED_TRUE:
            return True
    return False


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
    """2.1/2.2 files: one column per leaf field, in pre-order (structs and lists own none).

    A packed struct (:func:`is_packed_struct21`) is a leaf: it owns one column and its children none.
    """
    out: dict[int, int] = {}

    def visit(node: FieldNode) -> None:
        if not node.children or is_packed_struct21(node):
            out[node.id] = len(out)
            return
        for child in node.children:
            visit(child)

    for root in roots:
        visit(root)
    return out
