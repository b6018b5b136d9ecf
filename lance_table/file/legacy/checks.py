"""What a legacy (0.1) Lance file can store: the checks the writer makes before it writes data."""

from __future__ import annotations

import pyarrow as pa

from lance_table.errors import SchemaError
from lance_table.schema import FieldNode, is_binary_like


def has_dictionary(t: pa.DataType) -> bool:
    """Whether ``t`` is a dictionary or holds one below it."""
    if pa.types.is_dictionary(t):
        return True
    return any(has_dictionary(t.field(i).type) for i in range(t.num_fields))


def check_storable(node: FieldNode) -> None:
    """Refuse types legacy files cannot store.

    Raises:
        SchemaError: the field or one below it has such a type.
    """
    t = node.arrow_type
    if pa.types.is_map(t) or pa.types.is_union(t) or pa.types.is_run_end_encoded(t):
        raise SchemaError(f"field {node.name!r}: {t} cannot be stored in legacy Lance files")
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t) or pa.types.is_string_view(t):
        raise SchemaError(f"field {node.name!r}: {t} cannot be stored in legacy Lance files")
    if pa.types.is_binary_view(t):
        raise SchemaError(f"field {node.name!r}: {t} cannot be stored in legacy Lance files")
    if pa.types.is_dictionary(t):
        v = t.value_type
        numeric = pa.types.is_integer(v) or pa.types.is_floating(v) or pa.types.is_decimal(v)
        if not (numeric or is_binary_like(v)) or not pa.types.is_integer(t.index_type):
            raise SchemaError(f"field {node.name!r}: legacy Lance files cannot store dictionaries of {v}")
    for child in node.children:
        check_storable(child)


def check_dictionary_nulls(node: FieldNode, arr: pa.Array) -> None:
    """Refuse null keys in dictionary fields: legacy keys have no validity, so a null would read back
    as the dictionary's first value (and a column of nothing but nulls has no value to point at).
    A null *value* of the dictionary is stored (as an empty value, which reads back as null).

    Raises:
        SchemaError: a dictionary field (at any depth) holds null keys.
    """
    t = node.arrow_type
    if pa.types.is_dictionary(t):
        nulls = arr.null_count
        if nulls:
            what = "only nulls" if nulls == len(arr) else f"{nulls} null value(s)"
            raise SchemaError(
                f"dictionary field {node.name!r} holds {what}: legacy Lance files cannot store nulls "
                "in dictionary fields (a null would read back as the dictionary's first value); "
                "decode the column or use a newer data storage version"
            )
    elif pa.types.is_struct(t):
        for i, child in enumerate(node.children):
            check_dictionary_nulls(child, arr.field(i))
    elif node.children and has_dictionary(t):  # lists and fixed-size lists
        check_dictionary_nulls(node.children[0], arr.flatten())


def check_nulls(node: FieldNode, arr: pa.Array) -> None:
    """Refuse nulls in fields that are not nullable (the format would silently lose them)."""
    if not node.field.nullable and arr.null_count:
        raise SchemaError(f"field {node.name!r} is not nullable but holds {arr.null_count} null value(s)")
    t = node.arrow_type
    if pa.types.is_struct(t):
        for i, child in enumerate(node.children):
            check_nulls(child, arr.field(i))
    elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and node.children:
        check_nulls(node.children[0], arr.values)


__all__ = ["check_dictionary_nulls", "check_nulls", "check_storable", "has_dictionary"]
