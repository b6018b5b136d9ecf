"""2.0 lists and blobs: list offsets resolved page by page, list arrays assembled, blob bytes fetched."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file.arrow import build_binary
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.file.v2_0 import decode
from lance_table.storage.sources import ByteSource, read_joined


def list_layout(pages: Iterable[tuple[Any, Runs, PageIO, int]]) -> tuple[np.ndarray, np.ndarray, Runs]:
    """Validity, lengths and the item rows of the selected lists.

    ``pages`` yields, for each page holding selected rows, its ``List`` encoding, the selected rows
    within the page, its page access and the number of items in the pages before it.

    Raises:
        CorruptFileError: offsets point past a page's items.
    """
    valid_parts, length_parts, first_parts, last_parts = [], [], [], []
    for enc, local, io, base in pages:
        raw_ends, raw_prev = decode.read_end_offsets(enc.offsets, io, local)
        valid, lengths, first, last = decode.resolve_ends(
            raw_ends, raw_prev, local, enc.null_offset_adjustment, io
        )
        if last.size and int(last.max()) > enc.num_items:
            raise io.corrupt(f"list offsets point past the page's {enc.num_items} items")
        valid_parts.append(valid)
        length_parts.append(lengths)
        first_parts.append(first + base)
        last_parts.append(last + base)
    first = np.concatenate(first_parts)
    item_runs = Runs.normalized(first, np.concatenate(last_parts) - first)
    return np.concatenate(valid_parts), np.concatenate(length_parts), item_runs


def list_array(
    dtype: pa.DataType, valid: np.ndarray, lengths: np.ndarray, items: pa.Array, name: str, path: str
) -> pa.Array:
    """A list (or large list) array of ``items`` cut by ``lengths``.

    Raises:
        UnsupportedFormatError: a (non-large) list column holds more than 2**31 items.
    """
    large = pa.types.is_large_list(dtype)
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not large and offsets[-1] >= 2**31:
        raise UnsupportedFormatError(f"list column {name} has more than 2^31 items", path=path)
    mask = pa.array(~valid) if not valid.all() else None
    cls = pa.LargeListArray if large else pa.ListArray
    off = pa.array(offsets if large else offsets.astype(np.int32))
    return cls.from_arrays(off, items, type=dtype, mask=mask)


def blob_array(descriptors: pa.StructArray, source: ByteSource, dtype: pa.DataType, io: PageIO) -> pa.Array:
    """The values of a blob column from its (position, size) descriptors: only their bytes are read."""
    pos = np.asarray(descriptors.field("position")).astype(np.int64)
    size = np.asarray(descriptors.field("size")).astype(np.int64)
    valid = ~((pos == 1) & (size == 0))  # nulls are stored as (1, 0)
    has = valid & (size > 0)
    want = list(zip(pos[has].tolist(), size[has].tolist()))
    data = pa.py_buffer(read_joined(source, want))
    return build_binary(dtype, valid, np.where(valid, size, 0), data, 0, io)
