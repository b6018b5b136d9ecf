"""Arrow arrays built from decoded pieces, shared by the 2.0 and 2.1/2.2 decoders."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
from lance_table.errors import UnsupportedFormatError
from lance_table.file.arrow_take import sliced, take
from lance_table.file.pageio import PageIO
from lance_table.file.rows import drop_null_items
from lance_table.file.runs import Runs


def with_validity(arr: pa.Array, valid: np.ndarray) -> pa.Array:
    """``arr`` with its nulls replaced by the ``valid`` mask (True = valid)."""
    if valid.all():
        return arr
    t = arr.type
    if pa.types.is_fixed_size_list(t):  # (``values`` ignores a slice's offset; ``field`` keeps it)
        items = arr.values.slice(arr.offset * t.list_size, len(arr) * t.list_size)
        return pa.FixedSizeListArray.from_arrays(items, type=t, mask=pa.array(~valid))
    if pa.types.is_struct(t):
        kids = [arr.field(i) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(kids, fields=list(t), mask=pa.array(~valid))
    if pa.types.is_dictionary(t):
        idx = with_validity(arr.indices, valid)
        return pa.DictionaryArray.from_arrays(idx, arr.dictionary)
    if arr.null_count:
        valid = valid & np.asarray(arr.is_valid())
    null_count = int(valid.size - np.count_nonzero(valid))
    if arr.offset:  # a slice: the bitmap starts where its other buffers do
        valid = np.concatenate([np.zeros(arr.offset, bool), valid])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        t, len(arr), [bitmap, *arr.buffers()[1:]], null_count=null_count, offset=arr.offset
    )


def bool_array(mask: np.ndarray) -> pa.BooleanArray:
    """A numpy bool array as an Arrow boolean array without nulls (packed in one numpy call)."""
    bits = pa.py_buffer(np.packbits(mask, bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), mask.size, [None, bits], null_count=0)


def build_binary(
    dtype: pa.DataType,
    valid: np.ndarray,
    lengths: np.ndarray,
    data: pa.Buffer | None,
    data_offset: int,
    io: PageIO,
) -> pa.Array:
    """A string/binary array from validity, value lengths and the concatenated value bytes."""
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not large and offsets[-1] >= 2**31:
        raise UnsupportedFormatError(
            f"{io.what}: {offsets[-1]} bytes of {dtype} exceed 2 GiB; read the column as large_{dtype}",
            path=io.path,
        )
    if data_offset:
        offsets += data_offset
    off_buf = pa.py_buffer(offsets if large else offsets.astype(np.int32))
    null_count = int(valid.size - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(dtype, lengths.size, [bitmap, off_buf, data], null_count=null_count)


def binary_from_offsets(
    dtype: pa.DataType, offsets: np.ndarray, data: pa.Buffer | None, io: PageIO
) -> pa.Array:
    """A string/binary array without nulls from n + 1 non-decreasing int64 ``offsets`` into
    ``data`` (the caller checked them): no lengths and no second cumulative sum."""
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    if not large and offsets.size and int(offsets[-1]) >= 2**31:
        raise UnsupportedFormatError(
            f"{io.what}: {int(offsets[-1])} bytes of {dtype} exceed 2 GiB; read the column as large_{dtype}",
            path=io.path,
        )
    off = offsets
    if off.dtype != (np.int64 if large else np.int32):  # (from Arrow's pool: no fresh pages to fault in)
        off = empty(offsets.size, np.int64 if large else np.int32)
        off[:] = offsets
    return pa.Array.from_buffers(dtype, offsets.size - 1, [None, pa.py_buffer(off), data], null_count=0)


def rows_of(arr: pa.Array, runs: Runs) -> pa.Array:
    """The rows ``runs`` of a decoded page's array: all of it, one slice, or a take."""
    if runs.is_span(0, len(arr)):
        return arr
    if runs.count == 1:
        return sliced(arr, int(runs.starts[0]), int(runs.lengths[0]))
    return take(arr, pa.array(runs.positions()))


def concat_chunks(chunks: list[pa.Array], dtype: pa.DataType) -> pa.Array:
    if not chunks:
        return pa.array([], dtype)
    if len(chunks) == 1:
        return chunks[0]
    if pa.types.is_dictionary(dtype) and any(c.dictionary.null_count for c in chunks):
        # Arrow cannot concatenate dictionaries holding nulls; the null items carry no information
        # once the rows pointing at them are null, so drop them first.
        chunks = [drop_null_items(c) for c in chunks]
    return pa.concat_arrays(chunks)
