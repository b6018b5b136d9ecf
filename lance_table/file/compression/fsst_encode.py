"""FSST compression (the encoder side of :mod:`fsst`): train a symbol table on a sample of the
strings, then compress every string to one-byte codes, all in numpy.

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

**Training** follows FSST's (Boncz, Neumann, Leis, VLDB 2020) as pylance implements it: a sample of
about 16 KiB is parsed with the current table, the symbols used and the concatenations of
neighbouring symbols are counted (``bincount`` over code pairs), every candidate's gain is its
count times its length (single bytes boosted 8x), the best 255 become the next table; after six
rounds the table that saved the most bytes on the sample wins. The training is not byte-identical
to pylance's (which samples at random), but compresses in the same league.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_table._parallel import map_parts
from lance_table.file.compression.fsst import ESCAPE, FSST_MAGIC

TABLE_SIZE = 8 + 256 * 8 + 256  # header, 256 symbol words, 256 lengths: pylance's fixed size
MAX_SYMBOLS = 255
MAX_LEN = 8
# pylance stores its input raw (switch off) below 32 KiB; it also skips FSST for values of at most
# 5 bytes, a choice left to the writer.
MIN_INPUT = 32 * 1024
SAMPLE_TARGET = 1 << 14
SEGMENT = 511  # the parse restarts every this many bytes of a string
# pylance's rounds ("sample fractions"): a candidate needs a count of 5 * frac / 128; the table
# made in the last round counts no pairs, and comes from the best table's counts.
_ROUNDS = (8, 38, 68, 98, 108, 128)
# input bytes compressed at a time (on threads), which also bounds the memory of the position arrays
_PART = 1 << 20
_LONG = 1 << 16  # flag in a 2-byte lookup entry: some symbol of 3+ bytes starts with them
_SLOT_SHIFT = 17  # where such an entry keeps the slot of its 2 bytes among those prefixes
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], np.uint64)


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
            symbols & _MASKS[np.minimum(lengths, MAX_LEN)],
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
class _Matcher:
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


def _matcher(symbols: np.ndarray, lengths: np.ndarray) -> _Matcher:
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
    return _Matcher(
        short,
        byte,
        long_index,
        symbols[chosen],
        lengths[chosen],
        codes[chosen] | lengths[chosen] << 8,
    )


def _match(m: _Matcher, words: np.ndarray, cur: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``code | bytes covered << 8`` of the longest symbol (or escape, code 255) at each position
    ``cur`` of a segment ending at ``end``, given the next 8 bytes there (little-endian)."""
    low3 = words.view(np.int64) & 0xFFFFFF
    entry = m.short[low3 & 0xFFFF]
    cand = np.flatnonzero(entry >= _LONG)  # a symbol of 3+ bytes starts with these 2 bytes
    if cand.size:
        k = m.long_index[(entry[cand] >> _SLOT_SHIFT) * 256 + (low3[cand] >> 16)]
        found = k >= 0
        cand, k = cand[found], k[found]
        n = m.long_len[k]
        hit = (n <= end[cand] - cur[cand]) & ((words[cand] & _MASKS[n]) == m.long_val[k])
        entry[cand[hit]] = m.long_entry[k[hit]]
    entry &= _LONG - 1
    # a 2-byte symbol at the last byte of a segment: take the byte's own code instead
    over = np.flatnonzero(cur + (entry >> 8) > end)
    if over.size:
        entry[over] = m.byte[low3[over] & 0xFF]
    return entry


