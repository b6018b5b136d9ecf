"""Scattered rows of flat values of many local 2.1/2.2 files, copied straight out of maps of
the files (a part of :mod:`small_take`).

A filter of a living table's fragments of some ten thousand rows keeps a tenth of the rows,
scattered: nearly every mini-block chunk of a column holds one of them. Read as :mod:`small_take`
reads few rows, every chosen chunk is copied from the page cache into a buffer of its file, the
files' buffers joined into one, and the rows gathered from it: the whole page copied twice to
keep a tenth of it (a 16-float vector column of 50 files of 20k rows: 60 MB copied twice for
6 MB of rows). Values stored flat (numbers, fixed-size lists of them) need nothing of a chunk but
its header's value size and where its values start, so here each file is mapped, the chosen
chunks' headers are read and checked in the map, and each kept row is copied once, straight
from the page cache, with one gather per file (a strided view of the map as rows of the
values' width).

:func:`gather` returns None when a header does not check out or a chunk lies outside its file:
the caller then reads the files one by one, which names the damaged file.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.byteranges import as_bytes, exclusive_cumsum
from lance_table.file.v2_1.chunk_headers import le
from lance_table.file.v2_1.kept_flat import flat_bits
from lance_table.file.v2_1.small_layouts import ColumnLayout
from lance_table.file.v2_1.values import Fixed, to_arrow
from lance_table.storage.io_stats import record

#: a column's chosen chunks of a batch are read through maps of the files from this many bytes on
#: (below, the fixed cost of mapping each file is not worth saving the copies of so few chunks)
MAPPED_CHUNK_BYTES = 1 << 20
#: ... and when they hold at least this many of the rows read each, on average: a take's rows
#: one to a chunk cost a page fault each in a map, about a chunk's read (1000 random rows of
#: 50 files of 20k rows: 2% more CPU through maps), where a filter's tenth of the rows (six to a
#: chunk of vectors) copied their chunks twice for nothing
MAPPED_ROWS_PER_CHUNK = 2


def worth_mapping(chunk_bytes: int, chunks: int, rows: int) -> bool:
    """Whether the rows of a column (``rows`` of them in ``chunks`` chunks of ``chunk_bytes``
    in all) are read through maps of the files, where :func:`row_bits` allows it."""
    return chunk_bytes >= MAPPED_CHUNK_BYTES and rows >= MAPPED_ROWS_PER_CHUNK * chunks


def row_bits(cols: Sequence[ColumnLayout]) -> tuple[int, int] | None:
    """The bits of a stored value and the values per row (a fixed-size list's items) of the
    pages of one column in many files, when :func:`gather` reads them: every page of one
    encoding of flat values of whole bytes, without definition levels or a dictionary, one
    value buffer per chunk; else None."""
    first = cols[0]
    if any(c.key is not first.key for c in cols):
        return None
    page = first.page
    if page.defs is not None or page.dictionary is not None or first.dict_at >= 0 or page.buffers != 1:
        return None
    return flat_bits(first.encoding)


def gather(
    cols: Sequence[ColumnLayout],
    page_at: np.ndarray,
    table: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    chosen: np.ndarray,
    local: np.ndarray,
    views: Sequence[np.ndarray | None],
    dtype: pa.DataType,
    io: PageIO,
) -> pa.Array | None:
    """The rows at ``local`` (sorted positions among the values of the chunks ``chosen``, back to
    back) of the pages ``cols`` of one column in many files (see :func:`row_bits`), as an Arrow
    array of ``dtype``; None when a chunk does not check out.

    ``page_at``: where each file's page starts in the file; ``table``: the chunk tables of all the
    pages (each chunk's value count, where it starts in its page, its size and its file, see
    :func:`small_many.chunk_tables`); ``views``: each file's bytes (a map), None for a file
    without a chosen chunk."""
    got = row_bits(cols)
    if got is None:
        return None
    bits, per = got
    width = bits // 8 * per
    counts, within, chunk_bytes, page_of = table
    files = page_of[chosen]  # (ascending: the chunks are numbered file by file)
    at = page_at[files] + within[chosen]  # where each chosen chunk starts in its file
    size = chunk_bytes[chosen]
    values = counts[chosen]
    page = cols[0].page
    head = page.header.size
    if bool(np.any(size < head)) or bool(np.any(at < 0)):
        return None
    word = 4 if page.large else 2  # the value buffer's size, after the u16 level count
    value_size = np.empty(chosen.size, np.int64)
    n = len(views)
    for k, (lo, hi) in enumerate(pairwise(np.searchsorted(files, np.arange(n + 1)).tolist())):
        if lo == hi:
            continue
        u8 = views[k]
        if u8 is None or int(at[hi - 1] + size[hi - 1]) > u8.size:
            return None
        value_size[lo:hi] = le(u8, at[lo:hi] + 2, word)
    value_at = at + ((head + 7) & ~7)
    if bool(np.any(value_at + value_size > at + size)) or bool(np.any(values * width > value_size)):
        return None
    firsts = exclusive_cumsum(values)
    if local.size and (int(local[0]) < 0 or int(local[-1]) >= int(values.sum())):
        return None
    chunk = np.searchsorted(firsts, local, side="right") - 1
    offsets = value_at[chunk] + (local - firsts[chunk]) * width
    row = np.dtype(f"V{width}")
    out = empty(local.size, row)
    touched = 0
    for k, (lo, hi) in enumerate(pairwise(np.searchsorted(files[chunk], np.arange(n + 1)).tolist())):
        if lo == hi:
            continue
        touched += 1
        u8 = views[k]
        assert u8 is not None  # (checked above: the file has chosen chunks)
        # the file's bytes seen as rows of ``width`` bytes starting at every byte
        rows = np.ndarray((u8.size - width + 1,), row, u8, 0, (1,))
        # (each checked to lie in a chunk; ``np.take`` would first copy the overlapping rows whole)
        out[lo:hi] = rows[offsets[lo:hi]]
    record(touched, out.nbytes)  # (a read of each file's rows)
    return to_arrow(Fixed(as_bytes(out), bits), dtype, local.size, io)
