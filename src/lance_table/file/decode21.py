"""Decoding of Lance 2.1/2.2 pages (``lance.encodings21.PageLayout``) for columns without nesting.

Supported: mini-block pages (u16 chunk words in 2.1, u32 in 2.2) with definition levels for nulls,
constant pages (all null or one repeated value) and full-zip pages without repetition/definition.
Value compressions: flat, inline and out-of-line FastLanes bitpacking, variable, FSST, dictionary,
RLE, general LZ4/ZSTD and fixed-size lists of fixed-width values. Lists, structs and anything else
raise :class:`UnsupportedFormatError` naming what is missing.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.file import fastlanes, fsst
from lance_table.file.compress21 import (
    Fixed,
    Values,
    Var,
    concat_values,
    decode_block,
    decode_levels,
    decode_values,
    to_arrow,
    unsupported,
)
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs


def _pad8(x: int) -> int:
    return (x + 7) & ~7


def mini_block(
    layout: Any, io: PageIO, dtype: pa.DataType, large_chunks: bool, runs: Runs | None = None
) -> pa.Array:
    """Decode a mini-block page of a column without repetition: every row, or only ``runs``.

    With ``runs`` only the chunks that hold those rows are decoded (the chunk metadata says how
    many values each chunk holds), and the result has exactly the selected rows.
    """
    if layout.repetition_index_depth or layout.HasField("rep_compression"):
        raise unsupported(io, "lists (repetition levels)")
    n_items = int(layout.num_items)
    count = len(io.page.buffer_offsets)
    if count < 2:
        raise io.corrupt("mini-block page without metadata and data buffers")
    meta, data = io.whole(0), io.whole(1)
    dictionary = None
    if layout.HasField("dictionary"):
        if count < 3:
            raise io.corrupt("dictionary page without a dictionary buffer")
        dictionary = decode_block(layout.dictionary, io.whole(2), int(layout.num_dictionary_items), io)
    word_type = np.uint32 if large_chunks else np.uint16
    words = np.frombuffer(meta, word_type, len(meta) // np.dtype(word_type).itemsize).astype(np.int64)
    size_fmt, size_len = ("<I", 4) if large_chunks else ("<H", 2)
    has_def = layout.HasField("def_compression")
    chunk_bytes = ((words >> 4) + 1) * 8
    counts = np.left_shift(1, words & 0xF)
    if counts.size:
        counts[-1] = n_items - int(counts[:-1].sum())
    byte_starts = np.concatenate([[0], np.cumsum(chunk_bytes)])
    row_starts = np.concatenate([[0], np.cumsum(counts)])
    if (
        (counts.size and int(counts[-1]) < 0)
        or int(byte_starts[-1]) > len(data)
        or int(row_starts[-1]) != n_items
    ):
        raise io.corrupt(f"mini-block chunks do not describe the page's {n_items} values")
    if runs is None or runs.is_span(0, n_items):
        chosen = np.arange(words.size)
        positions = None
    else:
        positions = runs.positions()
        chunk_of = np.searchsorted(row_starts[1:], positions, side="right")
        chosen = np.unique(chunk_of)
    pieces: list[Values] = []
    defs = []
    done = 0
    for i in chosen.tolist():
        n = int(counts[i])
        chunk = memoryview(data)[int(byte_starts[i]) : int(byte_starts[i + 1])]
        done += n
        (num_levels,) = struct.unpack_from("<H", chunk, 0)
        off = 2
        def_size = 0
        if has_def:
            (def_size,) = struct.unpack_from("<H", chunk, off)
            off += 2
        sizes = []
        for _ in range(int(layout.num_buffers)):
            (size,) = struct.unpack_from(size_fmt, chunk, off)
            sizes.append(size)
            off += size_len
        off = _pad8(off)
        if has_def:
            defs.append(decode_levels(layout.def_compression, chunk[off : off + def_size], num_levels, io))
            off = _pad8(off + def_size)
        buffers: list[bytes | memoryview] = []
        for size in sizes:
            if off + size > len(chunk):
                raise io.corrupt(f"mini-block chunk {i} buffer runs past the chunk")
            buffers.append(chunk[off : off + size])
            off = _pad8(off + size)
        pieces.append(decode_values(layout.value_compression, buffers, n, io))
    values = concat_values(pieces, io) if pieces else Fixed(b"", 8)
    valid = (np.concatenate(defs) == 0) if defs else None
    if dictionary is not None:
        if not isinstance(values, Fixed):
            raise io.corrupt("dictionary indices are not fixed-width")
        idx = np.frombuffer(values.data, fastlanes.DTYPES[values.bits])[:done].astype(np.int64)
        items_n = int(layout.num_dictionary_items)
        value_type = dtype.value_type if pa.types.is_dictionary(dtype) else dtype
        items = to_arrow(dictionary, value_type, items_n, io)
        if (
            idx.size
            and int(idx.max()) >= items_n
            and (valid is None or int(idx[valid].max(initial=0)) >= items_n)
        ):
            raise io.corrupt("dictionary index past the dictionary")
        idx = np.where(idx < items_n, idx, 0)
        if pa.types.is_dictionary(dtype):
            arr: pa.Array = pa.DictionaryArray.from_arrays(pa.array(idx).cast(dtype.index_type), items)
        else:
            arr = items.take(pa.array(idx))
    else:
        arr = to_arrow(values, dtype, done, io)
    if valid is not None and not valid.all():
        from lance_table.file.decode20 import with_validity

        arr = with_validity(arr, valid)
    if positions is None:
        return arr
    # rows of the decoded chunks -> the selected rows
    base = np.concatenate([[0], np.cumsum(counts[chosen])])[:-1]
    local = base[np.searchsorted(chosen, chunk_of)] + (positions - row_starts[chunk_of])
    return arr.take(pa.array(local))


def constant(layout: Any, io: PageIO, dtype: pa.DataType) -> pa.Array:
    n = int(io.page.length)
    if layout.HasField("rep_compression") or layout.HasField("def_compression"):
        raise unsupported(io, "constant pages with repetition/definition levels")
    if not layout.HasField("inline_value"):
        return pa.nulls(n, dtype)
    value = bytes(layout.inline_value)
    return to_arrow(Fixed(value * n, len(value) * 8), dtype, n, io)


def full_zip(layout: Any, io: PageIO, dtype: pa.DataType) -> pa.Array:
    if layout.bits_rep or layout.bits_def:
        raise unsupported(io, "full-zip pages with repetition/definition levels")
    n = int(layout.num_items)
    data = io.whole(0)
    if layout.WhichOneof("details") == "bits_per_value":
        return to_arrow(decode_values(layout.value_compression, [data], n, io), dtype, n, io)
    width = int(layout.bits_per_offset) // 8
    if width not in (4, 8):
        raise io.corrupt(f"full-zip offsets of {width * 8} bits")
    # values are [length][bytes] back to back: walk the lengths (one step per value)
    lengths = np.empty(n, np.int64)
    starts = np.empty(n, np.int64)
    at = 0
    fmt = "<I" if width == 4 else "<Q"
    for i in range(n):
        if at + width > len(data):
            raise io.corrupt("full-zip values run past the page")
        (length,) = struct.unpack_from(fmt, data, at)
        starts[i] = at + width
        lengths[i] = length
        at += width + length
    if at > len(data):
        raise io.corrupt("full-zip values run past the page")
    keep = np.zeros(len(data), bool)
    for s, ln in zip(starts.tolist(), lengths.tolist()):
        keep[s : s + ln] = True
    body = np.frombuffer(data, np.uint8)[keep].tobytes()
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values: Values = Var(body, offsets)
    if layout.value_compression.WhichOneof("compression") == "fsst":
        out, new = fsst.decode(layout.value_compression.fsst.symbol_table, body, offsets)
        values = Var(out, new)
    return to_arrow(values, dtype, n, io)


def decode_page(layout: Any, io: PageIO, dtype: pa.DataType, large_chunks: bool, runs: Runs) -> pa.Array:
    """The rows ``runs`` of a 2.1/2.2 page of a column without nesting."""
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        return mini_block(layout.mini_block_layout, io, dtype, large_chunks, runs)
    if kind == "constant_layout":
        arr = constant(layout.constant_layout, io, dtype)
    elif kind == "full_zip_layout":
        arr = full_zip(layout.full_zip_layout, io, dtype)
    else:
        raise unsupported(io, f"page layout {kind!r}")
    if len(arr) != io.page.length:
        raise io.corrupt(f"page decodes to {len(arr)} rows, its metadata says {io.page.length}")
    return arr if runs.is_span(0, len(arr)) else arr.take(pa.array(runs.positions()))
