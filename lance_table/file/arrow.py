"""Arrow arrays built from decoded pieces, shared by the 2.0 and 2.1/2.2 decoders."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file.pageio import PageIO


def with_validity(arr: pa.Array, valid: np.ndarray) -> pa.Array:
    """``arr`` with its nulls replaced by the ``valid`` mask (True = valid)."""
    if valid.all():
        return arr
    t = arr.type
    if pa.types.is_fixed_size_list(t):
        return pa.FixedSizeListArray.from_arrays(arr.values, type=t, mask=pa.array(~valid))
    if pa.types.is_struct(t):
        kids = [arr.field(i) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(kids, fields=list(t), mask=pa.array(~valid))
    if pa.types.is_dictionary(t):
        idx = with_validity(arr.indices, valid)
        return pa.DictionaryArray.from_arrays(idx, arr.dictionary)
    if arr.offset != 0 or arr.null_count:
        valid = valid & np.asarray(arr.is_valid())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        t,
        len(arr),
        [bitmap, *arr.buffers()[1:]],
        null_count=int(valid.size - np.count_nonzero(valid)),
        offset=arr.offset,
    )


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