def _segments(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every segment of at most SEGMENT bytes of the non-empty strings."""
    lengths = np.diff(offsets)
    counts = -(-lengths // SEGMENT)
    starts = np.repeat(offsets[:-1], counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    starts = starts + (np.arange(starts.size) - first) * SEGMENT
    ends = np.minimum(starts + SEGMENT, np.repeat(offsets[1:], counts))
    return starts, ends


def _words(data: np.ndarray) -> np.ndarray:
    """The 8 bytes starting at every position of ``data`` as a little-endian u64 (a strided view
    of a copy padded with 8 zero bytes)."""
    padded = np.zeros(data.size + 8, np.uint8)
    padded[: data.size] = data
    return np.ndarray((data.size,), "<u8", padded, 0, (1,))


def _parse(m: _Matcher, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy parse of all strings: the position of every code (sorted) and its code (255 for an
    escape of the byte at that position)."""
    words = _words(data)
    cur, end = _segments(offsets)
    code_at = np.empty(data.size, np.uint8)
    visited = np.zeros(data.size, bool)
    while cur.size:
        entry = _match(m, words[cur], cur, end)
        visited[cur] = True
        code_at[cur] = entry  # the low byte
        cur = cur + (entry >> 8)
        open_ = cur < end
        if not open_.all():
            cur, end = cur[open_], end[open_]
    positions = np.flatnonzero(visited)
    return positions, code_at[positions]


# --- compression -----------------------------------------------------------------------------------


def _as_bytes(data: bytes | memoryview | np.ndarray) -> np.ndarray:
    if isinstance(data, np.ndarray):
        return data.view(np.uint8).reshape(-1)
    return np.frombuffer(data, np.uint8)


def arrow_buffers(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The bytes and ``int64`` offsets of a binary or string array (large or not, sliced or not),
    ready for :func:`train` and :func:`compress`. Null values are empty strings.

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


def _compress_part(m: _Matcher, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compress strings ``data[offsets[i]:offsets[i+1]]`` (offsets from 0); the codes and the
    output offsets."""
    positions, codes = _parse(m, data, offsets)
    firsts = np.searchsorted(positions, offsets)  # codes before each string
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
    raw = _as_bytes(data)
    offsets = np.asarray(offsets, np.int64)
    if offsets.size == 0:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64)
    if offsets[0] < 0 or offsets[-1] > raw.size or np.any(np.diff(offsets) < 0):
        raise ValueError("string offsets are not in order within the data")
    raw = raw[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    if not table.switch:
        return raw.copy(), offsets
    m = _matcher(table.symbols, table.lengths)
    # cut at string starts into parts of about _PART bytes (a longer string is a part of its own),
    # compressed on threads
    n = offsets.size - 1
    inner = np.searchsorted(offsets, np.arange(_PART, int(offsets[-1]), _PART), "right") - 1
    bounds = np.unique(np.concatenate([[0], inner, [n]])).tolist()
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
    raw = _as_bytes(data)
    offsets = np.asarray(offsets, np.int64)
    total = int(offsets[-1] - offsets[0]) if offsets.size > 1 else 0
    if total <= sample_bytes or not table.switch:
        return int(compress(table, raw, offsets)[0].size) if table.switch else total
    counts = -(-np.diff(offsets) // SEGMENT)  # segments of each string
    ends_at = np.cumsum(counts)
    segments = int(ends_at[-1])
    take = max(1, min(segments, int(segments * sample_bytes / total)))
    chosen = np.unique(np.linspace(0, segments - 1, take).astype(np.int64))
    rows = np.searchsorted(ends_at, chosen, "right")
    starts = offsets[rows] + (chosen - (ends_at[rows] - counts[rows])) * SEGMENT
    lengths = np.minimum(starts + SEGMENT, offsets[rows + 1]) - starts
    sample_offsets = np.concatenate([[0], np.cumsum(lengths)])
    index = np.repeat(starts - sample_offsets[:-1], lengths) + np.arange(int(sample_offsets[-1]))
    sample = raw[index]
    m = _matcher(table.symbols, table.lengths)
    codes, _ = _compress_part(m, sample, sample_offsets)
    return int(codes.size * total / sample.size)


def encode(
    data: bytes | memoryview | np.ndarray, offsets: np.ndarray, *, min_input: int = MIN_INPUT, seed: int = 0
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Train a table on the strings and compress them: ``(table bytes, compressed, offsets)``.

    Below ``min_input`` bytes (pylance's 32 KiB) the table has its switch off and the strings are
    stored as they are, as pylance does.
    """
    offsets = np.asarray(offsets, np.int64)
    size = int(offsets[-1] - offsets[0]) if offsets.size else 0
    table = train(data, offsets, seed=seed) if size >= min_input else SymbolTable.raw()
    out, out_offsets = compress(table, data, offsets)
    return table.to_bytes(), out, out_offsets


# --- training --------------------------------------------------------------------------------------


def _sample(
    raw: np.ndarray, offsets: np.ndarray, target: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """About ``target`` bytes of randomly chosen strings (at most one segment of each), as bytes
    and offsets from 0."""
    starts, ends = offsets[:-1], offsets[1:]
    total = int(offsets[-1] - offsets[0])
    if total > target:
        n = starts.size
        # random rows (a few more than the average length says are needed), in random order
        draw = min(n, int(target * n / max(total, 1) * 2) + 64)
        order = rng.permutation(n) if draw >= n // 4 else _distinct(rng.integers(0, n, draw), rng)
        lengths = np.minimum(ends - starts, SEGMENT)[order]
        take = int(np.searchsorted(np.cumsum(lengths), target)) + 1
        chosen = np.sort(order[:take])
        starts, ends = starts[chosen], ends[chosen]
        long = ends - starts > SEGMENT
        # a random window of a long string
        shift = (rng.random(int(long.sum())) * (ends - starts - SEGMENT + 1)[long]).astype(np.int64)
        starts = starts.copy()
        starts[long] += shift
        ends = np.minimum(ends, starts + SEGMENT)
    lengths = ends - starts
    new_offsets = np.concatenate([[0], np.cumsum(lengths)])
    index = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(int(new_offsets[-1]))
    return raw[index], new_offsets


def _distinct(draws: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The distinct values of ``draws`` in a random order."""
    unique = np.unique(draws)
    return unique[rng.permutation(unique.size)]


def _candidates(
    tok_val: np.ndarray, tok_len: np.ndarray, ids: np.ndarray, firsts: np.ndarray, new: np.ndarray, frac: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate symbols (values, lengths, gains) from one parse of the sample.

    ``ids`` are the tokens of the parse (symbol codes, or 256 + byte for an escape), ``firsts``
    the token of each one's first byte alone, ``new`` whether a token starts a segment. A token
    counts as itself and, when longer than a byte, as its first byte; neighbours count as their
    concatenation and (when the second is longer than a byte) as the first one extended by one
    byte. A count's gain is count times length, single bytes 8 times that; counts below
    ``5 * frac / 128`` are dropped, and the last round (``frac`` 128) counts no neighbours.
    """
    tokens = tok_len.size
    multi = tok_len[ids] > 1
    singles = np.bincount(ids, minlength=tokens) + np.bincount(firsts[multi], minlength=tokens)
    used = np.flatnonzero(singles)
    vals = [tok_val[used]]
    lens = [tok_len[used]]
    counts = [singles[used]]
    boost = [np.where(tok_len[used] == 1, 8, 1)]
    if frac < 128:
        pair = ~new[1:] & (tok_len[ids[:-1]] < MAX_LEN)
        left = ids[:-1][pair]
        for right, ok in ((ids[1:][pair], None), (firsts[1:][pair], multi[1:][pair])):
            key = left * tokens + right if ok is None else left[ok] * tokens + right[ok]
            seen, seen_counts = np.unique(key, return_counts=True)
            x, y = seen // tokens, seen % tokens
            length = np.minimum(tok_len[x] + tok_len[y], MAX_LEN)
            vals.append((tok_val[x] | (tok_val[y] << (tok_len[x] * 8).astype(np.uint64))) & _MASKS[length])
            lens.append(length)
            counts.append(seen_counts)
            boost.append(np.ones(seen.size, np.int64))
    val = np.concatenate(vals)
    length = np.concatenate(lens).astype(np.int64)
    count = np.concatenate(counts).astype(np.int64)
    keep = count >= max(1, (5 * frac) // 128)
    gain = count * length * np.concatenate(boost)
    val, length, gain = val[keep], length[keep], gain[keep]
    # the same symbol from several counts: add up its gains
    order = np.lexsort((length, val))
    val, length, gain = val[order], length[order], gain[order]
    first = np.ones(val.size, bool)
    first[1:] = (val[1:] != val[:-1]) | (length[1:] != length[:-1])
    at = np.flatnonzero(first)
    return val[at], length[at], np.add.reduceat(gain, at) if at.size else gain


def _select(
    val: np.ndarray, length: np.ndarray, gain: np.ndarray, terminator: int
) -> tuple[np.ndarray, np.ndarray]:
    """The best 255 candidates by gain, at most one of 3+ bytes per 3-byte prefix, and none of
    2+ bytes that contains the terminator byte (pylance's encoder marks string ends with it)."""
    byte_of = (val[:, None] >> (8 * np.arange(MAX_LEN, dtype=np.uint64))[None, :]) & np.uint64(0xFF)
    inside = np.arange(MAX_LEN)[None, :] < length[:, None]
    bad = (length > 1) & ((byte_of == terminator) & inside).any(axis=1)
    val, length, gain = val[~bad], length[~bad], gain[~bad]
    order = np.lexsort((val, length, -gain))
    val, length = val[order], length[order]
    others = np.arange(val.size, dtype=np.uint64) + np.uint64(1 << 24)  # all distinct
    prefix = np.where(length >= 3, val & np.uint64(0xFFFFFF), others)
    _, first = np.unique(prefix, return_index=True)
    keep = np.sort(first)[:MAX_SYMBOLS]
    return val[keep], length[keep]


def _finalize(symbols: np.ndarray, lengths: np.ndarray, terminator: int) -> SymbolTable:
    """Order the symbols as pylance's encoder does: 2-byte symbols that begin a longer symbol
    (there are ``suffix_lim`` of them), the other 2-byte symbols, then by length 3 to 8, and the
    single bytes last. Decoders do not care; it keeps the tables alike."""
    lengths = lengths.astype(np.int64)
    two = np.flatnonzero(lengths == 2)
    long_prefixes = symbols[lengths > 2] & np.uint64(0xFFFF)
    has_suffix = np.isin(symbols[two], long_prefixes)
    order = np.concatenate(
        [
            two[has_suffix],
            two[~has_suffix][::-1],
            *(np.flatnonzero(lengths == n) for n in range(3, MAX_LEN + 1)),
            np.flatnonzero(lengths == 1),
        ]
    )
    return SymbolTable(
        symbols[order].astype(np.uint64),
        lengths[order].astype(np.uint8),
        terminator=terminator,
        suffix_lim=int(has_suffix.sum()),
    )


def _tokens(symbols: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Value and length of every token: the symbols at their codes, byte b at 256 + b."""
    tok_val = np.zeros(512, np.uint64)
    tok_len = np.zeros(512, np.int64)
    tok_val[: symbols.size] = symbols
    tok_len[: lengths.size] = lengths
    tok_val[256:] = np.arange(256, dtype=np.uint64)
    tok_len[256:] = 1
    return tok_val, tok_len


def train(
    data: bytes | memoryview | np.ndarray,
    offsets: np.ndarray,
    *,
    sample_bytes: int = SAMPLE_TARGET,
    seed: int = 0,
) -> SymbolTable:
    """A symbol table for strings ``data[offsets[i]:offsets[i+1]]``, trained on a random sample
    of about ``sample_bytes`` of them (seeded: the same input gives the same table)."""
    raw = _as_bytes(data)
    offsets = np.asarray(offsets, np.int64)
    if offsets.size < 2:
        return _finalize(np.zeros(0, np.uint64), np.zeros(0, np.uint8), 0)
    sample, sample_offsets = _sample(raw, offsets, sample_bytes, np.random.default_rng(seed))
    terminator = int(np.argmin(np.bincount(sample, minlength=256)))
    symbols, lengths = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    best_gain = -(1 << 62)
    best: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    seg_starts, _ = _segments(sample_offsets)
    for frac in _ROUNDS:
        tok_val, tok_len = _tokens(symbols, lengths)
        positions, codes = _parse(_matcher(symbols, lengths), sample, sample_offsets)
        escaped = codes == ESCAPE
        ids = np.where(escaped, 256 + sample[positions].astype(np.int64), codes.astype(np.int64))
        gain = int(tok_len[ids].sum()) - ids.size - int(escaped.sum())
        new = np.isin(positions, seg_starts)
        firsts = 256 + sample[positions].astype(np.int64)
        if gain >= best_gain:
            best_gain, best = gain, (tok_val, tok_len, ids, firsts, new)
        if frac == _ROUNDS[-1]:
            break
        symbols, lengths = _select(*_candidates(tok_val, tok_len, ids, firsts, new, frac), terminator)
    # as FSST does: a last table from the best one's counts of single symbols only
    assert best is not None
    symbols, lengths = _select(*_candidates(*best, 128), terminator)
    return _finalize(symbols, lengths, terminator)
