"""How a 2.1/2.2 file maps schema fields to physical columns: only leaves own columns, in pre-order,
and a packed struct counts as a leaf."""

from __future__ import annotations

import pyarrow as pa

from lance_table.file.fields import PACKED_KEY, PACKED_LEGACY_KEY, meta
from lance_table.schema import FieldNode

# Values pylance 14's 2.1/2.2 writer takes as "true" for the packed keys (checked by writing files
# with each; "t", " true", "banana", "off", "0" and "" are not packed).
_PACKED_TRUE = frozenset({"true", "yes", "y", "on", "1"})


def is_packed_struct(node: FieldNode) -> bool:
    """Whether a struct field is stored as one packed column in a 2.1/2.2 file.

    pylance 14 packs a struct when either ``packed`` or ``lance-encoding:packed`` holds a true-ish
    value (``_PACKED_TRUE``, any case); unlike in 2.0, ``lance-encoding:packed: false`` does not pack.
    """
    if not pa.types.is_struct(node.arrow_type):
        return False
    for key in (PACKED_LEGACY_KEY, PACKED_KEY):
        value = meta(node, key)
        if value is not None and value.lower() in _PACKED_TRUE:
            return True
    return False


def leaf_columns(roots: list[FieldNode]) -> dict[int, int]:
    """One column per leaf field, in pre-order (structs and lists own none); a packed struct
    (:func:`is_packed_struct`) is a leaf: it owns one column and its children none."""
    out: dict[int, int] = {}
    todo = list(reversed(roots))  # pre-order, in a loop (a recursive closure is a reference cycle)
    while todo:
        node = todo.pop()
        if not node.children or is_packed_struct(node):
            out[node.id] = len(out)
        else:
            todo.extend(reversed(node.children))
    return out
