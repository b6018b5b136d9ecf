"""Fast mini-block pages: chunk plans and chunk bytes for whole pages at once.

The general planner in :mod:`miniblock_encode` asks the values for the size of every candidate
chunk and builds each chunk on its own, which costs some tens of microseconds per chunk: a
million 64-byte vectors make 15,625 chunks. Pages without repetition levels, whose level count
equals their value count, have a simpler shape that numpy can plan and assemble page-wide:

* fixed-width values (with or without item validity bitmaps): every chunk but the last holds the
  same 2^k values and the same bytes, so the full chunks are one 2-D array filled by reshaping;
* bitpacked values: one FastLanes block per chunk, packed for the whole page in one call;
* binary values (plain or FSST codes): chunk boundaries by a greedy walk over per-position size
  tables computed once, and each chunk's offsets rebased for the whole page in one pass.

The definition levels are compressed for all chunks at once (:mod:`level_compress`). Other
values (RLE, general compression) and pages with lists go through the general planner. The bytes
are those the general path writes for the same chunks.
"""

from __future__ import annotations

import struct
from itertools import pairwise

import numpy as np

from lance_table.file.compression import bitpacking
from lance_table.file.v2_1.byteranges import spans
from lance_table.file.v2_1.level_compress import FLAT, LevelCodec, compress_chunks, copy_segments
from lance_table.file.v2_1.value_kinds import (
    PAD_BYTE,
    BitpackedValues,
    FixedValues,
    MiniBlockValues,
    VariableValues,
)

FILL_BYTE = 0xFE  # pylance pads inside chunks with 0xFE
FILL = bytes([FILL_BYTE])
MAX_LOG_VALUES = 12


def pad8(n: int) -> int:
    """``n`` rounded up to a multiple of 8 (chunk parts are 8-byte aligned)."""
    return (n + 7) & ~7


class FastPage:
    """A mini-block page's chunks: value boundaries, log2 counts, the chunk bytes and sizes, and
    the encoding of the definition levels in them (None without levels)."""

    def __init__(
        self,
        bounds: np.ndarray,
        logs: list[int],
        data: np.ndarray,
        sizes: list[int],
        def_codec: LevelCodec | None,
    ) -> None:
        self.bounds = bounds  # value index where each chunk starts, then n
        self.logs = logs
        self.data = data
        self.sizes = sizes
        self.def_codec = def_codec


def fast_page(
    values: MiniBlockValues,
    n: int,
    defs: np.ndarray | None,
    large: bool,
    head_bytes: int,
    limit: int,
    max_values: int,
    def_codec: LevelCodec | None = None,
) -> FastPage | None:
    """The page's chunks when its values have a page-wide form (see the module), else None.

    ``defs`` are the definition levels (one per value) or None, compressed in each chunk with
    ``def_codec`` (flat by default); ``head_bytes`` is a chunk's header size padded to 8, ``limit``
    the largest chunk, ``max_values`` the most values a chunk may hold. Chunks are planned with
    the levels' raw size: the caller checks the sizes against ``limit`` when the levels are
    run-length encoded (which may exceed it).
    """
    if n < 1:
        return None
    levels = _Levels(defs, def_codec or FLAT) if defs is not None else None
    level_bytes_per_value = 2 if defs is not None else 0
    if isinstance(values, FixedValues):
        return _fixed(values, n, levels, large, head_bytes, limit, max_values, level_bytes_per_value)
    if isinstance(values, BitpackedValues):
        return _bitpacked(values, n, levels, large, head_bytes, limit)
    if isinstance(values, VariableValues) and type(values) is VariableValues:
        return _variable(values, values, values.chunk_aim(), n, levels, large, head_bytes, limit, max_values)
    compressed = values.compressed_variable()
    if compressed is not None:
        inner, budget = compressed
        return _variable(values, inner, budget, n, levels, large, head_bytes, limit, max_values)
    return None


