"""Structs whose children live in several data files of a fragment: after pylance's
``alter_columns`` casts a struct's child (``s.y``), the cast child is stored in a new data file
(under the struct's own id) while its siblings stay in the old one. Such a column is put together
child by child, each from the last data file that holds it, with the struct's validity taken from
the file holding its first child."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from lance_table.format.manifest import DataFile
from lance_table.schema import FieldNode
from lance_table.table.conform import conform

# (index of a data file, top-level field id) -> (the file's node of that field, its values)
ReadTop = Callable[[int, int], tuple[FieldNode, pa.ChunkedArray]]


def _leaf_ids(node: FieldNode) -> set[int]:
    return {n.id for n in node.walk() if not n.children}


def is_split(node: FieldNode, files: Sequence[DataFile]) -> bool:
    """Whether ``node`` (a struct) is not held whole by the last data file holding any of it."""
    if not pa.types.is_struct(node.arrow_type):
        return False
    holders = [i for i, d in enumerate(files) if not node.ids.isdisjoint(d.fields)]
    if len(holders) < 2:
        return False
    last = set(files[holders[-1]].fields)
    return not _leaf_ids(node) <= last


def _find(
    file_node: FieldNode, col: pa.ChunkedArray, target: int
) -> tuple[FieldNode, pa.ChunkedArray] | None:
    """The file's node and values of field ``target`` below ``file_node`` (through structs)."""
    if file_node.id == target:
        return file_node, col
    if not pa.types.is_struct(file_node.arrow_type):
        return None
    for i, child in enumerate(file_node.children):
        if target in child.ids:
            values = pa.chunked_array([c.field(i) for c in col.chunks], type=col.type.field(i).type)
            return _find(child, values, target)
    return None


def assemble(
    root_id: int, node: FieldNode, files: Sequence[DataFile], read_top: ReadTop, rows: int
) -> pa.ChunkedArray:
    """The values of ``node`` (below the top-level field ``root_id``), put together from the data
    files that hold its parts."""
    holders = [i for i, d in enumerate(files) if not node.ids.isdisjoint(d.fields)]
    if not holders:
        return pa.chunked_array([pa.nulls(rows, node.arrow_type)])
    if not pa.types.is_struct(node.arrow_type) or not is_split(node, files):
        file_root, col = read_top(holders[-1], root_id)
        found = _find(file_root, col, node.id)
        if found is None:
            return pa.chunked_array([pa.nulls(rows, node.arrow_type)])
        return conform(found[1], node, found[0])
    children = [assemble(root_id, child, files, read_top, rows) for child in node.children]
    first = (
        next(i for i in holders if not node.children[0].ids.isdisjoint(files[i].fields))
        if node.children
        else holders[0]
    )
    file_root, col = read_top(first, root_id)
    found = _find(file_root, col, node.id)
    validity = None
    if found is not None:
        combined = found[1].combine_chunks()
        validity = combined.is_null() if combined.null_count else None
    arrays = [c.combine_chunks() for c in children]
    fields = [pa.field(c.name, a.type, c.field.nullable) for c, a in zip(node.children, arrays)]
    return pa.chunked_array([pa.StructArray.from_arrays(arrays, fields=fields, mask=validity)])
