"""A few rows of many 2.1/2.2 files whose columns are pages of many mini-block chunks, read
together: the chunks of all the files decoded in one numpy pass per encoding.

A take of a thousand rows from fragments of some ten thousand rows needs a few dozen chunks of
each file's page. Read file by file, each file's page costs a chunk table read, a read of its
chunks and a few dozen numpy calls to parse and decode them, more than the values themselves.
Here the chunk tables of all the files (and their dictionaries) come in one read per file, are
parsed with a few numpy gathers for all of them at once, the chosen chunks of every column come
in a second read per file, and the chunks of all the files whose pages share an encoding are
parsed and decoded as the chunks of one page would be (:func:`chunk_headers.parse_chunks`,
:func:`miniblock.chunk_values`), only the rows asked for picked where the encoding allows it.
Dictionary indices are picked before their values are looked up.

:func:`read` returns None when anything does not check out: the caller then reads the files one
by one, which says what is wrong with a damaged one (and names it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.file.arrow import with_validity
from lance_table.file.compression import bitpacking
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import mapped_take, small_dicts, small_many
from lance_table.file.v2_1.byteranges import exclusive_cumsum, in_file_order
from lance_table.file.v2_1.chunk_headers import parse_chunks
from lance_table.file.v2_1.miniblock import Chunks, chunk_values, pick, rows_in_chunks, values_at
from lance_table.file.v2_1.small_layouts import ERRORS, ColumnLayout, FileLayout, decode_keys
from lance_table.file.v2_1.values import Fixed, Var, expand_files, to_arrow

#: reads of many files: for each file (by index) its ranges (``(offset, length)`` rows in file
#: order), the bytes of each file's ranges one after another in one buffer
Fetch = Callable[[list[tuple[int, np.ndarray]]], list[memoryview]]
#: maps of the files (by index) as arrays of their bytes, None where a file is not mapped (not a
#: local file): see :mod:`mapped_take`
Maps = Callable[[], Sequence[np.ndarray] | None]


class _Mini:
    """What :func:`parse_chunks` and :func:`chunk_values` ask of a mini-block layout, for the
    pages of many files that share an encoding (their layouts differ only in their counts)."""

    __slots__ = ("def_compression", "num_buffers", "num_dictionary_items", "value_compression")

    def __init__(self, col: ColumnLayout) -> None:
        self.def_compression = col.page.defs
        self.num_buffers = col.page.buffers
        self.value_compression = col.encoding
        self.num_dictionary_items = 0

    def HasField(self, name: str) -> bool:  # (the protobuf method it stands in for)
        return name == "def_compression" and self.def_compression is not None


def columns_of(layouts: Sequence[FileLayout | None]) -> list[ColumnLayout] | None:
    """The one page of each file's layout of one column, when every one is a page of mini-block
    chunks :func:`read` takes (not nested, not constant); else None."""
    found = []
    for lay in layouts:
        if lay is None or len(lay.columns) != 1:
            return None
        col = lay.columns[0]
        if not isinstance(col, ColumnLayout):
            return None
        found.append(col)
    return found


def estimate(layouts: Sequence[FileLayout], rows: int) -> int:
    """About the bytes of chunks a read of ``rows`` scattered rows of a file reads, of the
    columns of these layouts (a chunk of average size for each row, at most the whole page)."""
    total = 0
    for lay in layouts:
        for col in lay.columns:
            if isinstance(col, ColumnLayout):
                total += col.data_size * min(rows, col.chunks) // max(col.chunks, 1) + col.dict_size
    return total


def read(
    layouts: Sequence[Sequence[FileLayout]],
    positions: Sequence[np.ndarray],
    dtypes: Sequence[pa.DataType],
    fetch: Fetch,
    io: PageIO,
    maps: Maps | None = None,
) -> list[pa.Array] | None:
    """The rows ``positions[k]`` (sorted, unique, below its rows) of each file ``k``, of each
    column ``c`` whose one-column layout in file ``k`` is ``layouts[c][k]`` (each a page of
    mini-block chunks, see :func:`columns_of`), the files' rows one after another; None when
    anything does not check out (the caller reads the files one by one). ``maps``: how the
    files are mapped, where they can be: the rows of columns of flat values whose chosen chunks
    are many and hold several rows each (:func:`mapped_take.worth_mapping`) are then copied out
    of the maps instead of their chunks being read (see :mod:`mapped_take`)."""
    try:
        return _read(layouts, positions, dtypes, fetch, io, maps)
    except ERRORS:
        return None


class _Column:
    """One column's pages in all the files: their chunk tables and the chunks a read needs."""

    def __init__(self, cols: list[ColumnLayout], starts: np.ndarray) -> None:
        self.cols = cols
        n = len(cols)
        self.meta_at = starts + np.fromiter((c.meta_at for c in cols), np.int64, n)  # file offsets
        self.data_at = starts + np.fromiter((c.data_at for c in cols), np.int64, n)
        self.data_size = np.fromiter((c.data_size for c in cols), np.int64, n)
        self.chunks = np.fromiter((c.chunks for c in cols), np.int64, n)
        self.word = 4 if cols[0].page.large else 2
        self.dict_at = starts + np.fromiter((c.dict_at for c in cols), np.int64, n)
        self.dict_size = np.fromiter((c.dict_size for c in cols), np.int64, n)
        self.dictionary = cols[0].dict_at >= 0
        # set as the read goes
        self.table_at = self.dict_pos = np.zeros(0, np.int64)  # where in the first read's buffer
        self.chosen = np.zeros(0, np.int64)  # the chunks read (all files' chunks numbered in order)
        self.local = np.zeros(0, np.int64)  # the rows among those chunks' values back to back


