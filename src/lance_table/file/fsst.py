"""Vectorized FSST decompression (Fast Static Symbol Table string compression).

A symbol table maps one-byte codes to symbols of 1 to 8 bytes. In the compressed stream, code 255 is
an escape: the byte after it is copied literally. Lance stores the table as a u64 header
(``"FSST"`` magic in the high 32 bits, then the "switch" bit, suffix limit, terminator and symbol
count), the symbols as u64 words and then one length byte per symbol. Each string is compressed on
its own, so parsing (which matters only for escapes) restarts at every string start.

How :func:`decode` works, with numpy only and no loop over values or symbol lengths:

1. Escape markers are found (runs of 0xFF bytes alternate marker, literal) and dropped; the byte
   after each marker becomes a "literal" code 256 + byte. Every remaining code then stands for the
   row of one 512-row table of 8-byte slots (rows 0-255 symbols, rows 256-511 single bytes).
2. One lookup gives each code's output length and one cumulative sum its output position.
3. Output byte ``b`` comes from table byte ``8 * row[k] + (b - pos[k])`` where ``k`` is the code
   that produced it. Within one code this index grows by 1 from byte to byte; it jumps only where a
   code starts. So the jumps are scattered into an array of ones at the codes' output positions
   and a second cumulative sum (in int16: every index is below 4096) gives every byte's index.
4. A single gather from the table produces the output.

This is about twice as fast as expanding each code with ``np.repeat``, whose cost per element
dominates for symbols of one or two bytes.
"""

from __future__ import annotations

import itertools
import struct

import numpy as np

from lance_table._parallel import map_parts

FSST_MAGIC = 0x46535354
ESCAPE = 255
# Rows of the lookup table: one per code (those at and above the symbol count are never produced)
# and then one per literal byte.
_LITERAL_ROW = 256
_ROWS = 512
# Codes decoded at a time: the temporaries (about 40 bytes a code) then stay in the CPU cache.
_BLOCK = 1 << 16
# Parts of one column's codes decoded at once on the thread pool.
_PARTS = 4


class FsstError(ValueError):
    """The symbol table or the compressed bytes are malformed."""


def decode(
    symbol_table: bytes | memoryview, data: bytes | memoryview, offsets: np.ndarray
) -> tuple[bytes, np.ndarray]:
    """Decompress strings whose compressed bytes are ``data[offsets[i]:offsets[i+1]]``.

    Returns the decompressed bytes and the new offsets (one more than the number of strings).
    """
    offsets = np.asarray(offsets, np.int64)
    table, lengths, nsym = _parse_table(symbol_table)
    if table is None:
        return bytes(data), offsets  # the encoder switched itself off: bytes are stored raw
    codes = np.frombuffer(data, np.uint8)
    n = codes.size
    if offsets.size and (
        offsets[0] < 0 or offsets[-1] > n or (offsets.size > 1 and np.diff(offsets).min() < 0)
    ):
        raise FsstError(f"string offsets do not lie in order within the {n} compressed bytes")

    ff = np.flatnonzero(codes == ESCAPE)
    rows: np.ndarray = codes
    code_index = offsets
    bad: np.ndarray | None = None  # codes that are neither symbols nor escapes
    if ff.size:
        markers = _escape_markers(ff, offsets, n)
        literals = markers + 1
        rows = codes.astype(np.int16)
        rows[literals] += _LITERAL_ROW
        bad = codes >= nsym
        bad[markers] = False
        bad[literals] = False
        keep = np.ones(n, bool)
        keep[markers] = False
        rows = rows[keep]
        # index of each offset among the codes that are left: minus the markers before it
        code_index = offsets - np.searchsorted(markers, offsets)
    elif n and int(codes.max()) >= nsym:
        bad = codes >= nsym
    if bad is not None and bad.any():
        raise FsstError(f"code {int(codes[bad][0])} is not in a symbol table of {nsym} symbols")

    # The codes are cut into parts decoded on threads (numpy and pyarrow release the GIL), each
    # in blocks small enough for the temporaries to stay in the CPU cache.
    flat = table.reshape(-1)
    bounds = _parts(rows.size)
    parts = map_parts(
        lambda b: _decode_part(rows, b[0], b[1], code_index, flat, lengths), list(itertools.pairwise(bounds))
    )
    new_offsets = np.empty(offsets.size, np.int64)
    done = 0  # output bytes of the parts before
    first = 0  # first offset not yet placed
    for pieces, local in parts:
        new_offsets[first : first + local.size] = local + done
        first += local.size
        done += sum(piece.size for piece in pieces)
    return b"".join(piece.data for pieces, _ in parts for piece in pieces), new_offsets


