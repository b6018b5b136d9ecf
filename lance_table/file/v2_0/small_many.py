"""One column of many small 2.0 files decoded in one numpy pass.

A 2.0 table of many small appends holds thousands of files of a few hundred rows, each column
one page. Read file by file, each page costs a few dozen Python calls around a few hundred bytes
of values. Here the files' bytes are joined into one buffer (see :func:`small_many.joined` of
2.1), each page's encoding is read once per file into a :class:`Leaf` (where its buffers are
and what they hold, see :mod:`small_layout`), and the pages of all files are decoded together:
flat values, vectors and bitmaps (validity, booleans) as one gather, strings through their end
offsets, dictionaries of strings as their items joined and their indices moved onto the join;
structs field by field and lists through their offsets. Pages of files whose encodings differ
(a dictionary in one file, plain strings in another) are decoded in groups and put back in file
order.

:func:`layout` returns None for a file it cannot batch (a list in several pages, compressed buffers,
packed structs, blobs...); :func:`decode` returns None when any bytes do not check out, and the
caller then reads the files one by one, which also says what is wrong with a damaged one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.file.arrow import with_validity
from lance_table.file.v2_0.small_layout import (
    ERRORS,
    INDEX_TYPES,
    MAX_VAR_BYTES,
    FileLayout,
    Leaf,
    List,
    Node,
    Pages,
    Struct,
    layout,
    value_bits,
)
from lance_table.file.v2_1.byteranges import exclusive_cumsum, gather, in_file_order, spans

__all__ = [
    "FileLayout",
    "Leaf",
    "List",
    "Pages",
    "Struct",
    "decode",
    "decoded",
    "end_offsets",
    "layout",
    "leaves_of",
    "string_array",
]


def decode(
    layouts: Sequence[FileLayout], data: memoryview, bases: np.ndarray, column: int, dtype: pa.DataType
) -> pa.Array | None:
    """Every row of column ``column`` (of the layouts' selection) of the files, one file after
    another, from their bytes ``data`` (the file of ``layouts[k]`` from ``bases[k]``); None when
    the files must be read one by one."""
    try:
        u8 = np.frombuffer(data, np.uint8)
        # the pages' places are the file's: each file's bytes in ``data`` start at its span's start
        origins = bases - np.fromiter((f.start for f in layouts), np.int64, len(layouts))
        return decoded([f.columns[column] for f in layouts], u8, origins, dtype)
    except ERRORS:
        return None


def decoded(nodes: list[Any], u8: np.ndarray, bases: np.ndarray, dtype: pa.DataType) -> pa.Array | None:
    first = nodes[0]
    if isinstance(first, Struct):
        if not pa.types.is_struct(dtype) or not all(isinstance(n, Struct) for n in nodes):
            return None
        kids = []
        for i, field in enumerate(dtype):
            got = decoded([n.children[i] for n in nodes], u8, bases, field.type)
            if got is None:
                return None
            kids.append(got)
        return pa.StructArray.from_arrays(kids, fields=list(dtype))
    if isinstance(first, List):
        return _list(nodes, u8, bases, dtype)
    if any(isinstance(n, Pages) for n in nodes):
        nodes, bases = leaves_of(nodes, bases)
    if not all(isinstance(n, Leaf) for n in nodes):
        return None
    key = nodes[0].key
    if all(n.key == key for n in nodes):
        return _leaves(nodes, u8, bases, dtype)
    counts = np.fromiter((n.count for n in nodes), np.int64, len(nodes))
    return in_file_order(
        [n.key for n in nodes],
        counts,
        lambda sel: _leaves([nodes[k] for k in sel.tolist()], u8, bases[sel], dtype),
    )


def leaves_of(nodes: Sequence[Any], bases: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The pages of the files' columns (a :class:`Pages`' each, in row order), each with its
    file's base."""
    per = [n.pages if isinstance(n, Pages) else (n,) for n in nodes]
    counts = np.fromiter(map(len, per), np.int64, len(per))
    return [leaf for pages in per for leaf in pages], np.repeat(bases, counts)


def _buffers(
    nodes: Sequence[Any], u8: np.ndarray, bases: np.ndarray, b: int
) -> tuple[np.ndarray, np.ndarray]:
    """Where buffer ``b`` of each page is in the joined bytes, and its size (checked to lie there)."""
    at = bases + np.fromiter((n.at[b][0] for n in nodes), np.int64, len(nodes))
    size = np.fromiter((n.at[b][1] for n in nodes), np.int64, len(nodes))
    if bool(np.any(at < 0)) or int((at + size).max()) > u8.size:
        raise IndexError("a page's buffer lies outside its file's span")
    return at, size


def _bits(u8: np.ndarray, at: np.ndarray, size: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The first ``counts`` bits (least significant first) of the bitmaps at ``at``, joined."""
    if bool(np.any((counts + 7) // 8 > size)):
        raise IndexError("a bitmap is shorter than its page")
    nbytes = (counts + 7) // 8
    raw = np.frombuffer(gather(u8.data, at, nbytes), np.uint8)
    bits = np.unpackbits(raw, bitorder="little")
    return bits[spans(exclusive_cumsum(nbytes) * 8, counts)].astype(bool)


def _leaves(nodes: list[Leaf], u8: np.ndarray, bases: np.ndarray, dtype: pa.DataType) -> pa.Array | None:
    kind, bits, has = nodes[0].key
    counts = np.fromiter((n.count for n in nodes), np.int64, len(nodes))
    total = int(counts.sum())
    if kind == "nulls":
        return pa.nulls(total, dtype)
    valid = None
    if has:
        valid = _bits(u8, *_buffers(nodes, u8, bases, 0), counts)
    b = 1 if has else 0
    if kind == "bool":
        values = _bits(u8, *_buffers(nodes, u8, bases, b), counts)
        arr = pa.Array.from_buffers(
            dtype, total, [None, pa.py_buffer(np.packbits(values, bitorder="little"))]
        )
    elif kind == "fixed":
        if value_bits(dtype) != bits:
            return None
        at, size = _buffers(nodes, u8, bases, b)
        width = counts * (bits // 8)
        if bool(np.any(width > size)):
            return None
        arr = pa.Array.from_buffers(dtype, total, [None, pa.py_buffer(gather(u8.data, at, width))])
    elif kind == "vectors":
        vt = dtype.value_type
        if not pa.types.is_fixed_size_list(dtype) or value_bits(vt) != bits:
            return None
        at, size = _buffers(nodes, u8, bases, b)
        width = counts * (dtype.list_size * bits // 8)
        if bool(np.any(width > size)):
            return None
        buf = pa.py_buffer(gather(u8.data, at, width))
        values = pa.Array.from_buffers(vt, total * dtype.list_size, [None, buf])
        arr = pa.FixedSizeListArray.from_arrays(values, type=dtype)
    elif kind == "binary":
        got = _strings(nodes, u8, bases, 0, counts, dtype)
        if got is None:
            return None
        arr = got
    else:  # a dictionary of strings: index 0 is null, i is item i - 1
        items = np.fromiter((n.items for n in nodes), np.int64, len(nodes))
        dictionary = _strings(nodes, u8, bases, 1, items, dtype)
        at, size = _buffers(nodes, u8, bases, 0)
        width = counts * (bits // 8)
        if dictionary is None or bool(np.any(width > size)):
            return None
        idx = np.frombuffer(gather(u8.data, at, width), INDEX_TYPES[bits]).astype(np.int64)
        if idx.size and bool(np.any(idx > np.repeat(items, counts))):
            return None
        null = idx == 0
        idx += np.repeat(exclusive_cumsum(items), counts) - 1
        arr = dictionary.take(pa.array(idx, mask=null if null.any() else None))
    if len(arr) != total:
        return None
    return arr if valid is None else with_validity(arr, valid)


def _strings(
    nodes: list[Leaf], u8: np.ndarray, bases: np.ndarray, b: int, counts: np.ndarray, dtype: pa.DataType
) -> pa.Array | None:
    """The strings of the pages' end offsets (buffer ``b``) and bytes (buffer ``b + 1``), ``counts``
    of each page (the checks of the one-file decoder: ends that do not decrease, within the bytes)."""
    ends_at, ends_size = _buffers(nodes, u8, bases, b)
    data_at, data_size = _buffers(nodes, u8, bases, b + 1)
    if bool(np.any(counts * 8 > ends_size)):
        return None
    raw = np.frombuffer(gather(u8.data, ends_at, counts * 8), np.uint64).astype(np.int64)
    if bool(np.any(raw < 0)):
        return None
    found = end_offsets(nodes, counts, raw)
    if found is None:
        return None
    _, valid, lengths, last = found
    if bool(np.any(last > data_size)) or int(last.sum()) > MAX_VAR_BYTES:
        return None
    return string_array(dtype, valid, lengths, pa.py_buffer(gather(u8.data, data_at, last)))


def string_array(dtype: pa.DataType, valid: np.ndarray, lengths: np.ndarray, data: pa.Buffer) -> pa.Array:
    """A string or binary array of ``dtype`` from each entry's validity and length and the bytes
    of all entries back to back (the ends of :func:`end_offsets`)."""
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    nulls = int(lengths.size - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    off = pa.py_buffer(offsets if large else offsets.astype(np.int32))
    return pa.Array.from_buffers(dtype, lengths.size, [bitmap, off, data], null_count=nulls)


def _list(nodes: list[Any], u8: np.ndarray, bases: np.ndarray, dtype: pa.DataType) -> pa.Array | None:
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)) or not all(
        isinstance(n, List) for n in nodes
    ):
        return None
    counts = np.fromiter((n.count for n in nodes), np.int64, len(nodes))
    at = bases + np.fromiter((n.at[0] for n in nodes), np.int64, len(nodes))
    size = np.fromiter((n.at[1] for n in nodes), np.int64, len(nodes))
    if bool(np.any(at < 0)) or int((at + size).max()) > u8.size or bool(np.any(counts * 8 > size)):
        return None
    raw = np.frombuffer(gather(u8.data, at, counts * 8), np.uint64).astype(np.int64)
    found = end_offsets(nodes, counts, raw)
    if found is None:
        return None
    ends, valid, lengths, last = found
    items = np.fromiter((n.items for n in nodes), np.int64, len(nodes))
    if bool(np.any(last > items)):
        return None
    child_counts = np.fromiter((_count(n.child) for n in nodes), np.int64, len(nodes))
    if bool(np.any(child_counts != items)) or bool(np.any(last != items)):
        return None  # items past the last list: read one by one
    child = decoded([n.child for n in nodes], u8, bases, dtype.value_type)
    if child is None or len(child) != int(items.sum()):
        return None
    large = pa.types.is_large_list(dtype)
    offsets = np.zeros(ends.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not large and offsets[-1] >= 2**31:
        return None
    mask = pa.array(~valid) if not valid.all() else None
    cls = pa.LargeListArray if large else pa.ListArray
    off = pa.array(offsets if large else offsets.astype(np.int32))
    return cls.from_arrays(off, child, type=dtype, mask=mask)


def _count(node: Node) -> int:
    """The values of a (list's item) field's page; a struct's, its first field's."""
    if isinstance(node, Struct):
        return _count(node.children[0]) if node.children else -1
    return node.count


def end_offsets(
    nodes: list[Any], counts: np.ndarray, raw: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The files' end offsets of strings or lists (``counts[k]`` in file ``k``; ``raw`` as stored,
    a null's end moved up by its file's ``adjust``): the ends as positions, which entries are
    valid, each entry's length and each file's last end; None where an entry ends before the one
    before it."""
    adjust = np.repeat(np.fromiter((n.adjust for n in nodes), np.int64, len(nodes)), counts)
    valid = (raw < adjust) | (adjust == 0)
    ends = np.where(valid, raw, raw - adjust)
    first = exclusive_cumsum(counts)
    prev = np.empty_like(ends)
    if ends.size:
        prev[1:] = ends[:-1]
    has = counts > 0
    prev[first[has]] = 0
    lengths = ends - prev
    if lengths.size and int(lengths.min()) < 0:
        return None
    last = np.zeros(len(nodes), np.int64)
    last[has] = ends[first[has] + counts[has] - 1]
    return ends, valid, lengths, last