def _read(
    layouts: Sequence[Sequence[FileLayout]],
    positions: Sequence[np.ndarray],
    dtypes: Sequence[pa.DataType],
    fetch: Fetch,
    io: PageIO,
    maps: Maps | None = None,
) -> list[pa.Array] | None:
    n = len(positions)
    rows = np.fromiter((lay.num_rows for lay in layouts[0]), np.int64, n)
    picked = np.fromiter((p.size for p in positions), np.int64, n)
    columns = []
    for lays in layouts:
        cols = columns_of(lays)
        if cols is None:
            return None
        starts = np.fromiter((lay.start for lay in lays), np.int64, n)
        columns.append(_Column(cols, starts))
    # first read: each file's chunk tables and dictionaries
    offsets = [c.meta_at for c in columns] + [c.dict_at for c in columns if c.dictionary]
    sizes = [c.chunks * c.word for c in columns] + [c.dict_size for c in columns if c.dictionary]
    data1, at1 = _fetched(np.stack(offsets, axis=1), np.stack(sizes, axis=1), fetch)
    u8 = np.frombuffer(data1, np.uint8)
    d = len(columns)
    for c, col in enumerate(columns):
        col.table_at = at1[:, c]
        if col.dictionary:
            col.dict_pos = at1[:, d]
            d += 1
    # the chunks each column needs
    gpos = np.concatenate(positions) + np.repeat(exclusive_cumsum(rows), picked)
    tables = []
    for col in columns:
        found = small_many.chunk_tables(
            u8, col.table_at, np.zeros(n, np.int64), col.data_size, col.chunks, rows, col.word
        )
        if found is None:
            return None
        counts, within, chunk_bytes, page_of = found
        item_starts = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=item_starts[1:])
        col.chosen, col.local = rows_in_chunks(Chunks(item_starts, item_starts, counts), gpos)
        tables.append((counts, within, chunk_bytes, page_of))
    # the columns whose rows are copied out of maps of the files
    views = None
    if maps is not None:
        mapped = [
            c
            for c, (col, t) in enumerate(zip(columns, tables))
            if mapped_take.worth_mapping(int(t[2][col.chosen].sum()), col.chosen.size, col.local.size)
            and mapped_take.row_bits(col.cols) is not None
        ]
        views = maps() if mapped else None
    if views is None:
        mapped = []
    # second read: each file's chosen chunks of every other column
    read2 = [(col, t) for c, (col, t) in enumerate(zip(columns, tables)) if c not in mapped]
    data2, at2 = memoryview(b""), np.zeros(0, np.int64)
    if read2:
        file_of = np.concatenate([t[3][c.chosen] for c, t in read2])
        offsets2 = np.concatenate([c.data_at[t[3][c.chosen]] + t[1][c.chosen] for c, t in read2])
        sizes2 = np.concatenate([t[2][c.chosen] for c, t in read2])
        data2, at2 = _fetched_ranges(file_of, offsets2, sizes2, n, fetch)
    out = []
    first = 0
    for c, (col, table, dtype) in enumerate(zip(columns, tables, dtypes)):
        if c in mapped:
            assert views is not None
            arr = mapped_take.gather(col.cols, col.data_at, table, col.chosen, col.local, views, dtype, io)
            if arr is None or len(arr) != int(picked.sum()):
                return None
            out.append(arr)
            continue
        k = col.chosen.size
        chunk_at = at2[first : first + k]
        first += k
        arr = _decoded(col, dtype, table, chunk_at, data2, data1, positions, picked, rows, io)
        if arr is None or len(arr) != int(picked.sum()):
            return None
        out.append(arr)
    return out


