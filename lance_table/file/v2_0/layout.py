"""How a 2.0 file maps schema fields to physical columns.

Columns are allocated in pre-order: a struct gets a header column followed by its children's
columns (unless it is a *packed* struct, stored as one column), a list gets an offsets column
followed by its item's columns, and every other field is one leaf column.
"""

from __future__ import annotations

import pyarrow as pa

from lance_table.file.fields import PACKED_KEY, PACKED_LEGACY_KEY, meta
from lance_table.schema import FieldNode


def is_packed_struct(node: FieldNode) -> bool:
    """Whether a struct field is stored row-major in one column (pylance's 2.0 rule)."""
    if not pa.types.is_struct(node.arrow_type):
        return False
    legacy = meta(node, PACKED_LEGACY_KEY)
    if legacy is not None:
        return legacy == "true"
    return meta(node, PACKED_KEY) is not None


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
