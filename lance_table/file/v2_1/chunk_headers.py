"""Mini-block chunk headers of Lance 2.1/2.2, parsed for many chunks at once: each chunk's level
count, level and value buffer sizes and where its buffers lie, with a few numpy gathers over all
the chunks (of one page, or of many pages of one encoding: see :mod:`nested_pages`); then their
repetition and definition levels decoded together (see :mod:`batch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import batch
from lance_table.file.v2_1.compress import decode_levels


def _pad8(x: np.ndarray) -> np.ndarray:
    return (x + 7) & ~7


def le(u8: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned integers of ``width`` bytes at byte positions ``pos``: many of
    them read as words, one gather per distinct alignment (``pos % width``)."""
    word = _WORDS.get(width)
    if word is None or pos.size < _WORD_GATHER:
        out = np.zeros(pos.size, np.int64)
        for k in range(width):
            out |= u8[pos + k].astype(np.int64) << (8 * k)
        return out
    residue = pos % width
    present = np.flatnonzero(np.bincount(residue, minlength=1)).tolist()
    if len(present) == 1:
        r = present[0]
        words = np.frombuffer(u8, word, (u8.size - r) // width, r)
        return words[(pos - r) // width].astype(np.int64)
    out = np.empty(pos.size, np.int64)
    for r in present:
        sel = np.flatnonzero(residue == r)
        out[sel] = np.frombuffer(u8, word, (u8.size - r) // width, r)[(pos[sel] - r) // width]
    return out


_WORDS: dict[int, np.dtype[Any]] = {2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}
# positions from which :func:`le` reads words instead of bytes
_WORD_GATHER = 64


@dataclass
class ChunksRead:
    """Chunks of a mini-block page read and their levels decoded; their values not yet."""

    data: memoryview
    buf_at: list[np.ndarray]  # per value buffer: where it starts in each chunk
    sizes: list[np.ndarray]  # per value buffer: its size in each chunk
    counts: np.ndarray  # values per chunk
    rep: np.ndarray | None
    defs: np.ndarray | None
    level_counts: np.ndarray  # levels per chunk
    defs_picked: bool = False  # defs are only those at the positions asked for


def header_fields(
    u8: np.ndarray, starts: np.ndarray, has_rep: bool, has_def: bool, n_buffers: int, size_len: int
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, list[np.ndarray]]:
    """The fields of the mini-block chunk headers at ``starts`` (each checked by the caller to lie
    in ``u8``): level count, rep and def level sizes (None where the layout has none) and the
    size of each value buffer, each a gather for all chunks at once."""
    num_levels = le(u8, starts, 2)
    at = 2
    rep_size = def_size = None
    if has_rep:
        rep_size = le(u8, starts + at, 2)
        at += 2
    if has_def:
        def_size = le(u8, starts + at, 2)
        at += 2
    sizes = []
    for _ in range(n_buffers):
        sizes.append(le(u8, starts + at, size_len))
        at += size_len
    return num_levels, rep_size, def_size, sizes


def parse_chunks(
    layout: Any,
    data: memoryview,
    starts: np.ndarray,
    ends: np.ndarray,
    counts: np.ndarray,
    large: bool,
    io: PageIO,
    def_pick: np.ndarray | None = None,
) -> ChunksRead:
    """Chunks of a mini-block encoding lying at ``[starts, ends)`` in ``data`` (holding ``counts``
    values each): their headers parsed with a few gathers for all chunks at once, and their
    levels decoded (see :func:`read_chunks`, whose second half this is; the chunks may be of
    several pages of one encoding)."""
    u8 = np.frombuffer(data, np.uint8)
    has_rep = layout.HasField("rep_compression")
    has_def = layout.HasField("def_compression")
    n_buffers = int(layout.num_buffers)
    size_len = 4 if large else 2
    head = 2 + 2 * has_rep + 2 * has_def + size_len * n_buffers
    if starts.size and int((ends - starts).min()) < head:
        raise io.corrupt("a mini-block chunk is shorter than its header")
    num_levels, rep_size, def_size, sizes = header_fields(u8, starts, has_rep, has_def, n_buffers, size_len)
    cursor = starts + _pad8(np.int64(head))
    rep_at = def_at = cursor
    if rep_size is not None:
        rep_at = cursor
        cursor = cursor + _pad8(rep_size)
    if def_size is not None:
        def_at = cursor
        cursor = cursor + _pad8(def_size)
    buf_at = []
    for size in sizes:
        buf_at.append(cursor)
        cursor = cursor + _pad8(size)
    last_end = buf_at[-1] + sizes[-1] if sizes else cursor
    if starts.size and bool(np.any(last_end > ends)):
        raise io.corrupt("a mini-block chunk's buffers run past the chunk")
    rep = defs = None
    if rep_size is not None:
        rep = _chunk_levels(layout.rep_compression, data, rep_at, rep_size, num_levels, io)
    if def_size is not None and def_pick is not None and rep is None and np.array_equal(num_levels, counts):
        defs = batch.pick_levels(layout.def_compression, data, def_at, def_size, num_levels, def_pick, io)
        if defs is not None:
            return ChunksRead(data, buf_at, sizes, counts, rep, defs, num_levels, True)
    if def_size is not None:
        defs = _chunk_levels(layout.def_compression, data, def_at, def_size, num_levels, io)
    return ChunksRead(data, buf_at, sizes, counts, rep, defs, num_levels)


def _chunk_levels(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> np.ndarray:
    """The levels of the decoded chunks, concatenated."""
    got = batch.levels(enc, data, at, sizes, counts, io)
    if got is not None:
        return got
    pieces = [
        decode_levels(enc, data[int(a) : int(a) + int(n)], int(c), io)
        for a, n, c in zip(at.tolist(), sizes.tolist(), counts.tolist())
    ]
    return np.concatenate(pieces) if pieces else np.zeros(0, np.uint16)