class _Levels:
    """A page's definition levels and the encoding they get in every chunk."""

    def __init__(self, defs: np.ndarray, codec: LevelCodec) -> None:
        self.defs = defs
        self.codec = codec


def _codec(levels: _Levels | None) -> LevelCodec | None:
    return levels.codec if levels is not None else None


# --- plans -----------------------------------------------------------------------------------------


def _fixed_plan(
    values: FixedValues, n: int, head: int, limit: int, max_values: int, per_level: int
) -> tuple[int, int] | None:
    """(values per full chunk as a power of 2, its log) for fixed-width values."""

    def total(count: int) -> tuple[int, int]:
        sizes = values.sizes(0, count)
        return head + pad8(per_level * count) + sum(pad8(s) for s in sizes), sum(sizes)

    aim = values.chunk_aim()
    max_log = max_values.bit_length() - 1
    top = min(max_log, MAX_LOG_VALUES)
    if aim is not None and not values.bitmaps and values.leaf.flags is None:
        # byte-aligned items only: 2^k values take 2^k times one value's bytes, so no k above
        # the largest whose values stay within the aim can pass (but k = 1, which may exceed it)
        one = values.leaf.size(values.per_value)
        if one:
            top = min(top, max((aim // one).bit_length() - 1, 1))
    for k in range(top, 0, -1):
        size, value_bytes = total(1 << k)
        if size <= limit and (k == 1 or aim is None or value_bytes <= aim):
            return 1 << k, k
    return None


def _chunk_starts_uniform(n: int, per_chunk: int) -> np.ndarray:
    """Chunk starts for full chunks of ``per_chunk`` values and a last chunk of 1..per_chunk."""
    full = -(-n // per_chunk) - 1
    return np.append(np.arange(full + 1, dtype=np.int64) * per_chunk, n)


# --- assembly --------------------------------------------------------------------------------------


def _headers(
    counts: np.ndarray, level_sizes: np.ndarray | None, value_sizes: list[np.ndarray], large: bool, head: int
) -> np.ndarray:
    """Each chunk's header (level count, level buffer size, value buffer sizes), padded: (C, head)."""
    c = counts.size
    out = np.full((c, head), FILL_BYTE, np.uint8)
    has_defs = level_sizes is not None
    cols = [(counts if has_defs else np.zeros(c, np.int64)).astype("<u2").view(np.uint8).reshape(c, 2)]
    if level_sizes is not None:
        cols.append(level_sizes.astype("<u2").view(np.uint8).reshape(c, 2))
    size_dtype = "<u4" if large else "<u2"
    for s in value_sizes:
        cols.append(np.asarray(s).astype(size_dtype).view(np.uint8).reshape(c, -1))
    body = np.hstack(cols)
    out[:, : body.shape[1]] = body
    return out


def _assemble(
    bounds: np.ndarray,
    levels: _Levels | None,
    large: bool,
    head: int,
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, list[int]]:
    """Chunks built from ``pieces`` (per value buffer: its bytes ``src``, each chunk's start in it,
    its length, and its padded length, the padding already in ``src`` up to the stored size) and
    from the levels, compressed chunk by chunk."""
    counts = np.diff(bounds)
    c = counts.size
    if c <= FEW_CHUNKS:
        return _assemble_few(counts.tolist(), levels, bounds, large, head, pieces)
    stored = [p[2] for p in pieces]
    compressed = compress_chunks(levels.defs, bounds, levels.codec) if levels is not None else None
    level_sizes = compressed.lengths if compressed is not None else None
    headers = _headers(counts, level_sizes, stored, large, head)
    padded = [(level_sizes + 7) & ~7] if level_sizes is not None else []
    padded += [(s + 7) & ~7 for s in stored]
    sizes = head + (np.sum(padded, axis=0) if padded else np.zeros(c, np.int64))
    starts = np.zeros(c + 1, np.int64)
    np.cumsum(sizes, out=starts[1:])
    # not filled first: every byte is written below, the pads after each buffer among them
    out = np.empty(int(starts[-1]), np.uint8)
    # headers: scatter (C, head) rows to the chunk starts
    out[(starts[:-1, None] + np.arange(head)[None, :]).reshape(-1)] = headers.reshape(-1)
    at = starts[:-1] + head
    segments: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    if compressed is not None:
        segments.append((compressed.data, compressed.starts, compressed.lengths, at.copy(), padded[0]))
        at = at + padded[0]
    for (src, src_start, _stored, length), pad in zip(pieces, padded[1 if compressed is not None else 0 :]):
        segments.append((src, src_start, length, at.copy(), pad))
        at = at + pad
    for src, src_start, length, dst, pad in segments:
        copy_segments(out, dst, src, src_start, length)
        gap = np.maximum(pad - length, 0)  # the pad after the bytes copied
        if bool(np.any(gap)):
            out[spans(dst + length, gap)] = FILL_BYTE
    return out, sizes.tolist()


def _assemble_few(
    counts: list[int],
    levels: _Levels | None,
    bounds: np.ndarray,
    large: bool,
    head: int,
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, list[int]]:
    """:func:`_assemble` of a page of a few chunks (a small page, an append of a few rows): the
    same bytes, joined in Python rather than scattered page-wide by numpy (whose fixed cost per
    array operation would outweigh the work on so few bytes)."""
    levels_at: list[int] = []
    levels_len: list[int] = []
    level_data = b""
    if levels is not None:
        compressed = compress_chunks(levels.defs, bounds, levels.codec)
        levels_at, levels_len = compressed.starts.tolist(), compressed.lengths.tolist()
        level_data = compressed.data.tobytes()
    mask = 0xFFFFFFFF if large else 0xFFFF
    layout = f"<{1 + (levels is not None)}H{len(pieces)}{'I' if large else 'H'}"
    columns = [(p[0], p[1].tolist(), p[2].tolist(), p[3].tolist()) for p in pieces]
    parts: list[bytes] = []
    sizes = []
    for k, count in enumerate(counts):
        stored = [c[2][k] for c in columns]
        words = [count & 0xFFFF, levels_len[k] & 0xFFFF] if levels is not None else [0]
        header = struct.pack(layout, *words, *(s & mask for s in stored))
        chunk = [header, FILL * (head - len(header))]
        if levels is not None:
            at, size = levels_at[k], levels_len[k]
            chunk += [level_data[at : at + size], FILL * (-size % 8)]
        for (src, starts, _stored, lengths), size in zip(columns, stored):
            at, take = starts[k], lengths[k]
            chunk += [src[at : at + take].tobytes(), FILL * (pad8(size) - take)]
        body = b"".join(chunk)
        sizes.append(len(body))
        parts.append(body)
    return np.frombuffer(b"".join(parts), np.uint8), sizes


#: pages of at most this many chunks are assembled by :func:`_assemble_few` (0: none, every page
#: by the page-wide numpy path, which writes the same bytes)
FEW_CHUNKS = 8


def _fixed(
    values: FixedValues,
    n: int,
    levels: _Levels | None,
    large: bool,
    head: int,
    limit: int,
    max_values: int,
    per_level: int,
) -> FastPage | None:
    leaf = values.leaf
    if FEW_CHUNKS and not values.bitmaps and leaf.flags is None and 2 <= n <= max_values:
        # A page that fits one chunk (the plan of full chunks can then only say so, as two
        # values fit where all do): the chunk without the plan.
        whole = values.sizes(0, n)
        total = head + pad8(per_level * n) + sum(pad8(s) for s in whole)
        aim = values.chunk_aim()
        if total <= limit and (aim is None or sum(whole) <= aim):
            assert leaf.table is not None
            bounds = np.array([0, n], np.int64)
            size = np.array([whole[-1]], np.int64)
            piece = (leaf.table.reshape(-1), np.zeros(1, np.int64), size, size)
            data, chunk_sizes = _assemble_few([n], levels, bounds, large, head, [piece])
            return FastPage(bounds, [0], data, chunk_sizes, _codec(levels))
    plan = _fixed_plan(values, n, head, limit, max_values, per_level)
    if plan is None:
        return None
    per_chunk, log = plan
    whole = values.sizes(0, n)
    if n <= max_values:
        total = head + pad8(per_level * n) + sum(pad8(s) for s in whole)
        aim = values.chunk_aim()
        if total <= limit and (aim is None or n <= 2 or sum(whole) <= aim):
            per_chunk = max(per_chunk, n)
    bounds = _chunk_starts_uniform(n, per_chunk)
    counts = np.diff(bounds)
    pieces = []
    for m, valid in values.bitmaps:
        if (per_chunk * m) % 8:
            return None
        bits = np.packbits(valid, bitorder="little")
        pieces.append((bits, bounds[:-1] * m // 8, (counts * m + 7) // 8, (counts * m + 7) // 8))
    per = values.per_value
    if leaf.flags is not None:
        if (per_chunk * per) % 8:
            return None
        src = np.packbits(leaf.flags, bitorder="little")
        sizes = (counts * per + 7) // 8
        pieces.append((src, bounds[:-1] * per // 8, sizes, sizes))
    else:
        assert leaf.table is not None
        width = leaf.table.shape[1] * per
        src = leaf.table.reshape(-1)
        sizes = counts * width
        pieces.append((src, bounds[:-1] * width, sizes, sizes))
    data, chunk_sizes = _assemble(bounds, levels, large, head, pieces)
    logs = [log] * (counts.size - 1) + [0]
    return FastPage(bounds, logs, data, chunk_sizes, _codec(levels))


def _bitpacked(
    values: BitpackedValues, n: int, levels: _Levels | None, large: bool, head: int, limit: int
) -> FastPage | None:
    block = bitpacking.BLOCK
    words = values.words[:n]
    packed = bitpacking.pack_inline(words)
    t = words.dtype.itemsize
    widths = bitpacking.block_bit_widths(words)
    block_words = 1 + widths * (block // (t * 8))
    block_starts = np.zeros(widths.size, np.int64)
    np.cumsum(block_words[:-1], out=block_starts[1:])
    bounds = _chunk_starts_uniform(n, block)
    counts = np.diff(bounds)
    sizes = block_words * t
    level = pad8(2 * block) if levels is not None else 0
    if int(sizes.max()) + head + level + 8 > limit:
        return None
    src = packed.view(np.uint8)
    data, chunk_sizes = _assemble(bounds, levels, large, head, [(src, block_starts * t, sizes, sizes)])
    logs = [10] * (counts.size - 1) + [0]
    return FastPage(bounds, logs, data, chunk_sizes, _codec(levels))


def _variable(
    values: MiniBlockValues,
    inner: VariableValues,
    cap: int | None,
    n: int,
    levels: _Levels | None,
    large: bool,
    head: int,
    limit: int,
    max_values: int,
) -> FastPage | None:
    """Plain variable values (``values`` is ``inner``), or plain variable values ``inner`` whose
    chunk buffers ``values`` compresses whole: chunks planned on their raw bytes (at most ``cap``)
    and built for the page at once, then compressed."""
    plan = _variable_plan(inner, n, head, limit, max_values, 2 if levels is not None else 0, cap)
    if plan is None:
        return None
    bounds, logs = plan
    src, piece_start, stored = _variable_pieces(inner, bounds)
    if values is inner:
        piece = (src, piece_start[:-1], stored, stored)
    else:
        view = memoryview(src)  # type: ignore[arg-type]
        packed = values.compress([view[a:b] for a, b in pairwise(piece_start.tolist())])
        sizes = np.fromiter((len(p) for p in packed), np.int64, len(packed))
        starts = np.zeros(sizes.size, np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        piece = (np.frombuffer(b"".join(packed), np.uint8), starts, sizes, sizes)
    data, chunk_sizes = _assemble(bounds, levels, large, head, [piece])
    if values is not inner and max(chunk_sizes) > limit:
        return None  # compression made a chunk too large: the general planner decides
    return FastPage(bounds, logs, data, chunk_sizes, _codec(levels))


def _variable_plan(
    values: VariableValues,
    n: int,
    head: int,
    limit: int,
    max_values: int,
    level_per: int,
    cap: int | None,
) -> tuple[np.ndarray, list[int]] | None:
    """Chunk boundaries and log2 counts for variable values: each chunk takes the largest power of
    two of values whose bytes (offsets, values, padding to the offset width) stay within ``cap``
    (chunks of two values exempt) and whose whole chunk stays within ``limit``; None when two
    values do not fit."""
    off = values.offsets
    w = values.width
    max_log = min(max_values.bit_length() - 1, MAX_LOG_VALUES)

    def fits(start: int, k: int) -> bool:
        """Whether a chunk of 2^k values from ``start`` fits (and leaves values after it)."""
        count = 1 << k
        if start + count >= n:
            return False
        raw = (count + 1) * w + int(off[start + count] - off[start])
        stored = -(-raw // w) * w
        if head + pad8(level_per * count) + ((stored + 7) & ~7) > limit:
            return False
        return k == 1 or cap is None or stored <= cap

    def fits_last(start: int) -> bool:
        count = n - start
        if count > max_values:
            return False
        raw = (count + 1) * w + int(off[n] - off[start])
        stored = -(-raw // w) * w
        total = head + pad8(level_per * count) + pad8(stored)
        return total <= limit and (count <= 2 or cap is None or stored <= cap)

    # Greedy: each chunk takes the largest power of two of values that fits. Whether 2^k values
    # fit is monotone in k, so the search starts from the previous chunk's k (data is alike).
    starts = [0]
    logs: list[int] = []
    start = 0
    tail = max(0, n - max_values)
    k = 1
    while True:
        if start >= tail and fits_last(start):
            logs.append(0)
            break
        if fits(start, k):
            while k < max_log and fits(start, k + 1):
                k += 1
        else:
            while k > 1 and not fits(start, k - 1):
                k -= 1
            k -= 1
            if not k:
                return None  # a value too large for a chunk: the general planner decides
        start += 1 << k
        starts.append(start)
        logs.append(k)
    return np.array([*starts, n], np.int64), logs


def _variable_pieces(values: VariableValues, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every chunk's value buffer (its offsets rebased to the buffer start, its bytes, padding up to
    the offset width), back to back: the bytes, where each starts (and the end), and their sizes."""
    if bounds.size == 2:  # one chunk: its buffer as the general path builds it
        (one,) = values.chunk(int(bounds[0]), int(bounds[1]))
        return np.frombuffer(one, np.uint8), np.array([0, len(one)], np.int64), np.array([len(one)], np.int64)
    offsets = values.offsets
    w = values.width
    counts = np.diff(bounds)
    c = counts.size
    lo = bounds[:-1]
    reps = counts + 1
    first = np.repeat(np.cumsum(reps) - reps, reps)
    pos = np.repeat(lo, reps) + (np.arange(int(reps.sum())) - first)
    heads = reps * w
    rel = offsets[pos] - np.repeat(offsets[lo], reps) + np.repeat(heads, reps)
    offs_bytes = rel.astype(np.uint32 if w == 4 else np.uint64).view(np.uint8)
    data_len = offsets[bounds[1:]] - offsets[lo]
    raw = heads + data_len
    stored = -(-raw // w) * w
    piece_start = np.zeros(c + 1, np.int64)
    np.cumsum(stored, out=piece_start[1:])
    src = np.full(int(piece_start[-1]), PAD_BYTE, np.uint8)
    off_start = np.zeros(c, np.int64)
    np.cumsum(heads[:-1], out=off_start[1:])
    copy_segments(src, piece_start[:-1], offs_bytes, off_start, heads)
    copy_segments(src, piece_start[:-1] + heads, values.data, offsets[lo], data_len)
    return src, piece_start, stored