def _parts(n: int) -> list[int]:
    """Where to cut ``n`` codes into parts of whole blocks, about one per core."""
    blocks = max(-(-n // _BLOCK), 1)
    count = min(blocks, _PARTS)
    return [(blocks * k // count) * _BLOCK for k in range(count)] + [max(n, 1)]


def _decode_part(
    rows: np.ndarray, lo: int, hi: int, code_index: np.ndarray, flat: np.ndarray, lengths: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray]:
    """Decode codes ``[lo, hi)`` block by block: the output pieces, and the output position
    (from the part's start) of every string start among those codes."""
    first = int(np.searchsorted(code_index, lo, "left"))
    last = int(np.searchsorted(code_index, hi, "left" if hi < rows.size else "right"))
    local = np.empty(last - first, np.int64)
    pieces = []
    done = 0
    for start in range(lo, hi, _BLOCK):
        stop = min(start + _BLOCK, hi)
        out, out_pos = _decode_block(rows[start:stop], flat, lengths)
        a = int(np.searchsorted(code_index, start, "left"))
        b = int(np.searchsorted(code_index, stop, "left" if stop < rows.size else "right"))
        local[a - first : b - first] = out_pos[code_index[a:b] - start] + done
        done += out.size
        pieces.append(out)
    return pieces, local


def _decode_block(rows: np.ndarray, flat: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The output bytes of table ``rows`` and the output position of each (one more than rows)."""
    index = rows.astype(np.intp)
    out_len = lengths[index]
    out_pos = np.empty(rows.size + 1, np.intp)
    out_pos[0] = 0
    np.cumsum(out_len, out=out_pos[1:])
    total = int(out_pos[-1])
    if total == 0:
        return np.zeros(0, np.uint8), out_pos
    # source[b] = 8 * rows[k] + b - out_pos[k]; its step from the last byte of code k-1 to the first
    # of code k is 8 * (rows[k] - rows[k-1]) - out_len[k-1] + 1, and 1 elsewhere.
    row16 = rows.astype(np.int16, copy=False)
    step = np.diff(row16)
    step <<= 3
    step -= out_len[:-1]
    step += 1
    source = np.ones(total, np.int16)
    source[0] = row16[0] << 3
    source[out_pos[1:-1]] = step
    np.cumsum(source, out=source)
    return np.take(flat, source), out_pos


def _parse_table(symbol_table: bytes | memoryview) -> tuple[np.ndarray | None, np.ndarray, int]:
    """The 512 x 8 byte lookup table, the output length of each of its rows and the symbol count.

    The table is ``None`` when the symbol table says the data is stored raw.
    """
    if len(symbol_table) < 8:
        raise FsstError(f"symbol table of {len(symbol_table)} bytes is too short")
    (header,) = struct.unpack_from("<Q", symbol_table, 0)
    if header >> 32 != FSST_MAGIC:
        raise FsstError("symbol table does not start with the FSST magic")
    if not (header >> 24) & 1:
        return None, np.zeros(0, np.intp), 0
    nsym = header & 0xFF
    if len(symbol_table) < 8 + 9 * nsym:
        raise FsstError(f"symbol table of {len(symbol_table)} bytes cannot hold {nsym} symbols")
    sym_lengths = np.frombuffer(symbol_table, np.uint8, nsym, 8 + nsym * 8)
    if nsym and (sym_lengths.min() < 1 or sym_lengths.max() > 8):
        raise FsstError("symbol lengths must be between 1 and 8")
    table = np.zeros((_ROWS, 8), np.uint8)
    table[:nsym] = np.frombuffer(symbol_table, np.uint8, nsym * 8, 8).reshape(nsym, 8)
    table[_LITERAL_ROW:, 0] = np.arange(256, dtype=np.uint8)
    lengths = np.ones(_ROWS, np.intp)
    lengths[:nsym] = sym_lengths
    return table, lengths, nsym


def _escape_markers(ff: np.ndarray, offsets: np.ndarray, n: int) -> np.ndarray:
    """The positions of the 0xFF bytes (at ``ff``, in order) that are escape markers.

    In a run of consecutive 0xFF bytes that begins at a code position, markers and literals
    alternate, starting with a marker. A run begins at a code position unless it continues
    across a string boundary, where parsing restarts. Every marker must be followed by a literal
    in the same string.
    """
    starts = np.zeros(n + 1, bool)
    starts[offsets] = True
    new_run = np.ones(ff.size, bool)
    new_run[1:] = ff[1:] != ff[:-1] + 1
    new_run |= starts[ff]
    run_id = np.cumsum(new_run) - 1
    pos_in_run = ff - ff[new_run][run_id]
    markers = ff[pos_in_run % 2 == 0]
    after = markers + 1
    if after[-1] >= n or starts[after].any():
        raise FsstError("an escape byte ends a string: the literal it announces is missing")
    return markers
