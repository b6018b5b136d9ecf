"""FSST decompression (Fast Static Symbol Table string compression) on numpy and pyarrow.

A symbol table maps one-byte codes to symbols of 1 to 8 bytes. In the compressed stream, code 255 is
an escape: the byte after it is copied literally. Lance stores the table as a u64 header
(``"FSST"`` magic in the high 32 bits, then the "switch" bit, suffix limit, terminator and symbol
count), the symbols as u64 words and then one length byte per symbol. Each string is compressed on
its own, so parsing (which matters only for escapes) restarts at every string start.

How :func:`decode` works, with no loop over values or symbol lengths:

1. Escape markers are found (runs of 0xFF bytes alternate marker, literal) and dropped; the byte
   after each marker becomes a "literal" code 256 + byte. Once the markers are gone the stream
   is a plain sequence of table rows, and string boundaries no longer matter for decoding.
2. The table is a pyarrow binary array (rows 0-255 the symbols, 256-511 single bytes), so a
   ``take`` of the rows writes the decompressed bytes, and its offsets are where every code's
   output starts: one pass in C++ that releases the GIL.
3. Without escapes every row is one byte, and two neighbouring codes are read as one 16-bit index
   into a table of all 65536 symbol pairs (built once per symbol table): half as many elements to
   take, which is what makes the common case fast. An odd last code is paired with the escape
   code, whose row is empty. Where each string starts in the output is the start of its pair,
   plus the length of the pair's first code when the string starts at the second.
4. Long streams are cut into parts that are decoded on threads, as many as the workers that the
   decodes in flight leave free (the pages of a scan, one per worker, are not cut).

The binary take of pairs costs about 2.5-4.5 ns per code, most of a page's decoding. Measured and
slower on pylance's pages (per page of 7.6M codes: 17-18 ms for the pairs): a take of single codes
(55 ms); each code's symbol gathered as a u64 (7 ms), then compacted by a byte mask in numpy
(250 ms) or by overlapping u64 writes through a one-byte-stride view (+30 ms); 16-byte pair slots
taken as fixed-size binary (3-6 ms) and compacted by an Arrow filter (20-37 ms); inline
``binary_view`` entries cast to binary (57 ms); list<uint8> takes and list-view flattens (70 ms
and more). One take over several pages gains nothing: each page has its own table.

Also measured and slower (a page of pylance's 20-letter strings: 7.6M codes, symbols of 1-2
bytes; pair take 40-43 ms on a loaded machine): groups of 8 codes assembled in 16-byte slots from
u64 pair words by numpy shifts and taken as entries between gaps (the gap take of 0.95M entries
costs 9 ms, the assembly 25 ms: 48-66 ms in all); pair slots of 4 bytes compacted by a boolean
mask (70 ms) or ``np.compress`` / Arrow's filter (48-54 ms); pair words written at their output
positions through numpy (76 ms); pair slots padded with an unused byte that
``bytes.translate`` deletes (25 ms for the slots alone, then the output positions need a cumulative
sum of pair lengths, and it holds the GIL); ``binary_join`` of per-string lists of symbols (108
ms). Arrow's kernels that write variable-length output cost 5-11 ns per element whatever
builds their input, so the pair take, with the fewest elements that a table of 65536 rows allows,
stays.

The output needs no UTF-8 check when the table's symbols and the escaped literals are all ASCII
(:func:`decode_text` says so, from the largest code it reads anyway and the literals it finds).
"""

from __future__ import annotations

import functools
import itertools
import struct
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._buffers import empty
from lance_table._parallel import map_parts, parts_inline, workers

FSST_MAGIC = 0x46535354
ESCAPE = 255
# Rows of the lookup table: one per code (those at and above the symbol count are never produced)
# and then one per literal byte.
_LITERAL_ROW = 256
_ROWS = 512
# Codes per part decoded on one thread: at least the first, at most the second (the output of a
# part, at most 8 bytes a code, must fit the 32-bit offsets of a binary array), and about
# ``_PARTS`` parts for a long stream.
_MIN_PART = 1 << 18
_MAX_PART = 1 << 26
_PARTS = 4


class FsstError(ValueError):
    """The symbol table or the compressed bytes are malformed."""


@dataclass(frozen=True)
class _Tables:
    """A symbol table ready for decoding."""

    lengths: np.ndarray  # output bytes of each of the 512 rows
    code_lengths: np.ndarray  # uint8 output bytes of each code (0 for the escape code)
    nsym: int
    singles: pa.Array  # binary: the bytes of each row
    pairs: pa.Array  # binary: the bytes of rows a then b at index a | b << 8 (a, b < 256)
    ascii: bool  # every byte of every symbol is below 0x80


class Decoded(NamedTuple):
    """Decompressed strings: their bytes, the n + 1 offsets into them, and whether the bytes are
    known to be ASCII without looking at them (see :func:`decode_text`)."""

    data: bytes | memoryview
    offsets: np.ndarray
    ascii: bool


