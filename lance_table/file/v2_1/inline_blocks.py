"""Inline FastLanes bitpacking of many mini-block chunks decoded at once (part of :mod:`batch`).

Each chunk's values are 1024-value blocks, each led by one word holding its bit width. The
blocks of all chunks are walked together (:func:`walk`); runs of blocks of one width are then
unpacked straight to where their values go, or, where the runs are short, a width at a time and
the padding of each chunk's last block dropped afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lance_table._buffers import empty
from lance_table._numpy import sorted_unique
from lance_table.file.compression import bitpacking
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.byteranges import as_bytes, exclusive_cumsum, spans
from lance_table.file.v2_1.values import Fixed


@dataclass
class InlineBlocks:
    """Where the 1024-value blocks of many inline-bitpacked chunks are: per block (in value
    order) the word its packed data starts at and its bit width."""

    words: np.ndarray
    data_at: np.ndarray
    width: np.ndarray
    n_blocks: np.ndarray  # per chunk
    first_block: np.ndarray  # per chunk


def walk(
    t: int, data: memoryview, at: np.ndarray, counts: np.ndarray, io: PageIO, sizes: np.ndarray | None = None
) -> InlineBlocks | None:
    """Walk the chunks' blocks, each led by one word holding its bit width (within the chunks'
    buffers of ``sizes`` bytes, when given)."""
    dtype = bitpacking.DTYPES.get(t)
    word = t // 8
    if dtype is None or bool(np.any(at % word)):
        return None
    words = np.frombuffer(data, dtype, len(data) // word)
    lanes = bitpacking.BLOCK // t
    n_blocks = -(-counts // bitpacking.BLOCK)
    first_block = exclusive_cumsum(n_blocks)
    total = int(n_blocks.sum())
    data_at = np.zeros(total, np.int64)
    width = np.zeros(total, np.int64)
    pos = at // word
    for b in range(int(n_blocks.max(initial=0))):
        live = np.flatnonzero(n_blocks > b)
        p = pos[live]
        if p.size and int(p.max()) >= words.size:
            raise io.corrupt("inline bitpacking runs out of words")
        w = words[p].astype(np.int64)
        if bool(np.any(w > t)):
            raise io.corrupt(f"bit width above {t}")
        index = first_block[live] + b
        data_at[index] = p + 1
        width[index] = w
        pos[live] = p + 1 + w * lanes
    if total and int((data_at + width * lanes).max()) > words.size:
        raise io.corrupt("inline bitpacking runs out of words")
    if sizes is not None and bool(np.any(pos * word - at > sizes)):
        raise io.corrupt("inline bitpacking runs past its buffer")
    return InlineBlocks(words, data_at, width, n_blocks, first_block)


def _unpadded(rows: np.ndarray, first_row: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The values of chunks laid out as rows of 1024 (each chunk from row ``first_row[k]``, its
    last row padded), ``counts[k]`` of each, back to back.

    Chunks whose values run on into the next chunk's (all but the last chunk of a page, whose
    1024-value blocks are full) are copied together: one piece per short chunk, not per chunk."""
    flat = rows.reshape(-1)
    if not counts.size:
        return flat[:0]
    begin = first_row * bitpacking.BLOCK
    end = begin + counts
    cut = np.flatnonzero(end[:-1] != begin[1:])
    starts = np.append(begin[:1], begin[cut + 1])
    ends = np.append(end[cut], end[-1:])
    if starts.size > _UNPADDED_PIECES:
        return flat[spans(starts, ends - starts)]
    return np.concatenate([flat[a:b] for a, b in zip(starts.tolist(), ends.tolist())])


#: :func:`_unpadded` gathers values by index above this many pieces, else joins slices
_UNPADDED_PIECES = 256


