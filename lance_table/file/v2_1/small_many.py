"""One column of many 2.1/2.2 files decoded in one numpy pass.

A table of many small appends holds thousands of files of a few hundred rows, each column one
page of one mini-block chunk; a table written in fragments of some ten thousand rows holds
columns of one page of a few dozen chunks. Decoding them file by file costs a few dozen numpy
calls per file and column, more than the values themselves. Here the files' bytes are joined
into one buffer (each at an aligned place), the chunk tables and every chunk's header are read
with a few numpy gathers, and the chunks of all files that share an encoding are decoded as the
chunks of one page would be (see :mod:`batch`): the cost per file is a read and a few list
appends. A file of pages of many chunks is batched only when small or by a read of most of its rows
(:func:`small_layouts.worth_batching`); otherwise a take picks its rows file by file. Fields with
structs and lists (their leaf pages of one chunk, see :mod:`small_nested`) and constant pages
without levels (see :mod:`small_constant`) are batched too.

:func:`small_layouts.layout` says what a file's read of some columns looks like (kept per reader
and column selection); :func:`decode` returns None when anything does not check out, and the
caller then reads the files one by one, which also says what is wrong with a damaged one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
from lance_table.file.arrow import with_validity
from lance_table.file.compression import bitpacking
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import batch, batch_runs, kept_flat, small_constant, small_dicts, small_nested
from lance_table.file.v2_1.byteranges import exclusive_cumsum, in_file_order
from lance_table.file.v2_1.chunk_headers import ChunksRead
from lance_table.file.v2_1.compress import SCHEMES
from lance_table.file.v2_1.miniblock_small import GENERAL
from lance_table.file.v2_1.small_dicts import MAX_VAR_BYTES, le_uints
from lance_table.file.v2_1.small_layouts import ERRORS, ColumnLayout, FileLayout, decode_keys
from lance_table.file.v2_1.values import Fixed, Var, expand_files, to_arrow

#: where each file's bytes start in the joined buffer: a multiple of this (the values of inline
#: bitpacking are read as aligned words)
ALIGN = 64
#: files' bytes of a batch from which :func:`joined` copies them one by one into a fresh buffer,
#: releasing each once copied (below, one ``bytes.join`` is cheaper for many small files)
JOIN_BY_COPY_BYTES = 4 << 20
#: bytes that the chunks of strings in a general compression (zstd, LZ4) of one column of a batch
#: may claim to decompress to: beyond, the files are read one by one (a page at a time)
MAX_GENERAL_BYTES = 64 << 20
#: the length header before each buffer in a general compression, by scheme
_GENERAL_HEADER = {"zstd": 8, "lz4": 4}


def joined(blobs: list[memoryview]) -> tuple[memoryview, np.ndarray]:
    """The files' bytes in one buffer, each from a multiple of :data:`ALIGN`, and where each starts
    (one file's bytes: as they are).

    ``blobs`` is emptied as it goes: each file's bytes are released once copied, so a batch of
    large files holds little more than the joined buffer at any time, not twice the files.
    """
    if len(blobs) == 1:  # one file (too large to share a batch): its bytes as they are, not copied
        return memoryview(blobs[0]), np.zeros(1, np.int64)
    lengths = np.fromiter((len(b) for b in blobs), np.int64, len(blobs))
    padded = -(-lengths // ALIGN) * ALIGN
    bases = exclusive_cumsum(padded)
    total = int(padded.sum())
    if total < JOIN_BY_COPY_BYTES:
        pads = (padded - lengths).tolist()
        pieces: list[bytes | memoryview] = []
        for blob, pad in zip(blobs, pads):
            pieces.append(blob)
            if pad:
                pieces.append(bytes(pad))
        return memoryview(b"".join(pieces)), bases
    out = empty(total, np.uint8)
    ends = (bases + lengths).tolist()
    for k, (start, end, stop) in enumerate(zip(bases.tolist(), ends, (bases + padded).tolist())):
        out[start:end] = np.frombuffer(blobs[k], np.uint8)
        out[end:stop] = 0
        blobs[k] = memoryview(b"")
    return memoryview(out), bases  # type: ignore[arg-type]


def decode(
    layouts: Sequence[FileLayout],
    data: memoryview,
    bases: np.ndarray,
    column: int,
    dtype: pa.DataType,
    io: PageIO,
    floor: int | None = None,
    pick: np.ndarray | None = None,
    keep: np.ndarray | None = None,
) -> pa.Array | None:
    """Every row of column ``column`` (of the layouts' selection) of the files, one file after
    another, from their bytes ``data`` (the file of ``layouts[k]`` from ``bases[k]``, see
    :func:`joined`); None when the files must be read one by one. Integer values below ``floor``
    may read as 0 (see :func:`batch.values`). ``io`` stands for the pages in messages.

    ``pick`` (sorted positions among all the rows): the rows the caller keeps. A column without
    nesting whose pages share one encoding then comes back as just those rows where its encoding
    lets them be picked from their chunks, or it holds dictionary indices (picked before their
    values are looked up); any other, every row.

    ``keep`` (bools, one per row of the files; given with ``pick`` when most rows are kept): the
    pages of flat values of one encoding give only the rows it marks, copied once from their
    chunks (:mod:`kept_flat`). The caller tells which columns gave only the kept rows by their
    length."""
    cols = [f.columns[column] for f in layouts]
    first = cols[0].key
    try:
        if all(c.key is first for c in cols):
            if pick is not None and isinstance(cols[0], ColumnLayout):
                return _decode(cols, layouts, data, bases, dtype, io, floor, pick, keep)  # type: ignore[arg-type]
            return _decoded(cols, layouts, data, bases, dtype, io, floor)
        counts = np.fromiter((f.num_rows for f in layouts), np.int64, len(layouts))
        return in_file_order(
            decode_keys(cols),
            counts,
            lambda sel: _decoded(
                [cols[k] for k in sel.tolist()],
                [layouts[k] for k in sel.tolist()],
                data,
                bases[sel],
                dtype,
                io,
                floor,
            ),
        )
    except ERRORS:
        return None


def _decoded(
    cols: list[Any],
    files: Sequence[FileLayout],
    data: memoryview,
    bases: np.ndarray,
    dtype: pa.DataType,
    io: PageIO,
    floor: int | None,
) -> pa.Array | None:
    """The rows of the files whose pages of the column share one encoding key."""
    if isinstance(cols[0], (small_nested.NestedLayout, small_constant.ConstantLayout)):
        rows = np.fromiter((f.num_rows for f in files), np.int64, len(files))
        if isinstance(cols[0], small_constant.ConstantLayout):
            return small_constant.decode(cols, rows, data, bases, dtype, io)
        return small_nested.decode(cols, rows, data, bases, io, small_dicts.looked_up)
    return _decode(cols, files, data, bases, dtype, io, floor)


def _bounded(enc: Any, u8: np.ndarray, at: np.ndarray, size: np.ndarray) -> bool:
    """Whether the chunks' buffers ``u8[at : at + size]`` in the general compression ``enc``
    claim (in their length headers) at most :data:`MAX_GENERAL_BYTES` in all once decompressed:
    a batch holds them all at once."""
    width = _GENERAL_HEADER.get(SCHEMES.get(enc.general.compression.scheme, ""), 0)
    if not width or bool(np.any(size < width)):
        return False
    claimed = le_uints(u8, at, width)
    if bool(np.any((claimed < 0) | (claimed > MAX_GENERAL_BYTES))):
        return False  # (no sum of them can overflow)
    return int(claimed.sum()) <= MAX_GENERAL_BYTES


def _decode(
    cols: list[ColumnLayout],
    files: Sequence[FileLayout],
    data: memoryview,
    bases: np.ndarray,
    dtype: pa.DataType,
    io: PageIO,
    floor: int | None,
    pick: np.ndarray | None = None,
    keep: np.ndarray | None = None,
) -> pa.Array | None:
    """The chunks of files whose pages share one encoding (the checks of
    :func:`miniblock_small.decode` and :func:`miniblock.chunk_table`, for all chunks at once);
    only the rows ``pick``, when given, where they can be picked, and the rows ``keep`` marks
    where the values are flat (see :func:`decode`)."""
    page = cols[0].page
    u8 = np.frombuffer(data, np.uint8)
    rows = np.fromiter((f.num_rows for f in files), np.int64, len(files))
    meta_at = bases + np.fromiter((c.meta_at for c in cols), np.int64, len(cols))
    page_at = bases + np.fromiter((c.data_at for c in cols), np.int64, len(cols))
    data_size = np.fromiter((c.data_size for c in cols), np.int64, len(cols))
    chunks = np.fromiter((c.chunks for c in cols), np.int64, len(cols))
    word = 4 if page.large else 2
    if int((page_at + data_size).max()) > u8.size or int((meta_at + chunks * word).max()) > u8.size:
        return None
    if bool(np.all(chunks == 1)):  # pages of one chunk (small files): no chunk table to walk
        n, chunk_at, page_of = rows, page_at, None
        chunk_bytes = ((le_uints(u8, meta_at, word) >> 4) + 1) * 8
        if bool(np.any(chunk_bytes > data_size)):
            return None
    else:
        found = chunk_tables(u8, meta_at, page_at, data_size, chunks, rows, word)
        if found is None:
            return None
        n, chunk_at, chunk_bytes, page_of = found
    header = page.header.size
    if bool(np.any(chunk_bytes < header)):
        return None
    at = (header + 7) & ~7
    size_width = 4 if page.large else 2
    valid = None
    if page.defs is not None:
        if bool(np.any(le_uints(u8, chunk_at, 2) != n)):
            return None
        def_size = le_uints(u8, chunk_at + 2, 2)
        value_at = at + ((def_size + 7) & ~7)
        size = le_uints(u8, chunk_at + 4, size_width)
    else:
        def_size = None
        value_at = np.full(n.size, at, np.int64)
        size = le_uints(u8, chunk_at + 2, size_width)
    second = None  # run lengths in a buffer of their own: where they start, and their size
    if page.buffers == 2:
        size_at = 4 if page.defs is not None else 2
        second = value_at + ((size + 7) & ~7), le_uints(u8, chunk_at + size_at + size_width, size_width)
        if bool(np.any(second[0] + second[1] > chunk_bytes)):
            return None
    if bool(np.any(value_at + size > chunk_bytes)):
        return None
    if page.kind == GENERAL and not _bounded(cols[0].encoding, u8, chunk_at + value_at, size):
        return None
    total = int(n.sum())
    if def_size is not None:
        levels = batch.levels(page.defs, data, chunk_at + at, def_size, n, io)
        if levels is None or levels.size != total:
            return None
        valid = levels == 0
    enc = cols[0].encoding
    if keep is not None and second is None and cols[0].dict_at < 0 and kept_flat.flat_bits(enc) is not None:
        # flat values: only the kept rows, copied once from the chunks
        if keep.size != total:
            return None
        read = ChunksRead(data, [chunk_at + value_at], [size], n, None, None, n)
        arr = kept_flat.kept(read, enc, 0, keep, dtype, io)
        return arr if valid is None or valid.all() else with_validity(arr, valid[keep])
    if cols[0].dict_at >= 0:
        floor = None  # dictionary indices say nothing of the values
    values = None
    picked = False  # the values are only those at ``pick``
    if pick is not None and second is None:
        if pick.size and int(pick[-1]) >= total:
            return None
        values = batch.pick_values(
            enc, data, chunk_at + value_at, size, n, pick, io, pick.size / max(total, 1)
        )
        picked = values is not None
    if (
        values is None
        and floor is None
        and page_of is None
        and enc.WhichOneof("compression") == "inline_bitpacking"
    ):
        # short chunks fill a little of their 1024-value blocks: only their values are unpacked
        share = total / (int((-(-n // bitpacking.BLOCK)).sum()) * bitpacking.BLOCK)
        values = batch.pick_values(enc, data, chunk_at + value_at, size, n, np.arange(total), io, share)
    if values is None and second is not None:
        runs = batch_runs.chunk_runs(
            enc.rle, data, chunk_at + value_at, size, chunk_at + second[0], second[1], n, io
        )
        values = batch_runs.values(runs)
    elif values is None:
        values = batch.values(enc, data, chunk_at + value_at, size, n, io, floor)
    if not isinstance(values, (Fixed, Var)):  # (None: no batch form)
        return None
    if isinstance(values, Var) and len(values.data) > MAX_VAR_BYTES:
        return None
    if isinstance(values, Var) and values.symbols is not None:  # FSST: each file's own table
        counts = (
            rows if pick is None or not picked else np.diff(np.searchsorted(pick, np.cumsum(rows)), prepend=0)
        )
        values = expand_files(values, [bytes(c.encoding.fsst.symbol_table) for c in cols], counts, io)
    if pick is not None and (picked or cols[0].dict_at >= 0):
        if pick.size and int(pick[-1]) >= total:
            return None
        total = pick.size
        valid = None if valid is None else valid[pick]
    else:
        pick = None
    if cols[0].dict_at >= 0:
        arr = small_dicts.looked_up(values, cols, rows, data, bases, dtype, valid, io, pick, picked)
        if arr is None:
            return None
    else:
        arr = to_arrow(values, dtype, total, io)
    if len(arr) != total:
        return None
    if valid is not None and not valid.all():
        arr = with_validity(arr, valid)
    return arr


# values one chunk may hold (see miniblock.MAX_CHUNK_VALUES)
_MAX_CHUNK_VALUES = 1 << 16


def chunk_tables(
    u8: np.ndarray,
    meta_at: np.ndarray,
    page_at: np.ndarray,
    data_size: np.ndarray,
    chunks: np.ndarray,
    rows: np.ndarray,
    word: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The chunks of pages of ``chunks`` chunks each (their chunk tables at ``meta_at``, their
    chunks from ``page_at``, ``rows`` values each): each chunk's value count, where it starts, its
    size and its page; None where a table does not describe its page (the checks of
    :func:`miniblock.chunk_table`)."""
    first = exclusive_cumsum(chunks)
    page_of = np.repeat(np.arange(chunks.size), chunks)
    ordinal = np.arange(page_of.size, dtype=np.int64) - first[page_of]
    words = le_uints(u8, meta_at[page_of] + ordinal * word, word)
    chunk_bytes = ((words >> 4) + 1) * 8
    counts = np.left_shift(1, words & 0xF)
    last = first + chunks - 1
    counts[last] = 0
    counts[last] = rows - np.bincount(page_of, counts, chunks.size).astype(np.int64)
    if bool(np.any(counts[last] < 0)) or bool(np.any(counts[last] > _MAX_CHUNK_VALUES)):
        return None
    ends = np.cumsum(chunk_bytes)
    within = ends - chunk_bytes - (ends - chunk_bytes)[first][page_of]
    if bool(np.any(within[last] + chunk_bytes[last] > data_size)):
        return None
    return counts, page_at[page_of] + within, chunk_bytes, page_of