def _fetched(offsets: np.ndarray, sizes: np.ndarray, fetch: Fetch) -> tuple[memoryview, np.ndarray]:
    """The ranges ``offsets[k, r]`` (``sizes[k, r]`` bytes) of each file ``k`` read, one buffer
    for all, and where each range is in it."""
    order = np.argsort(offsets, axis=1, kind="stable")
    lengths = np.take_along_axis(sizes, order, axis=1)
    starts = np.take_along_axis(offsets, order, axis=1)
    blobs = fetch([(k, np.stack([starts[k], lengths[k]], axis=1)) for k in range(offsets.shape[0])])
    data, bases = small_many.joined(blobs)
    within = np.cumsum(lengths, axis=1) - lengths
    at = np.empty_like(within)
    np.put_along_axis(at, order, within + bases[:, None], axis=1)
    return data, at


def _fetched_ranges(
    file_of: np.ndarray, offsets: np.ndarray, sizes: np.ndarray, n: int, fetch: Fetch
) -> tuple[memoryview, np.ndarray]:
    """Ranges of many files (``file_of`` each) read, one buffer for all, and where each range is
    in it (each file's ranges in file order, from a multiple of the joined buffer's alignment;
    chunks are multiples of 8 bytes, so each starts on a multiple of 8)."""
    order = np.lexsort((offsets, file_of))
    f, o, s = file_of[order], offsets[order], sizes[order]
    bounds = np.searchsorted(f, np.arange(n + 1))
    wanted = [
        (k, np.stack([o[lo:hi], s[lo:hi]], axis=1))
        for k, (lo, hi) in enumerate(pairwise(bounds.tolist()))
        if hi > lo
    ]
    blobs = fetch(wanted)
    data, bases = small_many.joined(blobs)
    base_of = np.zeros(n, np.int64)
    base_of[[k for k, _ in wanted]] = bases
    firsts = exclusive_cumsum(s)
    within = firsts - firsts[bounds[f]] if s.size else firsts
    at = np.empty(s.size, np.int64)
    at[order] = base_of[f] + within
    return data, at


