"""FSST decompression (Fast Static Symbol Table string compression) on numpy and pyarrow.

A symbol table maps one-byte codes to symbols of 1 to 8 bytes. In the compressed stream, code 255 is
an escape: the byte after it is copied literally. Lance stores the table as a u64 header
(``"FSST"`` magic in the high 32 bits, then the "switch" bit, suffix limit, terminator and symbol
count), the symbols as u64 words and then one length byte per symbol. Each string is compressed on
its own, so parsing (which matters only for escapes) restarts at every string start.

How :func:`decode` works, with no loop over values or symbol lengths:

1. Escape markers are found (runs of 0xFF bytes alternate marker, literal) and checked: every
   marker is followed by its literal in the same string, every other code is a symbol.
2. A table of rows is a pyarrow binary array, so a ``take`` of the rows writes the decompressed
   bytes, and its offsets are where every row's output starts: one pass in C++ that releases
   the GIL. Arrow's binary take costs some 8-10 ns per row taken whatever its length, so the
   fewer rows the better.
3. Two neighbouring codes are read as one 16-bit index into a table of all 65536 symbol pairs
   (:func:`pair_table`): half as many rows to take as codes. An odd last code is paired with the
   escape code, whose symbol is empty. Where each string starts in the output is the start of
   its pair, plus the length of the pair's first code when the string starts at the second.
   With escapes, an escape code that stands for nothing (a filler, second in its pair) is put
   before every marker that would be second in its pair (:func:`fsst_pairs.aligned`), so that
   each marker and its literal make one pair, which reads from the 256 rows of single bytes
   after the pairs (:func:`fsst_pairs.pair_index`): strings with escapes decode as fast as
   those without (a page of 237,000 codes of pylance's URLs with 133 escapes: 3.7 instead of
   4.5 ms). The pair table is built in numpy from the runs of codes of one symbol length that
   writers make (about 0.3 ms for a table in 3 runs, 1 ms in 8) and only for streams of at
   least ``PAIRS_MIN`` codes; shorter ones, and tables in many runs, take single codes (rows
   0-255 the symbols, 256-511 the literals, the markers dropped). Every file of a dataset has
   its own tables, so a scan of many small files builds one per file; they are kept, bounded
   in bytes, for the next scan.
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

Measured again on pylance's 20k-row pages (300,000 codes of 1-2 bytes, 400 KB out; pair take
1.6-1.8 ms, loaded machine), all slower: each code's symbol taken as fixed-size binary (0.2 ms,
Arrow's fixed-width take is cheap) then compacted by ``np.compress`` (1.1 ms for 2-byte slots,
3.4 for 8), ``np.repeat`` of 0/1 counts (3-8 ms), a boolean index (3.8 ms), Arrow's filter
(2.5 ms), ``bytes.translate`` (1.8-3 ms), ``replace_substring`` of the padding per string (7
ms), ``ascii_rtrim`` / ``utf8_rtrim`` per code (5-6 ms), ``pa.array`` of a fixed-width ``S``
array, which drops trailing zeros (6 ms); a take from a large_binary table (2.1 ms) or as a
dictionary decode (2.2 ms). Arrow's binary take costs the same per row for rows of 1 or 8
bytes and tables of 256 or 65536 rows: fewer rows is the only lever, and a table of three codes
would have 16M rows.

Measured once more on those pages (pair take 1.8-2.0 ms, load 11-13), all slower: int32 or int64
indices (2.2 ms; Arrow's bounds check, 5%, is skipped: every index is below the table's rows);
each code's symbol in a 2-byte slot (the table's longest) gathered by Arrow's fixed-size take
(0.23 ms; ``np.take`` 0.47, a numpy index by the uint8 codes 2.0) then compacted by
``np.compress`` (2.4 ms), a boolean index (4.0) or Arrow's filter (2.6), the string offsets then
a ``reduceat`` of the mask (0.8 ms) or a cumulative sum of code lengths (1.2); pair slots of
8 bytes written by overlapping u64 writes (6 ms). Pages of several files in one take would need
their pair tables joined (0.5-0.8 MB each, more than the output joined afterwards): a batch of
files is decoded file by file, straight out of the joined codes (:mod:`fsst_files`).

The output needs no UTF-8 check when the table's symbols and the escaped literals are all ASCII
(:func:`decode_text` says so, from the largest code it reads anyway and the literals it finds).
"""

