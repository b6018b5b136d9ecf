"""FSST compression (the encoder side of :mod:`fsst`): compress every string to one-byte codes
with a symbol table (trained by :mod:`fsst_train`), all in numpy.

**Table.** At most 255 symbols of 1 to 8 bytes; code 255 escapes a literal byte. As in pylance's
encoder, at most one symbol of 3 or more bytes starts with any given 3 bytes, so that the longest
match at a position is found by two table lookups and one search (no trie).

**Matching.** At each position the code is the symbol of 3+ bytes for the next 3 bytes if the
whole symbol matches, else the 2-byte symbol, else the 1-byte symbol, else an escape; the parse is
greedy, and restarts every 511 bytes of a string (as pylance's encoder does).

**Vectorization.** All strings are parsed in lockstep: one step matches the next symbol of every
string segment still open, with numpy over all of them, so the Python loop runs once per code of
the longest segment (at most 511 steps), never per string or per byte. The codes land at their
input positions, and a pass over the visited positions writes the output and string offsets.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_table._numpy import sorted_unique
from lance_table._parallel import map_parts
from lance_table.file.compression.fsst import ESCAPE, FSST_MAGIC

TABLE_SIZE = 8 + 256 * 8 + 256  # header, 256 symbol words, 256 lengths: pylance's fixed size
MAX_SYMBOLS = 255
MAX_LEN = 8
# pylance stores its input raw (switch off) below 32 KiB; it also skips FSST for values of at most
# 5 bytes, a choice left to the writer.
MIN_INPUT = 32 * 1024
SEGMENT = 511  # the parse restarts every this many bytes of a string
# input bytes compressed at a time (on threads), which also bounds the memory of the position arrays
_PART = 1 << 20
_LONG = 1 << 16  # flag in a 2-byte lookup entry: some symbol of 3+ bytes starts with them
_SLOT_SHIFT = 17  # where such an entry keeps the slot of its 2 bytes among those prefixes
MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], np.uint64)


@dataclass(frozen=True)
class SymbolTable:
    """An FSST symbol table: each symbol's bytes as a little-endian u64 (zero above its length)
    and its length, in code order; the header fields pylance writes."""

    symbols: np.ndarray  # uint64
    lengths: np.ndarray  # uint8, 1..8
    terminator: int = 0
    suffix_lim: int = 0
    switch: bool = True

    def __post_init__(self) -> None:
        n = self.lengths.size
        if n > MAX_SYMBOLS or self.symbols.size != n:
            raise ValueError(f"a symbol table holds at most {MAX_SYMBOLS} symbols, with one length each")
        if n and (self.lengths.min() < 1 or self.lengths.max() > MAX_LEN):
            raise ValueError("symbol lengths must be between 1 and 8")

    @classmethod
    def raw(cls) -> SymbolTable:
        """The table of a page stored uncompressed (switch off, no symbols)."""
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.uint8), switch=False)

    def to_bytes(self) -> bytes:
        """The 2312-byte table Lance stores: ``u64 = "FSST" << 32 | switch << 24 | suffix_lim <<
        16 | terminator << 8 | n``, the n symbols as u64, their n lengths, zeros to the end."""
        n = self.lengths.size
        header = (
            FSST_MAGIC << 32
            | int(self.switch) << 24
            | (self.suffix_lim & 0xFF) << 16
            | (self.terminator & 0xFF) << 8
            | n
        )
        body = struct.pack("<Q", header) + self.symbols.astype("<u8").tobytes() + self.lengths.tobytes()
        return body.ljust(TABLE_SIZE, b"\0")

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> SymbolTable:
        """Parse a stored table.

        Raises:
            ValueError: not an FSST symbol table.
        """
        if len(data) < 8:
            raise ValueError("an FSST symbol table starts with an 8-byte header")
        (header,) = struct.unpack_from("<Q", data, 0)
        if header >> 32 != FSST_MAGIC:
            raise ValueError("the symbol table does not start with the FSST magic")
        n = header & 0xFF
        if len(data) < 8 + 9 * n:
            raise ValueError(f"{len(data)} bytes cannot hold {n} symbols")
        symbols = np.frombuffer(data, "<u8", n, 8).astype(np.uint64)
        lengths = np.frombuffer(data, np.uint8, n, 8 + 8 * n).copy()
        return cls(
            symbols & MASKS[np.minimum(lengths, MAX_LEN)],
            lengths,
            terminator=(header >> 8) & 0xFF,
            suffix_lim=(header >> 16) & 0xFF,
            switch=bool((header >> 24) & 1),
        )

    def symbol_bytes(self) -> list[bytes]:
        """The symbols as bytes (for display and tests)."""
        raw = self.symbols.astype("<u8").tobytes()
        return [raw[8 * i : 8 * i + int(n)] for i, n in enumerate(self.lengths)]


# --- matching --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Matcher:
    """Lookup tables of a symbol list, whose entries are ``code | bytes covered << 8``.

    ``short`` is indexed by the next 2 bytes: the 2-byte symbol, or else the first byte's
    symbol, or else the escape code; when symbols of 3+ bytes start with those 2 bytes, it also
    holds ``_LONG`` and, above it, the slot of those 2 bytes in ``long_index``. ``byte`` is
    indexed by one byte: its symbol or the escape. ``long_index[slot * 256 + third byte]`` is the
    symbol of 3+ bytes starting with those 3 bytes (at most one per prefix), or -1; the
    ``long_*`` arrays describe those symbols.
    """

    short: np.ndarray  # int64[65536]
    byte: np.ndarray  # int64[256]
    long_index: np.ndarray  # int64[slots * 256]
    long_val: np.ndarray  # uint64
    long_len: np.ndarray  # int64
    long_entry: np.ndarray  # int64


def matcher(symbols: np.ndarray, lengths: np.ndarray) -> Matcher:
    lengths = lengths.astype(np.int64)
    codes = np.arange(lengths.size, dtype=np.int64)
    byte = np.full(256, ESCAPE | 1 << 8, np.int64)
    one = lengths == 1
    byte[symbols[one].astype(np.int64)] = codes[one] | 1 << 8
    short = np.tile(byte, 256)
    two = lengths == 2
    short[symbols[two].astype(np.int64)] = codes[two] | 2 << 8
    long = np.flatnonzero(lengths >= 3)
    keys = (symbols[long] & np.uint64(0xFFFFFF)).astype(np.int64)
    # one symbol per 3-byte prefix: the longest (then the first) of those that share one
    order = np.lexsort((long, -lengths[long], keys))
    keep = np.ones(order.size, bool)
    keep[1:] = keys[order][1:] != keys[order][:-1]
    chosen = long[order[keep]]
    first_two, slot = np.unique(keys[order[keep]] & 0xFFFF, return_inverse=True)
    short[first_two] |= _LONG | np.arange(first_two.size, dtype=np.int64) << _SLOT_SHIFT
    long_index = np.full(first_two.size * 256, -1, np.int64)
    long_index[slot * 256 + (keys[order[keep]] >> 16)] = np.arange(chosen.size)
    return Matcher(
        short,
        byte,
        long_index,
        symbols[chosen],
        lengths[chosen],
        codes[chosen] | lengths[chosen] << 8,
    )


def _match(m: Matcher, words: np.ndarray, cur: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``code | bytes covered << 8`` of the longest symbol (or escape, code 255) at each position
    ``cur`` of a segment ending at ``end``, given the next 8 bytes there (little-endian).

    A 2-byte symbol matched at the last byte of a segment is left to the caller (see
    :func:`_overshot`): it is rare, and checking every position for it costs a third of a step."""
    low3 = words.view(np.int64) & 0xFFFFFF
    entry = m.short[low3 & 0xFFFF]
    cand = np.flatnonzero(entry >= _LONG)  # a symbol of 3+ bytes starts with these 2 bytes
    if cand.size:
        wc = words.take(cand)
        k = m.long_index[(entry.take(cand) >> _SLOT_SHIFT) * 256 + (low3.take(cand) >> 16)]
        # (positions selected by index: a take is several times faster than a boolean mask here)
        found = np.flatnonzero(k >= 0)
        cand, k, wc = cand.take(found), k.take(found), wc.take(found)
        n = m.long_len[k]
        hit = np.flatnonzero((n <= end.take(cand) - cur.take(cand)) & ((wc & MASKS[n]) == m.long_val[k]))
        entry[cand.take(hit)] = m.long_entry[k.take(hit)]
    entry &= _LONG - 1
    return entry