def values(
    t: int,
    data: memoryview,
    at: np.ndarray,
    counts: np.ndarray,
    io: PageIO,
    floor: int | None = None,
    sizes: np.ndarray | None = None,
) -> Fixed | None:
    """Chunks of 1024-value FastLanes blocks, each led by one word holding its bit width (blocks
    whose values all lie below ``floor`` read as zeros: see :func:`batch.values`), within
    buffers of ``sizes`` bytes when given."""
    found = walk(t, data, at, counts, io, sizes)
    if found is None:
        return None
    dtype = bitpacking.DTYPES[t]
    words, n_blocks, start_block = found.words, found.n_blocks, found.first_block
    if not found.width.size:
        return Fixed(b"", t)
    widths = sorted_unique(found.width).tolist()
    # a block of width W < T holds values below 2 ** W, whatever the type's sign
    below = {w for w in widths if floor is not None and floor > 0 and w < t and (1 << w) <= floor}
    tail = counts - (n_blocks - 1) * bitpacking.BLOCK
    in_place = _in_place(found, tail, t, below)
    if in_place is not None:
        return Fixed(as_bytes(in_place[: int(counts.sum())]), t)
    if len(widths) == 1 and not below:  # one width (sorted ids, codes): unpacked straight into the result
        out = bitpacking.unpack(words, t, widths[0], found.data_at.size, found.data_at).reshape(
            -1, bitpacking.BLOCK
        )
    else:
        out = empty(found.width.size * bitpacking.BLOCK, dtype).reshape(-1, bitpacking.BLOCK)
        for w in widths:
            sel = np.flatnonzero(found.width == w)
            a, b = int(sel[0]), int(sel[-1]) + 1
            if b - a == sel.size:  # a run of blocks (sorted values): unpacked in place
                if w in below:
                    out[a:b] = 0
                else:
                    bitpacking.unpack(words, t, w, sel.size, found.data_at[a:b], out[a:b].reshape(-1))
            elif w in below:
                out[sel] = 0
            else:
                out[sel] = bitpacking.unpack(words, t, w, sel.size, found.data_at[sel]).reshape(sel.size, -1)
    # the last block of each chunk is padded to 1024 values
    has = n_blocks > 0
    if not bool(np.any(tail[has][:-1] != bitpacking.BLOCK)):
        return Fixed(as_bytes(out.reshape(-1)[: int(counts.sum())]), t)
    return Fixed(as_bytes(_unpadded(out, start_block, counts)), t)


#: :func:`_in_place` unpacks runs of blocks one by one when they average at least this many
#: blocks (a call costs about what unpacking a few blocks does; the other way costs a copy of
#: every value)
RUN_BLOCKS = 8


def _in_place(found: InlineBlocks, tail: np.ndarray, t: int, below: set[int]) -> np.ndarray | None:
    """The values of the blocks, each run of blocks of one width (up to and including a chunk's
    padded last block) unpacked straight to where its values go, in order: a run's padding is
    overwritten by the next run, the last one's falls past the values. None when the runs are
    short (chunks of one or two blocks of changing widths): the caller then unpacks by width and
    drops the padding afterwards."""
    width = found.width
    nb = width.size
    if nb < RUN_BLOCKS:  # (a page of a few blocks: the runs cannot average RUN_BLOCKS blocks)
        return None
    block = bitpacking.BLOCK
    held = np.full(nb, block, np.int64)  # the values of each block: a chunk's last one is short
    last = (found.first_block + found.n_blocks - 1)[found.n_blocks > 0]
    held[last] = tail[found.n_blocks > 0]
    ends = np.flatnonzero((width[1:] != width[:-1]) | (held[:-1] != block)) + 1
    if (ends.size + 1) * RUN_BLOCKS > nb:
        return None
    starts = np.append(0, ends).tolist()
    stops = np.append(ends, nb).tolist()
    dest = exclusive_cumsum(held)[starts].tolist()
    runs_width = width[starts].tolist()
    out = empty(int(held.sum()) + block, bitpacking.DTYPES[t])
    for a, b, d, w in zip(starts, stops, dest, runs_width):
        target = out[d : d + (b - a) * block]
        if w in below:
            target[...] = 0
        else:
            bitpacking.unpack(found.words, t, w, b - a, found.data_at[a:b], target)
    return out
