"""FSST code pairs: the table of the bytes of every two codes of a symbol table, built in numpy
from the runs of codes of one symbol length that writers make, and the row of that table of
every two codes of a stream, escapes included (see :mod:`fsst`, which takes the rows).

Rows ``a | b << 8`` hold symbol ``a`` then symbol ``b`` (the escape code's symbol is empty); rows
``PAIR_ROWS + x`` are the escaped literal bytes ``x``. A stream with escapes gets an escape code
standing for nothing (a filler) before every marker that would be second in its pair, so that
each marker and its literal make one pair (:func:`aligned`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty

ESCAPE = 255
# Rows of a lookup table of single codes: one per code, then one per literal byte.
LITERAL_ROW = 256
PAIR_ROWS = 1 << 16
# Tables in more runs than this fill the second symbol of their pairs a byte at a time over all
# first symbols, fewer a column of pairs at a time (see :func:`product`).
_FEW_RUNS = 4


class PairIndex(NamedTuple):
    """A code stream read two codes at a time: the rows of ``table`` of its pairs (``rows``,
    one per two codes, the last code of an odd stream paired with the empty escape row), the
    codes and their output lengths."""

    table: pa.Array
    rows: np.ndarray
    codes: np.ndarray
    code_lengths: np.ndarray


def aligned(
    codes: np.ndarray, offsets: np.ndarray, markers: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The codes with an escape code that stands for nothing (a filler) before every escape
    marker that would otherwise be second in its pair, so that each marker and its literal make
    one pair; the string offsets and the markers moved by the fillers before them.

    A marker needs a filler when it and the marker before it are an odd number of codes apart
    (the first marker: when it is at an odd position): the markers before it all end up at even
    positions, so the parity of the fillers before it is that of the previous marker's position.
    A filler is second in its pair, after a symbol (markers are first, literals second), whose
    row in the pair table is that symbol alone. A string that starts with a filled marker starts
    at its filler."""
    fill_at = markers[np.diff(markers, prepend=0) % 2 == 1]
    if not fill_at.size:
        return codes, offsets, markers
    k = fill_at.size
    filled = empty(codes.size + k, np.uint8)  # (np.insert's arrays are fresh memory: page faults)
    at = fill_at + np.arange(k)  # where the fillers land
    keep = empty(filled.size, np.bool_)
    keep.fill(True)
    keep[at] = False
    filled[keep] = codes
    filled[at] = ESCAPE
    moved = offsets + np.searchsorted(fill_at, offsets, "left")
    return filled, moved, markers + np.searchsorted(fill_at, markers, "right")


def pair_index(codes: np.ndarray, markers: np.ndarray | None) -> np.ndarray:
    """The row of each two codes in the pair table (``fsst.pair_table``): ``a | b << 8``, or for an
    escape marker (at even positions ``markers``, see :func:`aligned`) and its literal, the
    literal's row."""
    n = codes.size
    pairs = codes
    if n % 2 or codes.ctypes.data % 2:
        # 16-bit indices must be aligned; an odd last code is paired with the escape code,
        # whose row is empty (as the last code of a stream it is no marker)
        pairs = empty(n + n % 2, np.uint8)
        pairs[:n] = codes
        pairs[n:] = ESCAPE
    p16 = pairs.view(np.uint16)
    if markers is None or not markers.size:
        return p16
    index = empty(p16.size, np.int32)
    index[:] = p16
    index[markers >> 1] = codes[markers + 1].astype(np.int32) + PAIR_ROWS
    return index


