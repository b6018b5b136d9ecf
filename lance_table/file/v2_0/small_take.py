"""A few rows of many small 2.0 files read together: only the bytes of those rows.

A 2.0 page of plain values is directly addressable: row ``i`` of a page of ``w``-byte values
(numbers, vectors) is at ``i * w`` in its values buffer, its validity bit at byte ``i // 8`` of
its bitmap, a string's end offsets at ``(i - 1) * 8`` and ``i * 8`` of its ends. A take of a
thousand rows of fifty 20k-row files thus needs a few thousand small ranges, not the files'
whole pages: the ranges of every column of a file are read in one request (ranges close together
coalesced by the store), the strings' bytes in a second, and the values of all the files are
picked out of those bytes with a few numpy gathers per column. Dictionary-encoded strings read
the rows' indices and their page's (small) dictionary whole.

:func:`read` returns None for files it does not read this way (structs, lists, pages whose
encodings differ between files) and when any bytes do not check out: the caller then reads the
files one by one, which says what is wrong with a damaged one (and names it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_table._numpy import sorted_unique
from lance_table.file.arrow import with_validity
from lance_table.file.container import FileVersion
from lance_table.file.fields import BLOB_KEY
from lance_table.file.fields import meta as field_meta
from lance_table.file.pageio import buffers_of
from lance_table.file.v2_0.layout import page_encoding
from lance_table.file.v2_0.small_layout import (
    ERRORS,
    INDEX_TYPES,
    MAX_VAR_BYTES,
    Leaf,
    _is_blob,
    _leaf,
    value_bits,
)
from lance_table.file.v2_0.small_many import _strings
from lance_table.file.v2_1.byteranges import exclusive_cumsum, gather

if TYPE_CHECKING:
    from lance_table.file.reader import LanceFileReader
    from lance_table.schema import FieldNode

#: reads ranges of files: ``(file, ranges in file order)`` each, their bytes back to back
Fetch = Callable[[list[tuple[int, np.ndarray]]], list[memoryview]]


def pages(reader: LanceFileReader, node: FieldNode) -> list[tuple[int, Leaf]] | None:
    """The pages of the field ``node`` (the file's own) of a 2.0 file as :class:`Leaf` s, each
    with its first row, when all are plain values without nesting this module reads; else None.
    Kept per reader."""

    def make() -> list[tuple[int, Leaf]] | None:
        try:
            return _pages(reader, node)
        except ERRORS:
            return None

    return reader.kept_layout(("v2.0 pages", node.id, str(node.arrow_type)), make)


def _pages(reader: LanceFileReader, node: FieldNode) -> list[tuple[int, Leaf]] | None:
    meta = reader.metadata
    if meta.version is not FileVersion.V2_0:
        return None
    if node.children or node.id in reader._byte_lists or field_meta(node, BLOB_KEY) is not None:
        return None
    index = reader._col_of.get(node.id)
    if index is None:
        return None
    col = meta.columns[index]
    if not col.pages or _is_blob(col.encoding, reader):
        return None
    out = []
    row = 0
    for page in col.pages:
        enc = page_encoding(page.encoding, reader._stored)
        if enc is None:
            return None
        shape = _leaf(enc, node.arrow_type)
        if shape is None:
            return None
        buffers = buffers_of(page)
        count = int(page.length)
        out.append(
            (row, Leaf(shape.key, count, tuple(buffers[i] for i in shape.at), shape.adjust, shape.items))
        )
        row += count
    return out if row == meta.num_rows else None


class _Ranges:
    """Byte ranges of many files asked for by many columns, read at once: each asker gets a
    handle (where its ranges start in the list) and later where each of its ranges is in the
    joined buffer."""

    def __init__(self) -> None:
        self.files: list[np.ndarray] = []
        self.offsets: list[np.ndarray] = []
        self.sizes: list[np.ndarray] = []
        self.count = 0

    def add(self, files: np.ndarray, offsets: np.ndarray, sizes: np.ndarray) -> int:
        handle = self.count
        self.files.append(files)
        self.offsets.append(offsets)
        self.sizes.append(np.broadcast_to(sizes, offsets.shape))
        self.count += offsets.size
        return handle

    def read(self, fetch: Fetch, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The joined bytes and where each range added is in them (ranges of no bytes: anywhere)."""
        if not self.count:
            return np.zeros(0, np.uint8), np.zeros(0, np.int64)
        f = np.concatenate(self.files)
        o = np.concatenate(self.offsets)
        s = np.concatenate(self.sizes)
        if bool(np.any(o < 0)) or bool(np.any(s < 0)):
            raise IndexError("a range before its file's start")
        order = np.lexsort((o, f))
        fs, os_, ss = f[order], o[order], s[order]
        # identical ranges (a bitmap byte of several rows, a string's end that is the next one's
        # start) read once; ranges of no bytes not at all
        first = np.ones(fs.size, bool)
        first[1:] = (fs[1:] != fs[:-1]) | (os_[1:] != os_[:-1]) | (ss[1:] != ss[:-1])
        first &= ss > 0
        uf, uo, us = fs[first], os_[first], ss[first]
        if uo.size > 1:
            same = uf[1:] == uf[:-1]
            if bool(np.any(same & (uo[1:] < uo[:-1] + us[:-1]))):
                raise IndexError("overlapping ranges")  # (pages' buffers overlap: a damaged file)
        bounds = np.searchsorted(uf, np.arange(n + 1))
        lo_hi = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
        wanted = [
            (k, np.stack([uo[lo:hi], us[lo:hi]], axis=1)) for k, (lo, hi) in enumerate(lo_hi) if hi > lo
        ]
        blobs = fetch(wanted)
        sizes = np.fromiter((len(b) for b in blobs), np.int64, len(blobs))
        data = np.empty(int(sizes.sum()), np.uint8)
        base_of = np.zeros(n, np.int64)
        starts = exclusive_cumsum(sizes)
        for (k, _), blob, at in zip(wanted, blobs, starts.tolist()):
            data[at : at + len(blob)] = np.frombuffer(blob, np.uint8)
            base_of[k] = at
        firsts = exclusive_cumsum(us)
        within = firsts - firsts[bounds[uf]] if us.size else firsts
        where_u = base_of[uf] + within
        # each range (duplicates and empty ones too) to its first copy's place
        index = np.cumsum(first) - 1
        at_sorted = where_u[np.maximum(index, 0)] if where_u.size else np.zeros(fs.size, np.int64)
        where = np.empty(f.size, np.int64)
        where[order] = at_sorted
        return data, where


def read(
    columns: Sequence[Sequence[list[tuple[int, Leaf]]]],
    positions: Sequence[np.ndarray],
    dtypes: Sequence[pa.DataType],
    fetch: Fetch,
) -> list[pa.Array] | None:
    """The rows ``positions[k]`` of file ``k`` of each column (``columns[c][k]``: the :func:`pages`
    of column ``c`` of file ``k``), one file after another; None when the files must be read one
    by one."""
    try:
        return _read(columns, positions, dtypes, fetch)
    except ERRORS:
        return None


def _read(
    columns: Sequence[Sequence[list[tuple[int, Leaf]]]],
    positions: Sequence[np.ndarray],
    dtypes: Sequence[pa.DataType],
    fetch: Fetch,
) -> list[pa.Array] | None:
    n = len(positions)
    # each file's distinct rows, in order (a take's indices may repeat and come in any order)
    uniq, back = [], []
    done = 0
    for p in positions:
        u, inv = np.unique(np.asarray(p, np.int64), return_inverse=True)
        uniq.append(u)
        back.append(inv.reshape(-1) + done)
        done += u.size
    counts = np.fromiter((u.size for u in uniq), np.int64, n)
    rows = np.concatenate(uniq) if n else np.zeros(0, np.int64)
    file_of = np.repeat(np.arange(n), counts)
    order = np.concatenate(back) if n else np.zeros(0, np.int64)
    identity = order.size == rows.size and bool(np.all(order == np.arange(order.size)))
    if rows.size and bool(np.any(rows < 0)):
        return None
    first = _Ranges()
    plans = []
    for c, dtype in enumerate(dtypes):
        # every file's pages of the column, one list; each row's page and its row in it
        nodes = [leaf for each in columns[c] for _, leaf in each]
        page_file = np.repeat(np.arange(n), [len(each) for each in columns[c]])
        page_row = np.fromiter((r for each in columns[c] for r, _ in each), np.int64, len(nodes))
        page_count = np.fromiter((leaf.count for leaf in nodes), np.int64, len(nodes))
        # (rows are sorted within each file: a search in the pages of the files, ordered by file
        # then first row, finds each row's page)
        big = np.int64(1) << 40
        page_of = np.searchsorted(page_file * big + page_row, file_of * big + rows, side="right") - 1
        if rows.size and bool(np.any(page_of < 0) | np.any(page_file[np.maximum(page_of, 0)] != file_of)):
            return None
        within = rows - page_row[page_of]
        if bool(np.any(within >= page_count[page_of])):
            return None
        key = nodes[0].key if nodes else None
        if any(node.key != key for node in nodes):
            return None
        plans.append(_first(nodes, key, dtype, within, page_of, page_file, first))
    if any(plan is None for plan in plans):
        return None
    data1, at1 = first.read(fetch, n)
    second = _Ranges()
    pending = [plan(data1, at1, second) for plan in plans]  # type: ignore[misc]
    data2, at2 = second.read(fetch, n)
    out = []
    for finish in pending:
        arr = finish(data2, at2)
        if arr is None or len(arr) != rows.size:
            return None
        out.append(arr if identity else arr.take(pa.array(order)))
    return out


Second = Callable[[np.ndarray, np.ndarray], pa.Array | None]
First = Callable[[np.ndarray, np.ndarray, _Ranges], Second]


def _column(nodes: list[Leaf], b: int, what: int) -> np.ndarray:
    """Where buffer ``b`` of each file's page starts (``what`` 0), or its size (1)."""
    return np.fromiter((node.at[b][what] for node in nodes), np.int64, len(nodes))


def _first(
    nodes: list[Leaf],
    key: Any,
    dtype: pa.DataType,
    rows: np.ndarray,
    node_of: np.ndarray,
    page_file: np.ndarray,
    first: _Ranges,
) -> First | None:
    """The ranges a column's rows need first (``rows[i]`` of page ``nodes[node_of[i]]``, of file
    ``page_file[node_of[i]]``), and what makes its values of them."""
    kind, bits, has = key
    file_of = page_file[node_of]
    total = rows.size
    if kind == "nulls":
        return lambda d1, a1, s: lambda d2, a2: pa.nulls(total, dtype)

    def buf(b: int) -> tuple[np.ndarray, np.ndarray]:
        return _column(nodes, b, 0)[node_of], _column(nodes, b, 1)[node_of]

    def bits_of(b: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        at, size = buf(b)
        if bool(np.any(rows // 8 >= size)):
            raise IndexError("a bitmap is shorter than its page")
        h = first.add(file_of, at + rows // 8, np.int64(1))
        return lambda d1, a1: ((d1[a1[h : h + total]] >> (rows % 8).astype(np.uint8)) & 1).astype(bool)

    valid_of = bits_of(0) if has else None
    b = 1 if has else 0

    def validity(arr: pa.Array, d1: np.ndarray, a1: np.ndarray) -> pa.Array:
        return arr if valid_of is None else with_validity(arr, valid_of(d1, a1))

    if kind == "bool":
        vals = bits_of(b)
        return lambda d1, a1, s: (
            lambda d2, a2: validity(
                pa.Array.from_buffers(
                    dtype, total, [None, pa.py_buffer(np.packbits(vals(d1, a1), bitorder="little"))]
                ),
                d1,
                a1,
            )
        )
    if kind in ("fixed", "vectors", "dict"):
        if kind == "vectors":
            if not pa.types.is_fixed_size_list(dtype) or value_bits(dtype.value_type) != bits:
                return None
            width = dtype.list_size * bits // 8
        elif kind == "fixed":
            if value_bits(dtype) != bits:
                return None
            width = bits // 8
        else:
            width = bits // 8
        at, size = buf(b)
        if bool(np.any((rows + 1) * width > size)):
            return None
        h = first.add(file_of, at + rows * width, np.int64(width))
        if kind == "dict":
            return _dict(nodes, dtype, bits, node_of, page_file, h, first)

        def fixed(d1: np.ndarray, a1: np.ndarray, s: _Ranges) -> Second:
            raw = gather(d1.data, a1[h : h + total], np.full(total, width, np.int64))
            if kind == "fixed":
                arr = pa.Array.from_buffers(dtype, total, [None, pa.py_buffer(raw)])
            else:
                vt = dtype.value_type
                values = pa.Array.from_buffers(vt, total * dtype.list_size, [None, pa.py_buffer(raw)])
                arr = pa.FixedSizeListArray.from_arrays(values, type=dtype)
            done = validity(arr, d1, a1)
            return lambda d2, a2: done

        return fixed
    if kind == "binary":
        return _binary(nodes, dtype, rows, node_of, file_of, first)
    return None


def _binary(
    nodes: list[Leaf],
    dtype: pa.DataType,
    rows: np.ndarray,
    node_of: np.ndarray,
    file_of: np.ndarray,
    first: _Ranges,
) -> First:
    """Strings: each row's end and the one before it, then its bytes."""
    total = rows.size
    ends_at = _column(nodes, 0, 0)[node_of]
    ends_size = _column(nodes, 0, 1)[node_of]
    if bool(np.any((rows + 1) * 8 > ends_size)):
        raise IndexError("string ends shorter than their page")
    h_cur = first.add(file_of, ends_at + rows * 8, np.int64(8))
    h_prev = first.add(file_of, ends_at + np.maximum(rows - 1, 0) * 8, np.where(rows > 0, 8, 0))
    adjust = np.fromiter((node.adjust for node in nodes), np.int64, len(nodes))[node_of]
    data_at = _column(nodes, 1, 0)[node_of]
    data_size = _column(nodes, 1, 1)[node_of]

    def ends(d1: np.ndarray, a1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        eight = np.full(total, 8, np.int64)
        cur = np.frombuffer(gather(d1.data, a1[h_cur : h_cur + total], eight), np.uint64).astype(np.int64)
        prev = np.frombuffer(gather(d1.data, a1[h_prev : h_prev + total], eight), np.uint64).astype(np.int64)
        prev[rows == 0] = 0
        valid = (cur < adjust) | (adjust == 0)
        cur = np.where(valid, cur, cur - adjust)
        prev = np.where((prev < adjust) | (adjust == 0), prev, prev - adjust)
        return cur, prev, valid

    def plan(d1: np.ndarray, a1: np.ndarray, s: _Ranges) -> Second:
        cur, prev, valid = ends(d1, a1)
        lengths = cur - prev
        if bool(np.any(lengths < 0) | np.any(prev < 0) | np.any(cur > data_size)):
            raise IndexError("string ends out of order or past their bytes")
        if int(lengths.sum()) > MAX_VAR_BYTES:
            raise OverflowError("strings too long for one array")
        h = s.add(file_of, data_at + prev, lengths)

        def finish(d2: np.ndarray, a2: np.ndarray) -> pa.Array:
            data = pa.py_buffer(gather(d2.data, a2[h : h + total], lengths)) if total else pa.py_buffer(b"")
            offsets = np.zeros(total + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
            large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
            nulls = int(total - np.count_nonzero(valid))
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
            off = pa.py_buffer(offsets if large else offsets.astype(np.int32))
            return pa.Array.from_buffers(dtype, total, [bitmap, off, data], null_count=nulls)

        return finish

    return plan


def _dict(
    nodes: list[Leaf],
    dtype: pa.DataType,
    bits: int,
    node_of: np.ndarray,
    page_file: np.ndarray,
    h: int,
    first: _Ranges,
) -> First:
    """Dictionary strings: the rows' indices, and each page's dictionary (its items' ends and
    bytes, read as one range from the first of the two buffers to the end of the other)."""
    total = node_of.size
    n = len(nodes)
    used = sorted_unique(node_of)
    e_at, e_size = _column(nodes, 1, 0), _column(nodes, 1, 1)
    d_at, d_size = _column(nodes, 2, 0), _column(nodes, 2, 1)
    lo = np.minimum(e_at, d_at)
    hi = np.maximum(e_at + e_size, d_at + d_size)
    hd = first.add(page_file[used], lo[used], (hi - lo)[used])
    items = np.fromiter((node.items for node in nodes), np.int64, n)

    def plan(d1: np.ndarray, a1: np.ndarray, s: _Ranges) -> Second:
        width = bits // 8
        idx = np.frombuffer(
            gather(d1.data, a1[h : h + total], np.full(total, width, np.int64)), INDEX_TYPES[bits]
        ).astype(np.int64)
        # the pages' dictionaries decoded as pages of strings: each page's span at ``bases[k] + lo[k]``
        bases = a1[hd : hd + used.size] - lo[used]
        dictionary = _strings([nodes[k] for k in used.tolist()], d1, bases, 1, items[used], dtype)
        if dictionary is None:
            raise ValueError("a dictionary does not check out")
        if bool(np.any(idx > items[node_of])):
            raise IndexError("a dictionary index past its items")
        null = idx == 0
        slot = np.zeros(n, np.int64)
        slot[used] = exclusive_cumsum(items[used])
        idx = idx + slot[node_of] - 1
        arr = dictionary.take(pa.array(idx, mask=null if null.any() else None))
        return lambda d2, a2: arr

    return plan