from __future__ import annotations

import functools
import itertools
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._buffers import empty
from lance_table._lru import LRU
from lance_table._parallel import map_parts, parts_inline, workers
from lance_table.file.compression.fsst_pairs import (
    ESCAPE,
    LITERAL_ROW,
    PAIR_ROWS,
    PairIndex,
    aligned,
    pair_index,
    product,
)

FSST_MAGIC = 0x46535354
_LITERAL_ROW = LITERAL_ROW  # (rows of single codes: at and above the symbol count never produced)
_ROWS = 512
_PAIR_ROWS = PAIR_ROWS
# Symbol tables in more runs of one length than this get no pair table (see _runs).
_MAX_RUNS = 16
# Streams of fewer codes than this are decoded code by code when their pair table is not built:
# building it costs about as much as taking that many codes one at a time instead of in pairs.
PAIRS_MIN = 1 << 16
# Codes per part decoded on one thread: at least the first, at most the second (the output of a
# part, at most 8 bytes a code, must fit the 32-bit offsets of a binary array), and about
# ``_PARTS`` parts for a long stream.
MIN_PART = 1 << 18
_MAX_PART = 1 << 26
_PARTS = 4


class FsstError(ValueError):
    """The symbol table or the compressed bytes are malformed."""


@dataclass(frozen=True)
class _Tables:
    """A symbol table ready for decoding."""

    code_lengths: np.ndarray  # uint8 output bytes of each code (0 for the escape and unused codes)
    nsym: int
    singles: pa.Array  # binary: the bytes of each of the 512 rows
    table: np.ndarray  # the 512 x 8 bytes of the rows
    runs: tuple[tuple[int, int, int], ...] | None  # see _runs
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
    key = bytes(symbol_table)
    tables = decoding_tables(key)
    if tables is None:  # the encoder switched itself off: bytes are stored raw
        return Decoded(bytes(data), offsets, False)
    codes = np.frombuffer(data, np.uint8)
    n = codes.size
    if offsets.size and (offsets[0] < 0 or offsets[-1] > n or descends(offsets)):
        raise FsstError(f"string offsets do not lie in order within the {n} compressed bytes")
    escapes = _escapes(codes, offsets, tables.nsym)
    ascii = tables.ascii and (escapes is None or int(codes[escapes + 1].max()) < 0x80)
    pairs: PairIndex | None = None
    if n >= PAIRS_MIN and (table := pair_table(key)) is not None:
        rows, code_index = codes, offsets
        if escapes is not None:
            rows, code_index, escapes = aligned(codes, offsets, escapes)
        pairs = PairIndex(table, pair_index(rows, escapes), rows, tables.code_lengths)
    else:
        rows, code_index = _rows(codes, offsets, escapes)
    with _IN_FLIGHT:
        bounds = _bounds(rows.size)
        if len(bounds) == 2:  # one part: decoded here, nothing to join
            pieces, starts = _decode_part(rows, 0, rows.size, code_index, tables, pairs)
            return Decoded((pieces[0] if pieces else memoryview(b"")), starts, ascii)
        parts = map_parts(
            lambda b: _decode_part(rows, b[0], b[1], code_index, tables, pairs),
            list(itertools.pairwise(bounds)),
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
    return Decoded((pieces[0] if len(pieces) == 1 else joined(pieces, done)), new_offsets, ascii)


def joined(pieces: Sequence[bytes | memoryview], size: int) -> memoryview:
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


def _escapes(codes: np.ndarray, offsets: np.ndarray, nsym: int) -> np.ndarray | None:
    """The positions of the escape markers of a code stream (None when it has none), after
    checking that every other code is a symbol."""
    n = codes.size
    if not n or int(codes.max()) < nsym:
        return None  # every code is a symbol: no escapes (one pass over the codes)
    ff = np.flatnonzero(codes == ESCAPE)
    markers = _escape_markers(ff, offsets, n) if ff.size else ff
    bad = codes >= nsym  # codes that are neither symbols nor escapes
    bad[markers] = False
    bad[markers + 1] = False
    if bad.any():
        raise FsstError(f"code {int(codes[bad][0])} is not in a symbol table of {nsym} symbols")
    return markers


def _rows(
    codes: np.ndarray, offsets: np.ndarray, markers: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The table rows of a code stream for a take of single codes (the codes themselves without
    escapes, else int16 with the markers dropped and literal rows after them), and the index
    among them of each string offset."""
    if markers is None:
        return codes, offsets
    rows = codes.astype(np.int16)
    rows[markers + 1] += _LITERAL_ROW
    keep = np.ones(codes.size, bool)
    keep[markers] = False
    # index of each offset among the codes that are left: minus the markers before it
    return rows[keep], offsets - np.searchsorted(markers, offsets)


def _bounds(n: int) -> list[int]:
    """Where to cut ``n`` codes into parts (of even sizes, so that pairs stay within a part).

    Parts run on the threads that the streams being decoded at the moment leave free (a scan
    decoding a page per worker cuts none; ten pages on 16 workers are cut in two), each of at
    least ``MIN_PART`` codes: every cut costs a copy when the parts are joined, and parts that
    would run one after the other on this thread (inside a map that keeps every worker busy)
    gain nothing for it."""
    if n < 2 * MIN_PART:
        return [0, n]  # one part whatever the threads (asked before them: 0.05 ms a page)
    free = 1 if parts_inline() else -(-workers() // max(_IN_FLIGHT.count, 1))  # (no core left idle)
    count = min(_PARTS, free, max(1, n // MIN_PART))
    size = min(-(-n // count), _MAX_PART)
    size += size % 2
    return [*range(0, n, size), n]


def _decode_part(
    rows: np.ndarray, lo: int, hi: int, code_index: np.ndarray, t: _Tables, pairs: PairIndex | None
) -> tuple[list[memoryview], np.ndarray]:
    """Decode codes ``[lo, hi)``: the output pieces, and the output position (from the part's
    start) of every string start among those codes. Codes are taken two at a time from the pair
    table of ``pairs`` when there is one (``rows`` are then the codes), else one at a time."""
    first = int(np.searchsorted(code_index, lo, "left"))
    last = int(np.searchsorted(code_index, hi, "left" if hi < rows.size else "right"))
    at = code_index[first:last]  # string starts, as code positions in the part
    if lo:
        at = np.subtract(at, lo, out=empty(at.size, at.dtype))
    if pairs is None:
        data, ends = take_rows(t.singles, rows[lo:hi])
        starts = empty(at.size, np.int64)
        starts[:] = np.take(ends, at)
        return [data], starts
    if hi == lo:
        return [], np.zeros(at.size, np.int64)
    data, ends = take_rows(pairs.table, pairs.rows[lo >> 1 : (hi + 1) >> 1])
    # a string starting at an odd code starts after the first code of its pair (the code
    # before it): add that code's length (no masks: the parity multiplies it). Gathered by
    # np.take with 64-bit indices, which it uses as they are ("clip" for a start at the end).
    half = np.right_shift(at, 1)
    starts = empty(at.size, np.int64)
    starts[:] = np.take(ends, half)
    odd = np.bitwise_and(at, 1)
    before = np.subtract(at, odd, out=half)  # (an even start: its own code, any will do)
    if lo:
        before += lo
    step = np.take(pairs.code_lengths, np.take(pairs.codes, before, mode="clip"))
    step *= odd.astype(np.uint8)
    starts += step
    return [data], starts


def descends(offsets: np.ndarray) -> bool:
    """Whether some offset is below the one before it (compared in blocks: no temporary the
    size of the offsets)."""
    step, last = 1 << 16, offsets.size - 1
    return any(
        bool(np.any(offsets[lo + 1 : min(lo + step, last) + 1] < offsets[lo : min(lo + step, last)]))
        for lo in range(0, last, step)
    )


def take_rows(table: pa.Array, index: np.ndarray) -> tuple[memoryview, np.ndarray]:
    """The bytes of ``table[index]`` concatenated, and where each entry starts (plus the end)."""
    got = pc.take(table, pa.array(index), boundscheck=False)  # (every row index is below the rows)
    offsets_buf, data_buf = got.buffers()[1:3]
    ends = np.frombuffer(offsets_buf, np.int32, len(got) + 1, got.offset * 4)
    lo = int(ends[0])
    data = memoryview(data_buf)[lo : int(ends[-1])] if data_buf is not None else memoryview(b"")
    return data, (ends - lo if lo else ends)


@functools.lru_cache(maxsize=64)
def decoding_tables(symbol_table: bytes) -> _Tables | None:
    """The decoding tables of a symbol table (None when the data is stored raw): a few KiB, cheap
    to build (the pair table, 65,792 rows, is :func:`pair_table`)."""
    table, lengths, nsym = _parse_table(symbol_table)
    if table is None:
        return None
    keep = np.arange(8)[None, :] < lengths[:, None]
    offsets = np.zeros(_ROWS + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    singles = pa.Array.from_buffers(
        pa.binary(), _ROWS, [None, pa.py_buffer(offsets), pa.py_buffer(table[keep].tobytes())]
    )
    code_lengths = lengths[:_LITERAL_ROW].astype(np.uint8)
    ascii = int(table[:nsym][keep[:nsym]].max(initial=0)) < 0x80
    return _Tables(code_lengths, nsym, singles, table, _runs(code_lengths), ascii)


def _runs(code_lengths: np.ndarray) -> tuple[tuple[int, int, int], ...] | None:
    """The runs of codes of one symbol length, as ``(first, end, length)``; None when there are
    more than ``_MAX_RUNS`` (writers order their symbols by length: 2 bytes, 3 to 8, then 1, and
    the unused codes and the escape have none, so their tables have at most 9 runs)."""
    cuts = np.flatnonzero(code_lengths[1:] != code_lengths[:-1]) + 1
    if cuts.size >= _MAX_RUNS:
        return None
    bounds = [0, *cuts.tolist(), _LITERAL_ROW]
    return tuple((lo, hi, int(code_lengths[lo])) for lo, hi in itertools.pairwise(bounds))


#: pair tables by symbol table (some 0.4-1.3 MiB each: 65,792 int32 offsets and 512 x the symbols'
#: bytes), bounded in bytes: a dataset of many small files, each with its own table, is scanned
#: again without building them again while they fit (1M rows in 50 files: 50 tables of 25-40
#: MiB, by their symbols' lengths; with a bound below that, an LRU kept none of them for the next
#: scan, which then built all 50 again: 265 against 200 ms for 1M short strings of digits and words)
_PAIR_TABLES: LRU[bytes, tuple[pa.Array | None]] = LRU(1024, max_bytes=64 << 20)


def pair_table(symbol_table: bytes) -> pa.Array | None:
    """:func:`_build_pairs`, kept in ``_PAIR_TABLES``."""
    found = _PAIR_TABLES.get(symbol_table)
    if found is not None:
        return found[0]
    table = _build_pairs(symbol_table)
    _PAIR_TABLES.put(symbol_table, (table,), 0 if table is None else table.nbytes + len(symbol_table))
    return table


def _build_pairs(symbol_table: bytes) -> pa.Array | None:
    """The bytes of every two codes: row ``a | b << 8`` holds symbol ``a`` then symbol ``b``
    (the escape code's symbol is empty), then 256 rows of one byte each, the escaped literals
    (a binary array of 65,792 rows: ``512 x`` the symbols' total length in bytes plus 256 KiB
    of offsets); None when the symbols are not in a few runs of one length (see
    :func:`fsst_pairs.product`)."""
    t = decoding_tables(symbol_table)
    if t is None or t.runs is None:
        return None
    offsets, data = product(t.table, t.code_lengths, t.runs, t.table, t.code_lengths, t.runs, _LITERAL_ROW)
    size = data.size - _LITERAL_ROW
    offsets[_PAIR_ROWS:] = np.arange(size, size + _LITERAL_ROW + 1, dtype=np.int32)
    data[size:] = np.arange(_LITERAL_ROW, dtype=np.uint8)
    rows = _PAIR_ROWS + _LITERAL_ROW
    return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


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
    # codes past the symbols are never rows of a stream (checked), and the escape code's row is
    # empty: it pads odd streams to whole pairs
    lengths[nsym:_LITERAL_ROW] = 0
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