def _overshot(m: Matcher, words: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The entries at positions ``at`` (each the last byte of its segment, where a 2-byte symbol
    matched): the byte's own symbol, or an escape."""
    return m.byte[words[at].view(np.int64) & 0xFF]


def segments(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every segment of at most SEGMENT bytes of the non-empty strings."""
    lengths = np.diff(offsets)
    counts = -(-lengths // SEGMENT)
    starts = np.repeat(offsets[:-1], counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    starts = starts + (np.arange(starts.size) - first) * SEGMENT
    ends = np.minimum(starts + SEGMENT, np.repeat(offsets[1:], counts))
    return starts, ends


def next_words(data: np.ndarray) -> np.ndarray:
    """The 8 bytes starting at every position of ``data`` as a little-endian u64 (a strided view
    of a copy padded with 8 zero bytes)."""
    padded = np.zeros(data.size + 8, np.uint8)
    padded[: data.size] = data
    return np.ndarray((data.size,), "<u8", padded, 0, (1,))


def parse(m: Matcher, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy parse of all strings: the position of every code (sorted) and its code (255 for an
    escape of the byte at that position)."""
    visited, code_at, _ = _walk(m, data, offsets)
    positions = np.flatnonzero(visited)
    return positions, code_at[positions]


def _walk(m: Matcher, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The greedy parse of all strings: which positions start a code, the code at each of them
    (other positions hold garbage), and how many codes each segment (see :func:`segments`) has."""
    words = next_words(data)
    cur, end = segments(offsets)
    seg = np.arange(cur.size)
    counts = np.zeros(cur.size, np.int64)
    code_at = np.empty(data.size, np.uint8)
    visited = np.zeros(data.size, bool)
    steps = 0
    while cur.size:
        steps += 1
        entry = _match(m, words[cur], cur, end)
        visited[cur] = True
        code_at[cur] = entry  # the low byte
        step = entry >> 8
        cur = cur + step
        open_ = cur < end
        if not open_.all():
            closed = np.flatnonzero(~open_)
            counts[seg.take(closed)] = steps
            over = closed[cur.take(closed) > end.take(closed)]
            if over.size:  # a 2-byte symbol at a segment's last byte: that byte's own code
                at = cur.take(over) - step.take(over)
                code_at[at] = _overshot(m, words, at)
            keep = np.flatnonzero(open_)  # (a take is several times faster than a boolean mask)
            cur, end, seg = cur.take(keep), end.take(keep), seg.take(keep)
    return visited, code_at, counts


# --- compression -----------------------------------------------------------------------------------


def as_bytes(data: bytes | memoryview | np.ndarray) -> np.ndarray:
    if isinstance(data, np.ndarray):
        return data.view(np.uint8).reshape(-1)
    return np.frombuffer(data, np.uint8)


def arrow_buffers(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The bytes and ``int64`` offsets of a binary or string array (large or not, sliced or not),
    ready for :func:`fsst_train.train` and :func:`compress`. Null values are empty strings.

    Raises:
        ValueError: not a binary or string array.
    """
    t = values.type
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        width = 8
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        width = 4
    else:
        raise ValueError(f"FSST compresses binary or string values, not {t}")
    _, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, f"<i{width}", len(values) + 1, values.offset * width).astype(
        np.int64
    )
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    if values.null_count:  # a null's slot may still hold bytes: drop them
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        lengths = np.where(valid, np.diff(offsets), 0)
        keep = np.repeat(valid, np.diff(offsets))
        data = data[offsets[0] : offsets[-1]][keep]
        offsets = np.concatenate([[0], np.cumsum(lengths)])
    return data, offsets


def _compress_part(m: Matcher, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compress strings ``data[offsets[i]:offsets[i+1]]`` (offsets from 0); the codes and the
    output offsets."""
    visited, code_at, seg_counts = _walk(m, data, offsets)
    positions = np.flatnonzero(visited)
    codes = code_at.take(positions)
    # codes before each string: those of the segments before its first one
    seg_ends = np.zeros(seg_counts.size + 1, np.int64)
    np.cumsum(seg_counts, out=seg_ends[1:])
    first_seg = np.zeros(offsets.size, np.int64)
    np.cumsum(-(-np.diff(offsets) // SEGMENT), out=first_seg[1:])
    firsts = seg_ends[first_seg]
    escaped = np.flatnonzero(codes == ESCAPE)
    if not escaped.size:
        return codes, firsts
    # each escape is followed by its literal: shift everything after it by one more byte
    out = np.empty(codes.size + escaped.size, np.uint8)
    after = np.zeros(codes.size, np.intp)
    after[escaped[escaped + 1 < codes.size] + 1] = 1
    at = np.arange(codes.size) + np.cumsum(after)
    out[at] = codes
    out[at[escaped] + 1] = data[positions[escaped]]
    return out, firsts + np.searchsorted(escaped, firsts)


def compress(
    table: SymbolTable, data: bytes | memoryview | np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Compress strings ``data[offsets[i]:offsets[i+1]]`` with ``table``.

    Returns the compressed bytes (``uint8``) and their ``int64`` offsets (from 0, one more than
    the strings). A table with the switch off returns the bytes as they are.

    Raises:
        ValueError: the offsets are not in order within the data.
    """
    raw = as_bytes(data)
    offsets = np.asarray(offsets, np.int64)
    if offsets.size == 0:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64)
    if offsets[0] < 0 or offsets[-1] > raw.size or np.any(np.diff(offsets) < 0):
        raise ValueError("string offsets are not in order within the data")
    raw = raw[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    if not table.switch:
        return raw.copy(), offsets
    m = matcher(table.symbols, table.lengths)
    # cut at string starts into parts of about _PART bytes (a longer string is a part of its own),
    # compressed on threads
    n = offsets.size - 1
    inner = np.searchsorted(offsets, np.arange(_PART, int(offsets[-1]), _PART), "right") - 1
    bounds = sorted_unique(np.concatenate([[0], inner, [n]])).tolist()
    parts = map_parts(
        lambda b: _compress_part(
            m, raw[offsets[b[0]] : offsets[b[1]]], offsets[b[0] : b[1] + 1] - offsets[b[0]]
        ),
        list(itertools.pairwise(bounds)),
    )
    out_offsets = [np.zeros(1, np.int64)]
    done = 0
    for out, part_offsets in parts:
        out_offsets.append(part_offsets[1:] + done)
        done += out.size
    if len(parts) == 1:
        return parts[0][0], np.concatenate(out_offsets)
    return np.concatenate([np.zeros(0, np.uint8)] + [out for out, _ in parts]), np.concatenate(out_offsets)


def estimate(
    table: SymbolTable,
    data: bytes | memoryview | np.ndarray,
    offsets: np.ndarray,
    *,
    sample_bytes: int = 1 << 16,
) -> int:
    """About how many bytes :func:`compress` makes of the strings: a sample of about
    ``sample_bytes`` of them compressed, scaled to the whole.

    The sample is made of segments (the pieces of at most :data:`SEGMENT` bytes at which the
    parse restarts), evenly spread over all of them, so that it stays small however long the
    strings are; each segment compresses alone exactly as it does inside its string."""
    raw = as_bytes(data)
    offsets = np.asarray(offsets, np.int64)
    total = int(offsets[-1] - offsets[0]) if offsets.size > 1 else 0
    if total <= sample_bytes or not table.switch:
        return int(compress(table, raw, offsets)[0].size) if table.switch else total
    counts = -(-np.diff(offsets) // SEGMENT)  # segments of each string
    ends_at = np.cumsum(counts)
    segments = int(ends_at[-1])
    take = max(1, min(segments, int(segments * sample_bytes / total)))
    chosen = sorted_unique(np.linspace(0, segments - 1, take).astype(np.int64))
    rows = np.searchsorted(ends_at, chosen, "right")
    starts = offsets[rows] + (chosen - (ends_at[rows] - counts[rows])) * SEGMENT
    lengths = np.minimum(starts + SEGMENT, offsets[rows + 1]) - starts
    sample_offsets = np.concatenate([[0], np.cumsum(lengths)])
    index = np.repeat(starts - sample_offsets[:-1], lengths) + np.arange(int(sample_offsets[-1]))
    sample = raw[index]
    m = matcher(table.symbols, table.lengths)
    codes, _ = _compress_part(m, sample, sample_offsets)
    return int(codes.size * total / sample.size)
