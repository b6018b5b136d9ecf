"""FSST strings of several files, each compressed with its own symbol table, decoded into one
output (see :mod:`fsst` for how a stream is decoded).

pylance trains a symbol table per page, so a scan of a table of many small files (a living
table's appends, or 1M rows in 20k-row fragments) gets a stream per file. Their chunks are parsed
and joined for all the files at once (``small_many``), and the codes of each file are then taken
two at a time from its pair table straight out of the joined codes: one index view of all of
them, no copy of each file's codes, no per-file validation pass (the offsets are checked once,
the largest code of every file found in one ``np.maximum.reduceat``), and every file's output
placed in one buffer. A file starting at an odd code pairs its first code with the last code of
the file before: that code is read with this file's table, its bytes land before the first
string's start and are not part of the output (likewise after the last string of a file that
ends at an odd code). Files whose streams may hold escapes, are stored raw, are short, or have
no pair table go through :func:`fsst.decode_text` on their own codes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lance_table._buffers import empty
from lance_table.file.compression import fsst
from lance_table.file.compression.fsst_pairs import ESCAPE


def decode_files(
    symbol_tables: Sequence[bytes], data: bytes | memoryview, offsets: np.ndarray, rows: np.ndarray
) -> fsst.Decoded:
    """Decompress the strings ``data[offsets[i]:offsets[i+1]]`` where the first ``rows[0]`` were
    compressed with ``symbol_tables[0]``, the next ``rows[1]`` with ``symbol_tables[1]``, and so
    on: their bytes back to back, the new offsets (from 0) and whether the output is known ASCII.

    Raises:
        FsstError: a symbol table or the compressed bytes are malformed.
    """
    offsets = np.asarray(offsets, np.int64)
    codes = np.frombuffer(data, np.uint8)
    n = codes.size
    if offsets.size != int(rows.sum()) + 1:
        raise fsst.FsstError(f"{offsets.size} string offsets for {int(rows.sum())} strings")
    if offsets[0] < 0 or offsets[-1] > n or fsst.descends(offsets):
        raise fsst.FsstError(f"string offsets do not lie in order within the {n} compressed bytes")
    row_at = np.zeros(rows.size + 1, np.int64)
    np.cumsum(rows, out=row_at[1:])
    code_at = offsets[row_at]  # each file's codes: [code_at[k], code_at[k + 1])
    sizes = np.diff(code_at)
    # the largest code of each file with codes (from the files' starts to the next one's: the
    # empty files between them add nothing)
    present = np.flatnonzero(sizes)
    largest = np.zeros(rows.size, np.int64)
    if present.size:
        largest[present] = np.maximum.reduceat(codes[: int(code_at[-1])], code_at[present])
    if codes.ctypes.data % 2:  # (16-bit words must be aligned: one copy, rarely needed)
        codes = codes.copy()
    words = codes[: n - n % 2].view(np.uint16)
    out = empty(offsets.size, np.int64)
    out[0] = 0
    done = 0
    ascii = True
    pieces: list[bytes | memoryview] = []
    for k, table in enumerate(symbol_tables):
        r0, r1 = int(row_at[k]), int(row_at[k + 1])
        lo, hi = int(code_at[k]), int(code_at[k + 1])
        if r1 == r0:
            continue
        at = offsets[r0 : r1 + 1]
        got = _fast(table, codes, words, at, lo, hi, int(largest[k]))
        if got is None:
            got = fsst.decode_text(table, codes.data[lo:hi], at - lo)
        piece, starts, piece_ascii = got
        ascii &= piece_ascii
        np.add(starts[1:], done, out=out[r0 + 1 : r1 + 1])
        done += len(piece)
        if len(piece):
            pieces.append(piece)
    joined = pieces[0] if len(pieces) == 1 else fsst.joined(pieces, done) if pieces else memoryview(b"")
    return fsst.Decoded(joined, out, ascii)


def _fast(
    table: bytes, codes: np.ndarray, words: np.ndarray, at: np.ndarray, lo: int, hi: int, largest: int
) -> fsst.Decoded | None:
    """The strings of one file (string starts ``at``, codes ``[lo, hi)``) taken as pairs from the
    index view ``words`` of all the codes; None when the file is not one for this path (see the
    module's docstring)."""
    if hi == lo or hi - lo < fsst.PAIRS_MIN or hi - lo >= 2 * fsst.MIN_PART:
        return None  # (short streams take single codes; long ones are cut into parts on threads)
    tables = fsst.decoding_tables(table)
    if tables is None or largest >= tables.nsym:
        return None  # stored raw, or maybe escapes
    pairs = fsst.pair_table(table)
    if pairs is None:
        return None
    first = lo >> 1  # the pair holding the first code
    last = (hi + 1) >> 1  # past the pair holding the last code
    if last <= words.size:
        index = words[first:last]
    else:  # (the last code of all, at an odd place: paired with the escape code, which is empty)
        index = np.empty(last - first, np.uint16)
        index[:-1] = words[first:]
        index[-1] = int(codes[hi - 1]) | (ESCAPE << 8)
    data, ends = fsst.take_rows(pairs, index)
    local = at - (first << 1)
    starts = np.take(ends, np.right_shift(local, 1)).astype(np.int64)
    odd = np.bitwise_and(at, 1)
    # a string starting at an odd code starts after the first code of its pair (the one before)
    step = np.take(tables.code_lengths, np.take(codes, at - odd, mode="clip"))
    step *= odd.astype(np.uint8)
    starts += step
    begin, end = int(starts[0]), int(starts[-1])
    if begin:
        starts -= begin
    return fsst.Decoded(data[begin:end], starts, tables.ascii)
