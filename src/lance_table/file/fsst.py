"""Vectorized FSST decompression (Fast Static Symbol Table string compression).

A symbol table maps one-byte codes to symbols of 1 to 8 bytes. In the compressed stream, code 255 is
an escape: the byte after it is copied literally. Lance stores the table as a u64 header
(``"FSST"`` magic in the high 32 bits, then the "switch" bit, suffix limit, terminator and symbol
count), the symbols as u64 words and then one length byte per symbol.
"""

from __future__ import annotations

import struct

import numpy as np

FSST_MAGIC = 0x46535354
ESCAPE = 255


class FsstError(ValueError):
    """The symbol table or the compressed bytes are malformed."""


def decode(
    symbol_table: bytes | memoryview, data: bytes | memoryview, offsets: np.ndarray
) -> tuple[bytes, np.ndarray]:
    """Decompress strings whose compressed bytes are ``data[offsets[i]:offsets[i+1]]``.

    Returns the decompressed bytes and the new offsets (one more than the number of strings).
    """
    if len(symbol_table) < 8:
        raise FsstError(f"symbol table of {len(symbol_table)} bytes is too short")
    (header,) = struct.unpack_from("<Q", symbol_table, 0)
    if header >> 32 != FSST_MAGIC:
        raise FsstError("symbol table does not start with the FSST magic")
    offsets = np.asarray(offsets, np.int64)
    if not (header >> 24) & 1:
        return bytes(data), offsets  # the encoder switched itself off: bytes are stored raw
    nsym = header & 0xFF
    if len(symbol_table) < 8 + 9 * nsym:
        raise FsstError(f"symbol table of {len(symbol_table)} bytes cannot hold {nsym} symbols")
    symbols = np.frombuffer(symbol_table, np.uint8, nsym * 8, 8).reshape(nsym, 8)
    lengths = np.frombuffer(symbol_table, np.uint8, nsym, 8 + nsym * 8).astype(np.int64)
    codes = np.frombuffer(data, np.uint8)
    n = codes.size

    escape = _escape_markers(codes, offsets)
    literal = np.zeros(n, bool)
    literal[1:] = escape[:-1]
    is_symbol = ~escape & ~literal
    sym_codes = codes[is_symbol].astype(np.int64)
    if sym_codes.size and int(sym_codes.max()) >= nsym:
        raise FsstError(f"code {int(sym_codes.max())} is not in a symbol table of {nsym} symbols")

    out_len = np.zeros(n, np.int32)
    out_len[literal] = 1
    out_len[is_symbol] = lengths[sym_codes]
    out_pos = np.zeros(n + 1, np.int64)
    np.cumsum(out_len, out=out_pos[1:])
    total = int(out_pos[-1])
    # One table of 8-byte rows: the symbols, then one row per possible literal byte. Every output
    # byte is then a single gather: row of the code that produced it, and its place in that row.
    table = np.zeros((nsym + 256, 8), np.uint8)
    table[:nsym] = symbols
    table[nsym:, 0] = np.arange(256, dtype=np.uint8)
    index = np.int32 if total < 2**31 - 4096 else np.int64
    row = codes.astype(index)
    row[literal] += nsym
    # source byte = row * 8 + (output position - start of this code's output), in one repeat
    source = np.repeat(row * 8 - out_pos[:-1].astype(index), out_len)
    source += np.arange(total, dtype=index)
    out = table.reshape(-1)[source]
    return out.tobytes(), out_pos[offsets]


def _escape_markers(codes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Which 0xFF bytes are escape markers (the others are escaped literals).

    In a run of consecutive 0xFF bytes that begins at a code position, markers and literals
    alternate, starting with a marker. A run begins at a code position unless it continues
    across a string boundary, where parsing restarts.
    """
    escape = np.zeros(codes.size, bool)
    ff = np.flatnonzero(codes == ESCAPE)
    if not ff.size:
        return escape
    new_run = np.ones(ff.size, bool)
    new_run[1:] = ff[1:] != ff[:-1] + 1
    starts = np.zeros(codes.size + 1, bool)
    starts[offsets[:-1][offsets[:-1] < codes.size]] = True
    new_run |= starts[ff]
    run_id = np.cumsum(new_run) - 1
    pos_in_run = ff - ff[new_run][run_id]
    escape[ff[pos_in_run % 2 == 0]] = True
    return escape
