"""The shapes of a file's fields as the v2 reader sees them: which columns hold one value per row,
which fields have nesting, which store nothing at all."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_table._lru import LRU
from lance_table.file.v2_0.layout import is_packed_struct
from lance_table.file.v2_1.layout import is_packed_struct as is_packed_struct21
from lance_table.file.v2_1.layout import leaf_columns as leaf_columns21
from lance_table.schema import FieldNode

if TYPE_CHECKING:
    from lance_table.file.container import FileMetadata


def row_columns(roots: list[FieldNode], col_of: dict[int, int], structural: bool) -> frozenset[int]:
    """The columns that hold one value per row of the file.

    2.1/2.2: every column (a leaf's page lengths count rows). 2.0: the column of each top-level
    field, and of the fields of top-level structs (a struct's own column and the columns below a
    list count other things).
    """
    if structural:
        return frozenset(col_of.values())
    out: set[int] = set()
    # (a loop, not a recursive closure: a closure that calls itself is a reference cycle, left
    # to the garbage collector with everything it holds -- here, through the caller, a reader)
    todo = list(roots)
    while todo:
        node = todo.pop()
        if pa.types.is_struct(node.arrow_type) and not is_packed_struct(node):
            todo.extend(node.children)
        elif node.id in col_of:
            out.add(col_of[node.id])
    return frozenset(out)


FLAT, NESTED, LEAFLESS = 0, 1, 2


def field_shape(node: FieldNode) -> int:
    """Whether a field stores nothing (a struct without leaves), has nesting, or neither."""
    t = node.arrow_type
    if leafless(node):
        return LEAFLESS
    nested = pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t)
    return NESTED if nested else FLAT


def leafless(node: FieldNode) -> bool:
    """A struct with no leaf below it (``struct<>``, ``struct<a: struct<>>``): no column stores it."""
    return pa.types.is_struct(node.arrow_type) and all(leafless(c) for c in node.children)


def empty_structs(dtype: pa.DataType, n: int) -> pa.Array:
    """``n`` valid rows of a leafless struct type."""
    children = [empty_structs(f.type, n) for f in dtype]
    if not children:
        return pa.StructArray.from_buffers(dtype, n, [None], null_count=0)
    return pa.StructArray.from_arrays(children, fields=list(dtype))


def leaf_paths(node: FieldNode, path: list[pa.Field]) -> Iterator[tuple[FieldNode, list[pa.Field]]]:
    """The leaf columns below ``node`` (packed structs are leaves), with their paths of fields."""
    if not node.children or is_packed_struct21(node):
        yield node, path
        return
    for child in node.children:
        yield from leaf_paths(child, [*path, child.to_arrow_field()])


def structural_columns(meta: FileMetadata) -> tuple[dict[int, int], frozenset[int], int]:
    """The column of each leaf field of a 2.1/2.2 file, the columns that hold one value per row,
    and the columns its fields need: made once for the files of one file descriptor (see
    :class:`~lance_table.file.container.Descriptor`), or of one field list. Only read."""
    described = meta.described
    if described is not None:
        return described.derived("structural columns", lambda: _leaf_columns(described.roots))
    fields = meta.fields
    hit = _COLUMNS_OF.get(id(fields))
    if hit is not None and hit[0] is fields:
        return hit[1]
    found = _leaf_columns(meta.roots)
    _COLUMNS_OF.put(id(fields), (fields, found))  # (the fields are kept: their id stays theirs)
    return found


def _leaf_columns(roots: Sequence[FieldNode]) -> tuple[dict[int, int], frozenset[int], int]:
    col_of = leaf_columns21(list(roots))
    rows = frozenset(row_columns(list(roots), col_of, True))
    return col_of, rows, max(col_of.values(), default=-1) + 1


#: :func:`structural_columns` of the last fields read (files whose metadata was made by hand)
_COLUMNS_OF: LRU[int, tuple[tuple[Any, ...], tuple[dict[int, int], frozenset[int], int]]] = LRU(64)