def product(
    a_table: np.ndarray,
    a_lengths: np.ndarray,
    a_runs: tuple[tuple[int, int, int], ...],
    b_table: np.ndarray,
    b_lengths: np.ndarray,
    b_runs: tuple[tuple[int, int, int], ...],
    spare: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (65,537, int32) and bytes of the 65,536 rows ``a | b << 8``, each symbol
    ``a`` of the first table (rows of 8 bytes, lengths, runs of one length: see :func:`_runs`)
    then symbol ``b`` of the second; both arrays have ``spare`` more items at their end, unset.

    Built in numpy without an index per row or per byte: the rows of codes ``b`` of one length
    are blocks of one size, one after another, so they are the rows of a 2-D view, and within
    them the pairs with codes ``a`` of one length are the rows of a 3-D view. The first block of
    each run of ``b`` gets its ``a`` symbols, the others are copies of it, then each byte of the
    ``b`` symbols is broadcast to its column (about 0.3 ms, against 2.5 ms for a take of the
    131,072 symbols; a page of pylance's holds some 300,000 codes).
    """
    a_starts = np.zeros(LITERAL_ROW + 1, np.int32)  # where each a symbol starts in a block's a-part
    np.cumsum(a_lengths, out=a_starts[1:])
    b_starts = np.zeros(LITERAL_ROW + 1, np.int32)
    np.cumsum(b_lengths, out=b_starts[1:])
    total = int(a_starts[-1])  # bytes of all 256 a symbols
    every = np.arange(LITERAL_ROW, dtype=np.int32)
    block = every * total + LITERAL_ROW * b_starts[:-1]  # where the rows of each b begin
    offsets = np.empty(PAIR_ROWS + 1 + spare, np.int32)
    grid = offsets[:PAIR_ROWS].reshape(LITERAL_ROW, LITERAL_ROW)  # [b, a]
    offsets[PAIR_ROWS] = size = LITERAL_ROW * (total + int(b_starts[-1]))
    data = np.empty(size + spare, np.uint8)
    for b0, b1, kb in b_runs:
        # where each pair starts in the rows of its b: the a-parts before it, and kb bytes each
        np.add(block[b0:b1, None], a_starts[None, :-1] + every * kb, out=grid[b0:b1])
        width = total + LITERAL_ROW * kb  # bytes of the rows of one b
        at = int(block[b0])
        for a0, a1, ka in a_runs:  # the a-part of the first block
            if ka:
                place = at + int(a_starts[a0]) + a0 * kb
                np.ndarray((a1 - a0, ka), np.uint8, data, place, (ka + kb, 1))[...] = a_table[a0:a1, :ka]
        data[at + width : at + width * (b1 - b0)].reshape(b1 - b0 - 1, width)[...] = data[at : at + width]
        if kb and len(a_runs) > _FEW_RUNS:
            # the b-part of all a at once, byte by byte: fewer numpy calls than columns
            # (a table of 8 runs: 1.4 -> 1.0 ms)
            rows = data[at : at + width * (b1 - b0)].reshape(b1 - b0, width)
            holes = a_starts[1:] + every * kb  # where the b-part of each a starts in a row
            for j in range(kb):
                rows[:, holes + j] = b_table[b0:b1, j, None]
            continue
        for a0, a1, ka in a_runs:  # the b-part, down the column of every a
            _fill_columns(
                data,
                at + int(a_starts[a0]) + a0 * kb + ka,
                (b1 - b0, a1 - a0),
                (width, ka + kb),
                b_table[b0:b1, :kb],
            )
    return offsets, data


def _fill_columns(
    data: np.ndarray, at: int, shape: tuple[int, int], strides: tuple[int, int], symbols: np.ndarray
) -> None:
    """Write symbol ``i`` (a row of ``symbols``, k bytes) at ``at + i * strides[0] + j *
    strides[1]`` for every ``j < shape[1]``: as one word of k bytes when k is 2, 4 or 8 and every
    place is aligned to it (numpy writes unaligned words several times slower than bytes), else
    byte by byte."""
    k = symbols.shape[1]
    if k in (2, 4, 8) and not (at % k or strides[0] % k or strides[1] % k):
        kind = np.dtype(f"<u{k}")
        np.ndarray(shape, kind, data, at, strides)[...] = symbols.view(kind)
        return
    for j in range(k):
        np.ndarray(shape, np.uint8, data, at + j, strides)[...] = symbols[:, j, None]
