"""Matching a column read from a data file to the dataset's field by field ids: a nested field
renamed or dropped since the file was written (``alter_columns``, ``drop_columns``) only changed
the manifest, so struct children are picked by id, renamed, and missing ones read as nulls."""

from __future__ import annotations

import pyarrow as pa

from lance_table.schema import FieldNode


def same_shape(node: FieldNode, file_node: FieldNode) -> bool:
    """Whether the file's field has the dataset field's children (ids and names) at every depth."""
    if len(node.children) != len(file_node.children):
        return False
    return all(
        a.id == b.id and a.name == b.name and same_shape(a, b)
        for a, b in zip(node.children, file_node.children)
    )


def conform(col: pa.ChunkedArray, node: FieldNode, file_node: FieldNode) -> pa.ChunkedArray:
    """``col`` (as the file stores ``file_node``) with the children of ``node``, matched by id."""
    if same_shape(node, file_node):
        return col
    return pa.chunked_array([_array(c, node, file_node) for c in col.chunks], type=_type(node, file_node))


def _type(node: FieldNode, file_node: FieldNode) -> pa.DataType:
    """The type ``_array`` returns: the file's types where the file has the field, with the
    dataset's names and children."""
    if not node.children:
        return file_node.arrow_type
    by_id = {c.id: c for c in file_node.children}
    if pa.types.is_struct(node.arrow_type):
        kids = []
        for child in node.children:
            f = by_id.get(child.id)
            t = child.arrow_type if f is None else _type(child, f)
            kids.append(pa.field(child.name, t, child.field.nullable or f is None))
        return pa.struct(kids)
    if len(file_node.children) == 1 and len(node.children) == 1:
        inner = node.children[0]
        value_field = pa.field(inner.name, _type(inner, file_node.children[0]), inner.field.nullable)
        t = node.arrow_type
        if pa.types.is_large_list(t):
            return pa.large_list(value_field)
        if pa.types.is_fixed_size_list(t):
            return pa.list_(value_field, t.list_size)
        if pa.types.is_list(t):
            return pa.list_(value_field)
    return file_node.arrow_type


def _array(arr: pa.Array, node: FieldNode, file_node: FieldNode) -> pa.Array:
    if not node.children or same_shape(node, file_node):
        return arr
    if pa.types.is_struct(arr.type):
        pos = {c.id: i for i, c in enumerate(file_node.children)}
        arrays, fields = [], []
        for child in node.children:
            i = pos.get(child.id)
            if i is None:
                a = pa.nulls(len(arr), child.arrow_type)
            else:
                a = _array(arr.field(i), child, file_node.children[i])
            arrays.append(a)
            fields.append(pa.field(child.name, a.type, child.field.nullable or i is None))
        mask = arr.is_null() if arr.null_count else None
        # struct children are sliced with their parent by ``field``: offsets are already applied
        return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)
    if (
        pa.types.is_list(arr.type)
        or pa.types.is_large_list(arr.type)
        or pa.types.is_fixed_size_list(arr.type)
    ):
        if len(node.children) != 1 or len(file_node.children) != 1:
            return arr
        target = _type(node, file_node)
        mask = arr.is_null() if arr.null_count else None
        if pa.types.is_fixed_size_list(arr.type):
            size = arr.type.list_size
            flat = arr.values.slice(arr.offset * size, len(arr) * size)
            values = _array(flat, node.children[0], file_node.children[0])
            return pa.FixedSizeListArray.from_arrays(values, type=target, mask=mask)
        values = _array(arr.values, node.children[0], file_node.children[0])
        cls = pa.LargeListArray if pa.types.is_large_list(arr.type) else pa.ListArray
        return cls.from_arrays(arr.offsets, values, type=target, mask=mask)
    return arr