def decode(
    symbol_table: bytes | memoryview, data: bytes | memoryview, offsets: np.ndarray
) -> tuple[bytes | memoryview, np.ndarray]:
    """Decompress strings whose compressed bytes are ``data[offsets[i]:offsets[i+1]]``.

    Returns the decompressed bytes and the new offsets (one more than the number of strings).
    """
    got = decode_text(symbol_table, data, offsets)
    return got.data, got.offsets


def decode_text(symbol_table: bytes | memoryview, data: bytes | memoryview, offsets: np.ndarray) -> Decoded:
    """:func:`decode`, also saying whether the output is all ASCII (so valid UTF-8) for free.

    The output is made of symbols and of the literal bytes that follow escapes, nothing else: when
    every symbol of the table is ASCII and so is every escaped literal (the stream's largest code
    is a symbol, or the literals were looked at as the escapes were found), so is every output
    byte. Raw data (the encoder switched off) is not looked at: ``ascii`` is then False.
    """
    offsets = np.asarray(offsets, np.int64)
    tables = _tables(bytes(symbol_table))
    if tables is None:  # the encoder switched itself off: bytes are stored raw
        return Decoded(bytes(data), offsets, False)
    codes = np.frombuffer(data, np.uint8)
    n = codes.size
    if offsets.size and (offsets[0] < 0 or offsets[-1] > n or descends(offsets)):
        raise FsstError(f"string offsets do not lie in order within the {n} compressed bytes")
    rows, code_index, ascii_literals = _rows(codes, offsets, tables.nsym)
    ascii = tables.ascii and ascii_literals
    with _IN_FLIGHT:
        bounds = _bounds(rows.size)
        if len(bounds) == 2:  # one part: decoded here, nothing to join
            pieces, starts = _decode_part(rows, 0, rows.size, code_index, tables)
            return Decoded((pieces[0] if pieces else memoryview(b"")), starts, ascii)
        parts = map_parts(
            lambda b: _decode_part(rows, b[0], b[1], code_index, tables), list(itertools.pairwise(bounds))
        )
    new_offsets = empty(offsets.size, np.int64)
    done = 0  # output bytes of the parts before
    first = 0  # first offset not yet placed
    pieces = []
    for part_pieces, local in parts:
        new_offsets[first : first + local.size] = local + done
        first += local.size
        done += sum(len(piece) for piece in part_pieces)
        pieces += part_pieces
    pieces = [piece for piece in pieces if len(piece)]
    return Decoded((pieces[0] if len(pieces) == 1 else _joined(pieces, done)), new_offsets, ascii)


def _joined(pieces: list[memoryview], size: int) -> memoryview:
    """The ``size`` bytes of ``pieces`` back to back, in one buffer from Arrow's pool."""
    out = empty(size, np.uint8)
    at = 0
    for piece in pieces:
        out[at : at + len(piece)] = np.frombuffer(piece, np.uint8)
        at += len(piece)
    return memoryview(out)  # type: ignore[arg-type]


