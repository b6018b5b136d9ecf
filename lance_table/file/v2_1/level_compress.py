"""Compression of the repetition and definition levels of mini-block pages, as pylance 14 writes it.

One encoding is chosen for all the levels of one kind (rep or def) of a page, then each chunk's
levels are compressed on their own with it, and the chunk header counts the compressed bytes.
The choice, made from the whole page's levels (16-bit values):

* in 2.2 only, ``rle{values flat 16, run_lengths flat 8}`` (block form: ``u64`` size of the run
  values, the values, the ``u8`` run lengths; runs longer than 255 are split) when its size, 8
  bytes plus 3 per run, is below the raw 2 bytes per level and not above the estimated bitpacked
  size;
* otherwise FastLanes bitpacking: ``inline_bitpacking{16}`` (each 1024-level block led by its
  own width) for pages of at most 1024 levels, unless one block at the needed width would not be
  smaller than the raw levels; ``out_of_line_bitpacking{16, flat W}`` at the page's widest ``W``
  for larger pages (a chunk's short last block is packed and padded, or stored raw, whichever is
  smaller);
* otherwise ``flat{16}``.

The bitpacked size estimate is ``1 + 64 W`` words for pages of at most 1024 levels, else the
out-of-line words of the whole page. Pages whose levels are all 0 (nullable nested fields without
nulls, which pylance writes without definition levels) get inline bitpacking (one width word) when
they hold at most 1024 levels; more get RLE in 2.2, and in 2.1 inline bitpacking too, but for
the definition levels of lists: out-of-line bitpacking at width 1 (pylance's 2.1 reader refuses
inline chunks of more than one block under lists, and out-of-line bitpacking at width 0).

Everything is page-wide numpy: :func:`compress_chunks` returns one byte array holding every
chunk's compressed levels, with each chunk's start and length in it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.compression import bitpacking

BLOCK = bitpacking.BLOCK
LEVEL_BITS = 16
RLE_HEADER = 8  # u64 size of the run values
MAX_RUN = 255  # u8 run lengths
_LANE_WORDS = BLOCK // LEVEL_BITS  # words of one 1024-level block per bit of width


@dataclass(frozen=True)
class LevelCodec:
    """The compression of one kind of levels of a page: ``kind`` is ``flat``, ``rle``, ``inline``
    or ``out_of_line``; ``width`` the out-of-line bit width."""

    kind: str
    width: int = 0

    def encoding(self) -> Any:
        """The ``CompressiveEncoding`` that describes the compressed levels: made once per
        codec and shared (a few microseconds of protobuf building every page paid), so copy it
        (``CopyFrom``), never change it."""
        return _encoding(self.kind, self.width)


@functools.cache
def _encoding(kind: str, width: int) -> Any:
    enc = pb.CompressiveEncoding()
    if kind == "rle":
        enc.rle.values.flat.bits_per_value = LEVEL_BITS
        enc.rle.run_lengths.flat.bits_per_value = 8
    elif kind == "inline":
        enc.inline_bitpacking.uncompressed_bits_per_value = LEVEL_BITS
    elif kind == "out_of_line":
        enc.out_of_line_bitpacking.uncompressed_bits_per_value = LEVEL_BITS
        enc.out_of_line_bitpacking.values.flat.bits_per_value = width
    else:
        enc.flat.bits_per_value = LEVEL_BITS
    return enc


FLAT = LevelCodec("flat")
_ZEROS_OUT_OF_LINE = LevelCodec("out_of_line", 1)


def _tail_packed(tail: np.ndarray | int, w: int) -> np.ndarray | bool:
    """Whether a short last block of ``tail`` levels is packed (and padded) rather than stored raw."""
    return (np.asarray(tail) > 0) & (w * (BLOCK - np.asarray(tail)) < (LEVEL_BITS - w) * np.asarray(tail))


def _out_of_line_words(n: int, w: int) -> int:
    full, tail = divmod(n, BLOCK)
    if not tail:
        return full * _LANE_WORDS * w
    return full * _LANE_WORDS * w + (_LANE_WORDS * w if bool(_tail_packed(tail, w)) else tail)


def _rle_runs(levels: np.ndarray, breaks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and length of every run (split at :data:`MAX_RUN`, and at ``breaks`` if given)."""
    n = levels.size
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(levels[1:], levels[:-1], out=new[1:])
    if breaks is not None:
        new[breaks] = True
    starts = np.flatnonzero(new)
    lengths = np.empty_like(starts)  # (np.diff with append= joins arrays first: slower)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = n - starts[-1]
    long = lengths > MAX_RUN
    if not long.any():
        return starts, lengths
    pieces = -(-lengths // MAX_RUN)
    first = np.repeat(starts, pieces)
    k = np.arange(first.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    piece_starts = first + k * MAX_RUN
    ends = np.repeat(starts + lengths, pieces)
    return piece_starts, np.minimum(ends - piece_starts, MAX_RUN)


def choose(levels: np.ndarray, rle: bool, repeated: bool = False) -> LevelCodec:
    """The encoding pylance picks for a page's levels (see the module); ``rle`` says whether
    run-length encoding may be used (2.2: pylance 14 writes no RLE levels to 2.1 files),
    ``repeated`` whether the page has repetition levels (lists: pylance's 2.1 reader then
    refuses inline chunks of more than one block, and out-of-line bitpacking at width 0)."""
    n = int(levels.size)
    if not n:
        return FLAT
    raw = 2 * n
    w = bitpacking.bit_width(levels)  # the widest block's width: that of the OR of all levels
    if not w:
        if n <= BLOCK or not (rle or repeated):
            return LevelCodec("inline")
        return LevelCodec("rle") if rle else _ZEROS_OUT_OF_LINE
    if n <= BLOCK:
        packed: int | None = 2 * (1 + _LANE_WORDS * w)
    else:
        packed = 2 * _out_of_line_words(n, w) if w < LEVEL_BITS else None
    if packed is not None and packed >= raw:
        packed = None
    bound = raw - 1 if packed is None else min(raw - 1, packed)  # the most RLE may take and win
    # a cheap lower bound first (every change of value starts a run), then the exact size
    # (up to MAX_RUN levels, no run is split: the bound is the exact size)
    if (
        rle
        and RLE_HEADER + 3 * (1 + int(np.count_nonzero(levels[1:] != levels[:-1]))) <= bound
        and (n <= MAX_RUN or RLE_HEADER + 3 * int(_rle_runs(levels)[0].size) <= bound)
    ):
        return LevelCodec("rle")
    if n <= BLOCK:
        if BLOCK * w // 8 >= raw:  # one block at this width is no smaller than the levels
            return FLAT
        return LevelCodec("inline")
    return LevelCodec("out_of_line", w)


def copy_segments(
    out: np.ndarray, dst: np.ndarray, src: np.ndarray, src_start: np.ndarray, length: np.ndarray
) -> None:
    """``out[dst[i]:dst[i]+length[i]] = src[src_start[i]:...]`` for every i (1-D arrays of one
    item type; positions in items).

    Evenly spaced segments of one length (the full chunks of a page) are copied through one
    strided view of each side; the rest one by one (segments are chunks: a few thousand a page).
    """
    item = out.itemsize
    c = length.size
    i = 0
    if c >= 2 and int(length[0]) > 0:
        width = int(length[0])
        d_step = int(dst[1] - dst[0])
        s_step = int(src_start[1] - src_start[0])
        same = (length[1:] == width) & (np.diff(dst) == d_step) & (np.diff(src_start) == s_step)
        run = c if bool(same.all()) else 1 + int(np.argmin(same))
        if run >= 2 and d_step >= width and s_step >= 0:
            d0, s0 = int(dst[0]), int(src_start[0])
            target = np.lib.stride_tricks.as_strided(
                out[d0:], shape=(run, width), strides=(d_step * item, item), writeable=True
            )
            source = np.lib.stride_tricks.as_strided(
                src[s0:], shape=(run, width), strides=(s_step * item, item), writeable=False
            )
            target[...] = source
            i = run
    for d, s, n in zip(dst[i:].tolist(), src_start[i:].tolist(), length[i:].tolist()):
        if n:
            out[d : d + n] = src[s : s + n]


@dataclass
class LevelChunks:
    """Every chunk's compressed levels: ``data[starts[i] : starts[i] + lengths[i]]`` for chunk i."""

    data: np.ndarray  # uint8
    starts: np.ndarray
    lengths: np.ndarray


def compress_chunks(levels: np.ndarray, bounds: np.ndarray, codec: LevelCodec) -> LevelChunks:
    """Compress the levels ``levels[bounds[i] : bounds[i + 1]]`` of each chunk i with ``codec``."""
    levels = np.ascontiguousarray(levels, np.uint16)
    bounds = np.asarray(bounds, np.int64)
    counts = np.diff(bounds)
    if codec.kind == "rle":
        return _rle(levels, bounds, counts)
    if codec.kind == "inline":
        return _inline(levels, bounds, counts)
    if codec.kind == "out_of_line":
        return _out_of_line(levels, bounds, counts, codec.width)
    return LevelChunks(levels.astype("<u2", copy=False).view(np.uint8), bounds[:-1] * 2, counts * 2)


def compress_one(levels: np.ndarray, codec: LevelCodec) -> bytes:
    """The bytes :func:`compress_chunks` makes of ``levels`` as one chunk, for the small pages of
    one chunk: run-length encoded levels too few to split a run and inline-bitpacked levels of one
    block joined directly (levels all 0 are one width word), the others through
    :func:`compress_chunks`."""
    levels = np.ascontiguousarray(levels, np.uint16)
    n = levels.size
    if codec.kind == "rle" and 0 < n <= MAX_RUN:
        starts, lengths = _rle_runs(levels)  # (no run is split: there are at most MAX_RUN levels)
        head = (2 * starts.size).to_bytes(RLE_HEADER, "little")
        return head + levels[starts].astype("<u2").tobytes() + lengths.astype(np.uint8).tobytes()
    if codec.kind == "inline" and 0 < n <= BLOCK:
        if not levels.any():
            return b"\x00\x00"  # one block at width 0: its width word
        # (bitpacking pads the block with zeros: a short block's few levels pack by bit places)
        return bitpacking.pack_inline(levels).astype("<u2").tobytes()
    if codec.kind == "flat":
        return levels.astype("<u2").tobytes()
    chunks = compress_chunks(levels, np.array([0, n], np.int64), codec)
    at, length = int(chunks.starts[0]), int(chunks.lengths[0])
    return chunks.data[at : at + length].tobytes()


def _words_to_chunks(words: np.ndarray, word_counts: np.ndarray) -> LevelChunks:
    starts = np.cumsum(word_counts) - word_counts
    return LevelChunks(words.astype("<u2", copy=False).view(np.uint8), starts * 2, word_counts * 2)


def _rle(levels: np.ndarray, bounds: np.ndarray, counts: np.ndarray) -> LevelChunks:
    if counts.size == 1 and counts[0] > 0:  # one chunk (a small page): its bytes joined at once
        run_at, run_len = _rle_runs(levels[bounds[0] : bounds[1]])
        data = b"".join(
            [
                (2 * int(run_at.size)).to_bytes(RLE_HEADER, "little"),
                levels[bounds[0] + run_at].astype("<u2").tobytes(),
                run_len.astype(np.uint8).tobytes(),
            ]
        )
        sizes = np.array([len(data)], np.int64)
        return LevelChunks(np.frombuffer(data, np.uint8), np.zeros(1, np.int64), sizes)
    starts, lengths = _rle_runs(levels, bounds[:-1][counts > 0])
    chunk = np.searchsorted(bounds, starts, "right") - 1
    runs = np.bincount(chunk, minlength=counts.size)
    sizes = RLE_HEADER + 3 * runs
    at = np.cumsum(sizes) - sizes
    out = np.empty(int(sizes.sum()), np.uint8)
    heads = (runs * 2).astype("<u8").view(np.uint8).reshape(-1, RLE_HEADER)
    out[(at[:, None] + np.arange(RLE_HEADER)).reshape(-1)] = heads.reshape(-1)
    local = np.arange(starts.size) - np.repeat(np.cumsum(runs) - runs, runs)
    value_at = at[chunk] + RLE_HEADER + 2 * local
    value_bytes = levels[starts].astype("<u2").view(np.uint8)
    out[value_at] = value_bytes[0::2]
    out[value_at + 1] = value_bytes[1::2]
    out[at[chunk] + RLE_HEADER + 2 * runs[chunk] + local] = lengths.astype(np.uint8)
    return LevelChunks(out, at, sizes)


def _inline(levels: np.ndarray, bounds: np.ndarray, counts: np.ndarray) -> LevelChunks:
    """Inline bitpacking, chunk by chunk: each chunk's blocks are zero-padded to 1024 levels."""
    if counts.size == 1 and 0 < counts[0] <= BLOCK:  # one chunk of one block (a small page)
        padded = np.zeros(BLOCK, np.uint16)
        padded[: int(counts[0])] = levels[bounds[0] : bounds[1]]
        words = bitpacking.pack_inline(padded)
        return _words_to_chunks(words, np.array([words.size], np.int64))
    blocks = -(-counts // BLOCK)
    block_at = np.cumsum(blocks) - blocks
    padded = np.zeros(int(blocks.sum()) * BLOCK, np.uint16)
    copy_segments(padded, block_at * BLOCK, levels, bounds[:-1], counts)
    widths = bitpacking.block_bit_widths(padded)
    words = bitpacking.pack_inline(padded)
    block_words = 1 + widths * _LANE_WORDS
    per_chunk = np.add.reduceat(block_words, block_at) if counts.size else block_words[:0]
    return _words_to_chunks(words, per_chunk)


def _out_of_line(levels: np.ndarray, bounds: np.ndarray, counts: np.ndarray, w: int) -> LevelChunks:
    """Out-of-line bitpacking at width ``w``, chunk by chunk (see :func:`_tail_packed`)."""
    c = counts.size
    if c and bool(np.all(counts[:-1] == counts[0])):  # equal chunks but the last: 2-D blocks
        first, first_words = _out_of_line_equal(levels[: bounds[-2]], int(counts[0]), c - 1, w)
        last, last_words = _out_of_line_equal(levels[bounds[-2] :], int(counts[-1]), 1, w)
        word_counts = np.full(c, first_words, np.int64)
        word_counts[-1] = last_words
        return _words_to_chunks(np.concatenate([first, last]), word_counts)
    tail = counts % BLOCK
    raw_tail = (tail > 0) & ~_tail_packed(tail, w)
    if raw_tail.any():
        return _out_of_line_raw_tails(levels, bounds, counts, w)
    # every chunk's levels start a block of their own: spread them (one slice per chunk, a few
    # thousand at most), then pack all blocks at once
    blocks = -(-counts // BLOCK)
    padded = np.zeros(int(blocks.sum()) * BLOCK, np.uint16)
    block_at = (np.cumsum(blocks) - blocks) * BLOCK
    copy_segments(padded, block_at, levels, bounds[:-1], counts)
    return _words_to_chunks(bitpacking.pack(padded, w), blocks * _LANE_WORDS * w)


def _out_of_line_raw_tails(levels: np.ndarray, bounds: np.ndarray, counts: np.ndarray, w: int) -> LevelChunks:
    """Out-of-line bitpacking of chunks some of whose short last blocks are stored raw."""
    full, tail = np.divmod(counts, BLOCK)
    blocks = full + _tail_packed(tail, w)
    block_at = np.cumsum(blocks) - blocks
    packed_len = np.minimum(blocks * BLOCK, counts)
    padded = np.zeros(int(blocks.sum()) * BLOCK, np.uint16)
    copy_segments(padded, block_at * BLOCK, levels, bounds[:-1], packed_len)
    packed = bitpacking.pack(padded, w)
    per_block = _LANE_WORDS * w
    raw_len = counts - packed_len
    word_counts = blocks * per_block + raw_len
    chunk_at = np.cumsum(word_counts) - word_counts
    out = np.empty(int(word_counts.sum()), np.uint16)
    copy_segments(out, chunk_at, packed, (block_at * per_block), blocks * per_block)
    copy_segments(out, chunk_at + blocks * per_block, levels, bounds[:-1] + packed_len, raw_len)
    return _words_to_chunks(out, word_counts)


def _out_of_line_equal(levels: np.ndarray, count: int, chunks: int, w: int) -> tuple[np.ndarray, int]:
    """``chunks`` chunks of ``count`` levels each, bitpacked out of line: their words, and the
    words of one chunk."""
    if not chunks:
        return np.zeros(0, np.uint16), 0
    full, tail = divmod(count, BLOCK)
    blocks = full + int(bool(_tail_packed(tail, w)))
    packed_len = min(blocks * BLOCK, count)
    grid = levels.reshape(chunks, count)
    if packed_len == blocks * BLOCK:
        source = grid if packed_len == count else grid[:, :packed_len]
    else:
        source = np.zeros((chunks, blocks * BLOCK), np.uint16)
        source[:, :packed_len] = grid[:, :packed_len]
    packed = bitpacking.pack(np.ascontiguousarray(source).reshape(-1), w).reshape(chunks, -1)
    if packed_len < count:
        packed = np.hstack([packed, grid[:, packed_len:]])
    return packed.reshape(-1), packed.shape[1]
