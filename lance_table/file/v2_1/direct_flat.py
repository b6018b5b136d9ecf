"""Pages of flat values of one width (numbers, vectors) of many local 2.1/2.2 files read straight
into the column's values (a part of :mod:`small_many`'s batches).

A batch reads each file's span of its pages and then joins the chunks' value bytes into the
column, so every byte is copied twice: from the page cache into the span, then from the span into
the values. pylance's 20k-row page of 16-float vectors is 313 chunks of 4 KiB, each behind an
8-byte header. Here each page's chunk table is read first and kept with the file's reader (a data
file never changes). Then each page is read with one ``preadv`` (per 1024 buffers) whose buffers
are, in turn, a chunk's header and padding (into a scratch buffer) and its values (into their
place in the column): one copy, from the page cache. The headers are checked afterwards, as
:func:`small_many.decode` checks them; anything that does not check out gives None, and the caller
reads the batch the usual way, which says what is wrong.

Only whole pages of local files are read so (a scan), without definition levels (no nulls) or a
dictionary, of at least :data:`MIN_PAGE_BYTES`, where the copy saved outweighs a ``preadv`` buffer
per chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.byteranges import exclusive_cumsum
from lance_table.file.v2_1.kept_flat import flat_bits
from lance_table.file.v2_1.small_layouts import ERRORS, ColumnLayout, FileLayout
from lance_table.file.v2_1.small_many import chunk_tables, le_uints
from lance_table.file.v2_1.values import Fixed, to_arrow
from lance_table.storage.scatter import read_into
from lance_table.storage.sources import LocalFileSource

if TYPE_CHECKING:
    from lance_table.file.reader import LanceFileReader

#: pages of fewer bytes are joined from their files' spans as before: a ``preadv`` buffer per chunk
#: costs about what copying a small page does
MIN_PAGE_BYTES = 256 * 1024


def applies(found: Sequence[tuple[LanceFileReader, FileLayout]], columns: int) -> bool:
    """Whether every one of the ``columns`` columns of every file is read by :func:`read`: a page
    of mini-block chunks of flat values of whole bytes (a fixed-size list of them too), without
    definition levels or a dictionary, of at least :data:`MIN_PAGE_BYTES`, of a local file."""
    for reader, lay in found:
        if not isinstance(reader._stored, LocalFileSource):
            return False
        for c in range(columns):
            col = lay.columns[c]
            if (
                not isinstance(col, ColumnLayout)
                or col.data_size < MIN_PAGE_BYTES
                or col.page.defs is not None
                or col.page.buffers != 1
                or col.dict_at >= 0
                or flat_bits(col.encoding) is None
            ):
                return False
    return True


def _chunk_table(reader: LanceFileReader, at: int, size: int) -> bytes:
    """A page's chunk table (``size`` bytes at ``at`` in the file), kept with the file's reader."""
    return reader.kept_layout(("chunk table", at, size), lambda: bytes(reader.read_span(at, size)))


def read(
    found: Sequence[tuple[LanceFileReader, FileLayout]], column: int, dtype: pa.DataType, io: PageIO
) -> pa.Array | None:
    """Every row of column ``column`` (of the layouts' selection) of the files, one file after
    another, read straight into the values (see the module's note); None when a page does not
    check out or a file cannot be read (the caller then reads the files' spans, which says what is
    wrong and names the file)."""
    try:
        return _read(found, column, dtype, io)
    except (*ERRORS, FileNotFoundError):
        return None


def _read(
    found: Sequence[tuple[LanceFileReader, FileLayout]], column: int, dtype: pa.DataType, io: PageIO
) -> pa.Array | None:
    cols: list[Any] = [lay.columns[column] for _, lay in found]
    page = cols[0].page
    bits_per = flat_bits(cols[0].encoding)
    if bits_per is None or any(c.key is not cols[0].key for c in cols):
        return None
    bits, per = bits_per
    word = 4 if page.large else 2
    n_files = len(found)
    tables = [
        _chunk_table(reader, lay.start + c.meta_at, c.chunks * word) for (reader, lay), c in zip(found, cols)
    ]
    sizes = np.fromiter((len(t) for t in tables), np.int64, n_files)
    chunks = np.fromiter((c.chunks for c in cols), np.int64, n_files)
    if bool(np.any(sizes != chunks * word)):
        return None
    u8 = np.frombuffer(b"".join(tables), np.uint8)
    rows = np.fromiter((lay.num_rows for _, lay in found), np.int64, n_files)
    page_at = np.fromiter((lay.start + c.data_at for (_, lay), c in zip(found, cols)), np.int64, n_files)
    data_size = np.fromiter((c.data_size for c in cols), np.int64, n_files)
    got = chunk_tables(u8, exclusive_cumsum(sizes), page_at, data_size, chunks, rows, word)
    if got is None:
        return None
    counts, chunk_at, chunk_bytes, _ = got
    value_at = (page.header.size + 7) & ~7
    need = counts * (per * bits // 8)
    if bool(np.any(value_at + need > chunk_bytes)):
        return None
    # the scratch buffer: each chunk's header and the padding after its values, one after another
    gap = exclusive_cumsum(np.append(chunk_bytes - need, 0))
    scratch = np.empty(int(gap[-1]), np.uint8)
    out = empty(int(need.sum()), np.uint8)
    _read_pages(found, chunks, chunk_at, need, gap, value_at, memoryview(scratch), memoryview(out))  # type: ignore[arg-type]
    # the headers as small_many.decode checks them: the value buffer's size, after the levels' count
    size = le_uints(scratch, gap[:-1] + 2, 4 if page.large else 2)
    if bool(np.any(value_at + size > chunk_bytes)) or bool(np.any(need > size)):
        return None
    return to_arrow(Fixed(memoryview(out), bits), dtype, int(rows.sum()), io)  # type: ignore[arg-type]


def _read_pages(
    found: Sequence[tuple[LanceFileReader, FileLayout]],
    chunks: np.ndarray,
    chunk_at: np.ndarray,
    need: np.ndarray,
    gap: np.ndarray,
    value_at: int,
    scratch: memoryview,
    out: memoryview,
) -> None:
    """Each file's page (its ``chunks`` chunks, from ``chunk_at``) read in one pass: of each chunk,
    the first ``value_at`` bytes (its header) and those after its ``need`` bytes of values into
    ``scratch`` from ``gap``, its values into ``out``, one chunk's after another's."""
    first = exclusive_cumsum(chunks)
    out_at = exclusive_cumsum(need)
    pad_hi = gap[1:] + value_at
    pad_hi[first + chunks - 1] -= value_at  # a page's last chunk: its padding alone
    out_l, end_l = out_at.tolist(), (out_at + need).tolist()
    pad_l, hi_l = (gap[:-1] + value_at).tolist(), pad_hi.tolist()
    gap_l, chunk_l = gap.tolist(), chunk_at.tolist()
    for (reader, _), lo, n in zip(found, first.tolist(), chunks.tolist()):
        hi = lo + n
        buffers: list[memoryview] = [scratch[gap_l[lo] : gap_l[lo] + value_at]] * (2 * n + 1)
        buffers[1::2] = [out[a:b] for a, b in zip(out_l[lo:hi], end_l[lo:hi])]
        buffers[2::2] = [scratch[a:b] for a, b in zip(pad_l[lo:hi], hi_l[lo:hi])]
        read_into(reader._stored, [(chunk_l[lo], buffers)])  # type: ignore[arg-type]  # (see applies)