class _InFlight:
    """How many :func:`decode` calls are running in this process: the threads left free for
    cutting one stream into parts are the workers shared among them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def __enter__(self) -> int:
        with self._lock:
            self.count += 1
            return self.count

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.count -= 1


_IN_FLIGHT = _InFlight()


def _rows(codes: np.ndarray, offsets: np.ndarray, nsym: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """The table rows of a code stream (uint8 without escapes, else int16 with literal rows), the
    index among them of each string offset, and whether every escaped literal is ASCII."""
    n = codes.size
    if not n or int(codes.max()) < nsym:
        return codes, offsets, True  # every code is a symbol: no escapes (one pass over the codes)
    ff = np.flatnonzero(codes == ESCAPE)
    if not ff.size:
        bad = codes >= nsym
        raise FsstError(f"code {int(codes[bad][0])} is not in a symbol table of {nsym} symbols")
    markers = _escape_markers(ff, offsets, n)
    literals = markers + 1
    rows = codes.astype(np.int16)
    rows[literals] += _LITERAL_ROW
    bad = codes >= nsym  # codes that are neither symbols nor escapes
    bad[markers] = False
    bad[literals] = False
    if bad.any():
        raise FsstError(f"code {int(codes[bad][0])} is not in a symbol table of {nsym} symbols")
    keep = np.ones(n, bool)
    keep[markers] = False
    ascii_literals = int(codes[literals].max()) < 0x80
    # index of each offset among the codes that are left: minus the markers before it
    return rows[keep], offsets - np.searchsorted(markers, offsets), ascii_literals


def _bounds(n: int) -> list[int]:
    """Where to cut ``n`` codes into parts (of even sizes, so that pairs stay within a part).

    Parts run on the threads that the streams being decoded at the moment leave free (a scan
    decoding a page per worker cuts none; ten pages on 16 workers are cut in two), each of at
    least ``_MIN_PART`` codes: every cut costs a copy when the parts are joined, and parts that
    would run one after the other on this thread (inside a map that keeps every worker busy)
    gain nothing for it."""
    if not n:
        return [0, 0]
    free = 1 if parts_inline() else -(-workers() // max(_IN_FLIGHT.count, 1))  # (no core left idle)
    count = min(_PARTS, free, max(1, n // _MIN_PART))
    size = min(-(-n // count), _MAX_PART)
    size += size % 2
    return [*range(0, n, size), n]


def _decode_part(
    rows: np.ndarray, lo: int, hi: int, code_index: np.ndarray, t: _Tables
) -> tuple[list[memoryview], np.ndarray]:
    """Decode codes ``[lo, hi)``: the output pieces, and the output position (from the part's
    start) of every string start among those codes."""
    seg = rows[lo:hi]
    first = int(np.searchsorted(code_index, lo, "left"))
    last = int(np.searchsorted(code_index, hi, "left" if hi < rows.size else "right"))
    at = code_index[first:last]  # string starts, as code positions in the part
    if lo:
        at = np.subtract(at, lo, out=empty(at.size, at.dtype))
    if seg.dtype == np.uint8:
        if not seg.size:
            return [], np.zeros(at.size, np.int64)
        pairs = seg
        if seg.size % 2 or seg.ctypes.data % 2:
            # 16-bit indices must be aligned; an odd last code is paired with the escape code,
            # whose row is empty (it never occurs in a stream without escapes)
            pairs = empty(seg.size + seg.size % 2, np.uint8)
            pairs[: seg.size] = seg
            pairs[seg.size :] = ESCAPE
        p16 = pairs.view(np.uint16)
        data, ends = _take(t.pairs, p16)
        # a string starting at an odd code starts after the first code of its pair (the code
        # before it): add that code's length (no masks: the parity multiplies it). In 32 bits (a
        # part's codes are fewer than 2**31) and gathers in Arrow, which beats numpy's fancy
        # indexing several times over on these many small lookups.
        at32 = at.astype(np.int32)
        half = np.right_shift(at32, 1)
        starts = empty(at.size, np.int64)
        starts[:] = _gather(ends, half)
        odd = np.bitwise_and(at32, 1).astype(np.uint8)
        before = np.subtract(at32, odd, out=half)  # (an even start: itself, any code will do)
        np.minimum(before, pairs.size - 1, out=before)
        step = _gather(t.code_lengths, _gather(pairs, before))
        starts += np.multiply(step, odd, out=odd)
        return [data], starts
    data, ends = _take(t.singles, seg)
    starts = empty(at.size, np.int64)
    starts[:] = _gather(ends, at)
    return [data], starts


def descends(offsets: np.ndarray) -> bool:
    """Whether some offset is below the one before it (compared in blocks: no temporary the
    size of the offsets)."""
    step, last = 1 << 16, offsets.size - 1
    return any(
        bool(np.any(offsets[lo + 1 : min(lo + step, last) + 1] < offsets[lo : min(lo + step, last)]))
        for lo in range(0, last, step)
    )


def _gather(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[index]`` (in-range indices) as one Arrow take."""
    got = pc.take(pa.array(values), pa.array(index))
    return np.frombuffer(got.buffers()[1], values.dtype, len(got), got.offset)


def _take(table: pa.Array, index: np.ndarray) -> tuple[memoryview, np.ndarray]:
    """The bytes of ``table[index]`` concatenated, and where each entry starts (plus the end)."""
    got = pc.take(table, pa.array(index))
    offsets_buf, data_buf = got.buffers()[1:3]
    ends = np.frombuffer(offsets_buf, np.int32, len(got) + 1, got.offset * 4)
    lo = int(ends[0])
    data = memoryview(data_buf)[lo : int(ends[-1])] if data_buf is not None else memoryview(b"")
    return data, (ends - lo if lo else ends)


@functools.lru_cache(maxsize=32)
def _tables(symbol_table: bytes) -> _Tables | None:
    """The decoding tables of a symbol table (None when the data is stored raw)."""
    table, lengths, nsym = _parse_table(symbol_table)
    if table is None:
        return None
    keep = np.arange(8)[None, :] < lengths[:, None]
    offsets = np.zeros(_ROWS + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    singles = pa.Array.from_buffers(
        pa.binary(), _ROWS, [None, pa.py_buffer(offsets), pa.py_buffer(table[keep].tobytes())]
    )
    index = np.arange(1 << 16)
    both = np.empty(2 << 16, np.int32)
    both[0::2] = index & 0xFF
    both[1::2] = index >> 8
    data, ends = _take(singles, both)
    pairs = pa.Array.from_buffers(
        pa.binary(), 1 << 16, [None, pa.py_buffer(np.ascontiguousarray(ends[0::2])), pa.py_buffer(data)]
    )
    code_lengths = lengths[:_LITERAL_ROW].astype(np.uint8)
    ascii = int(table[:nsym][keep[:nsym]].max(initial=0)) < 0x80
    return _Tables(lengths, code_lengths, nsym, singles, pairs, ascii)


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
    lengths[ESCAPE] = 0  # never a row of a stream: empty, it pads odd streams to whole pairs
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
