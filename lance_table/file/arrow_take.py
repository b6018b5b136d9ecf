"""Takes and filters of Arrow data that are right on every slice.

pyarrow 26 takes and filters the rows of a fixed-size list of fixed-size lists (alone, or inside
a struct) from the wrong place when the array, or a child of it, is a slice with an offset: the
offset is counted twice, so a scan after deletes, a take or a filtered merge returns other rows'
values. Every take or filter of data whose type lance_table does not choose goes through
:func:`take` and :func:`filter_rows`, which copy such a slice first (one copy of the slice, only for
those types; every other array is taken as it is).
"""

from __future__ import annotations

from typing import Any, TypeVar

import pyarrow as pa

Data = TypeVar("Data", pa.Array, pa.ChunkedArray, pa.RecordBatch, pa.Table)


def _affected(t: pa.DataType) -> bool:
    """Whether Arrow mis-takes slices of type ``t``: a fixed-size list of fixed-size lists, at any
    depth of structs, fixed-size lists and extension types' storage."""
    if isinstance(t, pa.ExtensionType):
        return _affected(t.storage_type)
    if pa.types.is_fixed_size_list(t):
        return pa.types.is_fixed_size_list(t.value_type) or _affected(t.value_type)
    if pa.types.is_struct(t):
        return any(_affected(f.type) for f in t)
    return False


def _offset_inside(arr: pa.Array) -> bool:
    """Whether ``arr`` or a child down its struct and fixed-size-list levels starts at an offset."""
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    if arr.offset:
        return True
    t = arr.type
    if pa.types.is_fixed_size_list(t):
        return _offset_inside(arr.values)  # (the child as stored: ``values`` ignores the offset)
    if pa.types.is_struct(t):
        return any(_offset_inside(arr.field(i)) for i in range(t.num_fields))
    return False


def unsliced(arr: pa.Array) -> pa.Array:
    """``arr``, copied to start at offset 0 where Arrow would take or filter it wrongly."""
    if _affected(arr.type) and _offset_inside(arr):
        return pa.concat_arrays([arr])
    return arr


def sliced(arr: pa.Array, start: int, length: int) -> pa.Array:
    """``arr.slice(start, length)``, copied where Arrow would take or filter the slice wrongly."""
    return unsliced(arr.slice(start, length))


def _guarded(data: Data) -> Data:
    if isinstance(data, pa.Array):
        return unsliced(data)
    if isinstance(data, pa.ChunkedArray):
        if not _affected(data.type):
            return data
        return pa.chunked_array([unsliced(c) for c in data.chunks], type=data.type)
    if not any(_affected(f.type) for f in data.schema):
        return data
    columns = [_guarded(c) for c in data.columns]
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=data.schema)
    return pa.Table.from_arrays(columns, schema=data.schema)


def take(data: Data, indices: Any) -> Data:
    """``data.take(indices)`` (an array, chunked array, record batch or table), right on slices."""
    return _guarded(data).take(indices)


def filter_rows(data: Data, mask: Any) -> Data:
    """``data.filter(mask)`` (a boolean array or, for tables, an expression), right on slices."""
    return _guarded(data).filter(mask)


__all__ = ["filter_rows", "sliced", "take", "unsliced"]
