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

from lance_table._buffers import empty
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
    "int64s_at",
    "layout",
    "leaves_of",
    "list_of",
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
    if not bool(np.any(counts[:-1] % 8)):  # (pages of whole bytes of bits: the bitmaps joined are the bits)
        return np.unpackbits(raw, count=int(counts.sum()), bitorder="little").view(np.bool_)
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
    raw = int64s_at(u8, ends_at, counts * 8)
    found = end_offsets(nodes, counts, raw)
    if found is None:
        return None
    _, valid, lengths, last = found
    if bool(np.any(last > data_size)) or int(last.sum()) > MAX_VAR_BYTES:
        return None
    return string_array(dtype, valid, lengths, pa.py_buffer(gather(u8.data, data_at, last)))


def string_array(dtype: pa.DataType, valid: np.ndarray, lengths: np.ndarray, data: pa.Buffer) -> pa.Array:
    """A string or binary array of ``dtype`` from each entry's validity and length and the bytes
    of all entries back to back (the ends of :func:`end_offsets`).

    Raises:
        ValueError: more bytes than the offsets of ``dtype`` hold (a caller gives up).
    """
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    offsets = offsets_of(lengths, large)
    if offsets is None:
        raise ValueError("more string bytes than 32-bit offsets hold")
    nulls = int(lengths.size - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(dtype, lengths.size, [bitmap, pa.py_buffer(offsets), data], null_count=nulls)


def _list(nodes: list[Any], u8: np.ndarray, bases: np.ndarray, dtype: pa.DataType) -> pa.Array | None:
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)) or not all(
        isinstance(n, List) for n in nodes
    ):
        return None
    child = decoded([n.child for n in nodes], u8, bases, dtype.value_type)
    return None if child is None else list_of(nodes, u8, bases, dtype, child)


def list_of(
    nodes: Sequence[List], u8: np.ndarray, bases: np.ndarray, dtype: pa.DataType, child: pa.Array
) -> pa.Array | None:
    """The files' lists of ``dtype`` from their end offsets (each :class:`List`'s ``at``, from its
    file's base in ``u8``) over the items ``child`` of all the files, one file's after another's;
    None where they do not check out: ends that decrease or lie past the page's items, items
    past the last list, or a child of another length."""
    counts = np.fromiter((n.count for n in nodes), np.int64, len(nodes))
    at = bases + np.fromiter((n.at[0] for n in nodes), np.int64, len(nodes))
    size = np.fromiter((n.at[1] for n in nodes), np.int64, len(nodes))
    if bool(np.any(at < 0)) or int((at + size).max()) > u8.size or bool(np.any(counts * 8 > size)):
        return None
    raw = int64s_at(u8, at, counts * 8)
    found = end_offsets(list(nodes), counts, raw)
    if found is None:
        return None
    _, valid, lengths, last = found
    items = np.fromiter((n.items for n in nodes), np.int64, len(nodes))
    child_counts = np.fromiter((_count(n.child) for n in nodes), np.int64, len(nodes))
    if bool(np.any(child_counts != items)) or bool(np.any(last != items)):
        return None  # items past the last list (or ends past the items): read one by one
    if len(child) != int(items.sum()):
        return None
    large = pa.types.is_large_list(dtype)
    offsets = offsets_of(lengths, large)
    if offsets is None:
        return None
    nulls = int(lengths.size - np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        dtype, lengths.size, [bitmap, pa.py_buffer(offsets)], null_count=nulls, children=[child]
    )


def _count(node: Node) -> int:
    """The values of a (list's item) field's page; a struct's, its first field's."""
    if isinstance(node, Struct):
        return _count(node.children[0]) if node.children else -1
    return node.count


#: values per file above which a value of each file is repeated over its entries a slice at a
#: time, into memory of Arrow's pool (see :func:`_repeated`)
SLICE_VALUES = 1024


def _repeated(values: np.ndarray, counts: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``np.repeat(values, counts)`` (``first``: where each file's entries start). Files of many
    entries each are filled a slice at a time into memory of Arrow's pool: a fresh array of a
    million values costs more to map and fault in than to fill."""
    n = int(counts.sum())
    if values.size * SLICE_VALUES > n:
        return np.repeat(values, counts)
    out = empty(n, values.dtype)
    for v, at, c in zip(values.tolist(), first.tolist(), counts.tolist()):
        out[at : at + c] = v
    return out


def int64s_at(u8: np.ndarray, at: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """The int64 values of the byte ranges ``[at, at + nbytes)`` of ``u8`` (checked by the caller
    to lie in it), back to back. Long ranges (a file's end offsets each) are copied a slice at a
    time into memory of Arrow's pool; many short ones, gathered."""
    total = int(nbytes.sum())
    if at.size * SLICE_VALUES * 8 > total:
        return np.frombuffer(gather(u8.data, at, nbytes), np.int64)
    out = empty(total // 8, np.int64)
    view = out.view(np.uint8)
    pos = 0
    for start, size in zip(at.tolist(), nbytes.tolist()):
        view[pos : pos + size] = u8[start : start + size]
        pos += size
    return out


def end_offsets(
    nodes: list[Any], counts: np.ndarray, raw: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The files' end offsets of strings or lists (``counts[k]`` in file ``k``; ``raw`` as stored,
    as int64, a null's end moved up by its file's ``adjust``): the ends as positions, which
    entries are valid, each entry's length and each file's last end; None where an entry ends
    before the one before it (or before 0: an end of 2**63 or more)."""
    total = raw.size
    first = exclusive_cumsum(counts)
    adjust = np.fromiter((n.adjust for n in nodes), np.int64, len(nodes))
    # a null's raw end is above adjust - 1 (unsigned: an adjust of 0, no nulls, is above all);
    # (in place, in memory of Arrow's pool: arrays of a million ends cost more to map than to fill)
    per = _repeated(adjust - 1, counts, first)
    null = np.greater(raw.view(np.uint64), per.view(np.uint64), out=empty(total, np.bool_))
    ends = raw
    if null.any():
        per += 1
        per *= null
        ends = np.subtract(raw, per, out=per)
    has = counts > 0
    lengths = empty(total, np.int64)
    if total:
        lengths[0] = ends[0]
        np.subtract(ends[1:], ends[:-1], out=lengths[1:])
        heads = first[has]
        lengths[heads] = ends[heads]
        if int(lengths.min()) < 0:
            return None
    last = np.zeros(len(nodes), np.int64)
    last[has] = ends[first[has] + counts[has] - 1]
    return ends, np.logical_not(null, out=null), lengths, last


def offsets_of(lengths: np.ndarray, large: bool) -> np.ndarray | None:
    """The offsets (int64 when ``large``, else int32) of entries of ``lengths``, from 0; None
    when they do not fit."""
    total = int(lengths.sum())
    if not large and total >= 2**31:
        return None
    offsets = empty(lengths.size + 1, np.int64 if large else np.int32)
    offsets[0] = 0
    np.cumsum(lengths, out=offsets[1:], dtype=offsets.dtype)
    return offsets