def _decoded(
    col: _Column,
    dtype: pa.DataType,
    table: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    chunk_at: np.ndarray,
    data2: memoryview,
    data1: memoryview,
    positions: Sequence[np.ndarray],
    picked: np.ndarray,
    rows: np.ndarray,
    io: PageIO,
) -> pa.Array | None:
    """The rows read of one column, the files whose pages share an encoding decoded together."""
    counts, _, chunk_bytes, page_of = table
    n = len(col.cols)

    def group(sel: np.ndarray) -> pa.Array | None:
        if sel.size == n:
            ids, local, at = col.chosen, col.local, chunk_at
        else:
            member = np.zeros(n, np.bool_)
            member[sel] = True
            inside = np.flatnonzero(member[page_of])
            gpos = np.concatenate([positions[k] for k in sel.tolist()])
            gpos += np.repeat(exclusive_cumsum(rows[sel]), picked[sel])
            g_counts = counts[inside]
            item_starts = np.zeros(g_counts.size + 1, np.int64)
            np.cumsum(g_counts, out=item_starts[1:])
            chosen, local = rows_in_chunks(Chunks(item_starts, item_starts, g_counts), gpos)
            ids = inside[chosen]
            at = chunk_at[np.searchsorted(col.chosen, ids)]
        return _group(col, sel, dtype, ids, local, at, counts, chunk_bytes, data2, data1, picked, rows, io)

    return in_file_order(_keys(col), picked, group)


def _keys(col: _Column) -> list[Any]:
    """The files whose pages of the column decode together (see :func:`small_layouts.decode_keys`)."""
    return [id(c.key) for c in col.cols] if col.dictionary else decode_keys(col.cols)


def _group(
    col: _Column,
    sel: np.ndarray,
    dtype: pa.DataType,
    ids: np.ndarray,
    local: np.ndarray,
    at: np.ndarray,
    counts: np.ndarray,
    chunk_bytes: np.ndarray,
    data2: memoryview,
    data1: memoryview,
    picked: np.ndarray,
    rows: np.ndarray,
    io: PageIO,
) -> pa.Array | None:
    """The rows at ``local`` among the values of the chunks ``ids`` (at ``at`` in ``data2``) of
    the files ``sel``, whose pages share one encoding."""
    first = col.cols[int(sel[0])]
    mini = _Mini(first)
    fsst = first.encoding.WhichOneof("compression") == "fsst" and not col.dictionary
    if fsst:  # the compressed strings picked from all the files' chunks
        mini.value_compression = first.encoding.fsst.values
    n_values = counts[ids]
    read = parse_chunks(mini, data2, at, at + chunk_bytes[ids], n_values, first.page.large, io, local)
    count = int(n_values.sum())
    share = local.size / max(count, 1)
    values, done = chunk_values(mini, read, io, local, share)
    valid = (read.defs == 0) if read.defs is not None else None
    if valid is not None and valid.size != (local.size if read.defs_picked else count):
        return None
    if fsst:
        if not isinstance(values, Var) or values.symbols is not None:
            return None
        if not done:
            values = pick(values, local, io)
        valid = valid[local] if valid is not None and not read.defs_picked else valid
        arr = to_arrow(
            _expanded(values, [col.cols[k] for k in sel.tolist()], picked[sel], io), dtype, local.size, io
        )
    elif not col.dictionary:
        arr, valid = values_at(values, count, done, local, mini, None, dtype, valid, io, read.defs_picked)
    else:
        # the picked rows' indices, then only their values looked up
        if not isinstance(values, Fixed) or values.bits not in bitpacking.DTYPES:
            return None
        idx = np.frombuffer(values.data, bitpacking.DTYPES[values.bits])
        if not done:
            if local.size and int(local[-1]) >= idx.size:
                return None
            idx = idx[local]
        if valid is not None and not read.defs_picked:
            valid = valid[local]
        cols = [col.cols[k] for k in sel.tolist()]
        # (the dictionaries lie in the first read's buffer: each file's at ``dict_pos``)
        bases = col.dict_pos[sel] - np.fromiter((c.dict_at for c in cols), np.int64, len(cols))
        arr = small_dicts.look_up(
            idx[: local.size], cols, picked[sel], rows[sel], data1, bases, dtype, valid, io
        )
        if arr is None:
            return None
    if valid is not None and not valid.all():
        arr = with_validity(arr, valid)
    return arr


def _expanded(values: Var, cols: list[ColumnLayout], counts: np.ndarray, io: PageIO) -> Var:
    """FSST strings of many files (``counts`` of each, one file after another) decompressed,
    each file's with its own symbol table."""
    return expand_files(values, [bytes(c.encoding.fsst.symbol_table) for c in cols], counts, io)
