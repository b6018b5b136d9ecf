"""Mini-block pages for the Lance 2.1/2.2 writer: values and their levels cut into chunks.

Every chunk but the last holds 2^k values (1 <= k <= 12: pylance refuses other chunks of one value,
and bitpacked chunks of more than one 1024-value block), chosen greedily so that its values take about
4 KiB and the whole chunk (header, levels, values, each padded to 8 bytes) stays within what the
chunk word can describe (32 KiB with the u16 words of 2.1). Levels go with the values they
describe: a chunk ends right after its last value's level, so null and empty lists that follow it
open the next chunk (the last chunk takes all that remain). Each chunk's levels are compressed
with one encoding per page and level kind, chosen as pylance does (:mod:`level_compress`); the
chunk plan counts them at their raw 2 bytes a level. Under lists a repetition index of two u64 per
chunk (rows that end in the chunk, levels left over after its last row start) lets a reader find
a row's chunks. See :mod:`miniblock` for the decoder.
"""

from __future__ import annotations

import itertools
import struct
from typing import Any

import numpy as np

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.v2_1.level_compress import (
    FLAT,
    LevelChunks,
    LevelCodec,
    choose,
    compress_chunks,
    compress_one,
)
from lance_table.file.v2_1.miniblock_fast import FILL, FILL_BYTE, fast_page, pad8
from lance_table.file.v2_1.value_kinds import MiniBlockValues

MAX_LOG_VALUES = 12  # 4096 values per chunk, as pylance writes
MAX_CHUNK_LEVELS = 32767  # level buffers' sizes are u16 byte counts


class ChunkTooLarge(Exception):
    """One value and its levels do not fit a chunk (too many null or empty lists in a row)."""


class _Planner:
    """Chooses chunk boundaries (value ranges) and the level ranges that go with them."""

    def __init__(
        self,
        values: MiniBlockValues,
        n: int,
        num_levels: int,
        visible: np.ndarray | None,
        has_rep: bool,
        has_def: bool,
        large: bool,
    ) -> None:
        self.values = values
        self.n = n
        self.num_levels = num_levels
        self.level_lists = has_rep + has_def
        self.vis_idx = np.flatnonzero(visible) if visible is not None else None
        size_len = 4 if large else 2
        self.head = pad8(2 + 2 * self.level_lists + size_len * values.num_buffers)
        self.limit = (1 << 18) if large else (1 << 15)
        self.max_values = min(values.chunk_values_limit(), 1 << MAX_LOG_VALUES)
        self.max_log = self.max_values.bit_length() - 1

    def level_end(self, stop: int) -> int:
        if not self.level_lists:
            return 0
        if stop >= self.n:
            return self.num_levels
        return int(self.vis_idx[stop - 1]) + 1 if self.vis_idx is not None else stop

    def chunk_bytes(self, start: int, stop: int, levels_from: int) -> int | None:
        """The chunk's size, or None when it breaks a limit."""
        levels = self.level_end(stop) - levels_from
        if levels > MAX_CHUNK_LEVELS or (stop - start > 2 and not self.values.fits(start, stop)):
            return None
        fixed = self.head + self.level_lists * pad8(2 * levels)
        sizes = self.values.size_bounds(start, stop)
        if sizes is None or fixed + sum(pad8(s) for s in sizes) > self.limit:
            sizes = self.values.sizes(start, stop)
        total = fixed + sum(pad8(s) for s in sizes)
        aim = self.values.chunk_aim()
        if total > self.limit or (stop - start > 2 and aim is not None and sum(sizes) > aim):
            return None
        return total

    def uniform_plan(self) -> list[tuple[int, int, int]] | None:
        """:meth:`plan` at once, for values sized many chunks at a time (bitpacked blocks) when
        every chunk of the most values fits, or for values sized by their count alone (see
        :meth:`aimed_chunk`): the plan :meth:`plan` makes then. None otherwise."""
        aimed = self.aimed_chunk()
        if aimed is not None:
            m = aimed
            # the last chunk: the rest, once it is few enough values for one chunk within the aim
            last = self._most_within_aim(m)
            if self.n <= last:
                return None
            full_chunks = -(-(self.n - last) // m)
            stops = np.append(np.arange(1, full_chunks + 1, dtype=np.int64) * m, self.n)
            padded = np.full(stops.size, sum(pad8(s) for s in self.values.sizes(0, m)), np.int64)
            padded[-1] = sum(pad8(s) for s in self.values.sizes(0, self.n - int(stops[-2])))
            return self._uniform(stops, padded, m)
        m = self.max_values
        if self.n <= m or self.values.chunk_aim() is not None:
            return None
        stops = np.append(np.arange(m, self.n, m, dtype=np.int64), self.n)
        starts = np.concatenate([[0], stops[:-1]])
        sizes = self.values.many_sizes(starts, stops)
        if sizes is None:
            return None
        return self._uniform(stops, (sizes + 7) & ~7, m)

    def aimed_chunk(self) -> int | None:
        """For values whose sizes depend on their count alone (``MiniBlockValues.count_sized``)
        and that aim at a chunk size: the value count of the chunks :meth:`plan` makes of them
        where the levels allow, the most values (a power of two) whose sizes stay within the
        aim. None for other values, or when no count of two or more values stays within it."""
        values = self.values
        aim = values.chunk_aim()
        if aim is None or not values.count_sized:
            return None
        k = self.max_log
        while k >= 2 and sum(values.sizes(0, 1 << k)) > aim:
            k -= 1
        return 1 << k if k >= 1 else None

    def _most_within_aim(self, m: int) -> int:
        """The most values (``m`` or more, at most :attr:`max_values`) whose sizes stay within the
        aim: values sized by their count alone, ``m`` of which do."""
        aim = self.values.chunk_aim()
        assert aim is not None
        lo, hi = m, self.max_values  # sizes(lo) within the aim; find the last count that is
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if sum(self.values.sizes(0, mid)) <= aim:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _uniform(self, stops: np.ndarray, padded: np.ndarray, m: int) -> list[tuple[int, int, int]] | None:
        """The plan of chunks ending at ``stops`` (each of ``m`` values but the last), whose
        value buffers take ``padded`` bytes, if each chunk's levels fit it; None otherwise."""
        if not self.level_lists:
            levels = np.zeros(stops.size, np.int64)
        else:
            ends = (self.vis_idx[stops - 1] + 1) if self.vis_idx is not None else stops.copy()
            ends[-1] = self.num_levels
            levels = np.diff(ends, prepend=0)
        total = self.head + self.level_lists * ((2 * levels + 7) & ~7) + padded
        if int(levels.max()) > MAX_CHUNK_LEVELS or int(total.max()) > self.limit:
            return None
        logs = np.full(stops.size, m.bit_length() - 1, np.int64)
        logs[-1] = 0
        return list(zip(stops.tolist(), logs.tolist(), total.tolist()))

    def plan(self) -> list[tuple[int, int, int]]:
        """(value stop, log2 of the value count or 0 for the last chunk, chunk bytes) per chunk."""
        uniform = self.uniform_plan()
        if uniform is not None:
            return uniform
        out: list[tuple[int, int, int]] = []
        start = 0
        levels_from = 0
        k_hint = MAX_LOG_VALUES
        while start < self.n:
            remaining = self.n - start
            chosen = None
            if remaining <= self.max_values:
                size = self.chunk_bytes(start, self.n, levels_from)
                if size is not None:
                    chosen = (self.n, 0, size)
            if chosen is None:
                # pylance refuses chunks of one value but the last: k >= 1
                k = min(k_hint + 1, self.max_log, remaining.bit_length() - 1)
                while k >= 1:
                    stop = start + (1 << k)
                    if stop < self.n:
                        size = self.chunk_bytes(start, stop, levels_from)
                        if size is not None:
                            chosen = (stop, k, size)
                            break
                    k -= 1
                if chosen is None:
                    raise ChunkTooLarge(f"value {start} and its levels do not fit a mini-block chunk")
                k_hint = k
            out.append(chosen)
            levels_from = self.level_end(chosen[0])
            start = chosen[0]
        return out


def _repetition_index(rep: np.ndarray, max_rep: int, ranges: list[tuple[int, int]]) -> bytes:
    """Per chunk: rows that end in it, and levels after its last row start (0 for the last)."""
    if len(ranges) == 1:  # one chunk: every row ends in it (the first level starts a row)
        first, end = ranges[0]
        if end > first:
            return struct.pack("<2Q", 1 + int(np.count_nonzero(rep[first + 1 : end] == max_rep)), 0)
    bounds = np.array(ranges, np.int64).reshape(-1, 2)
    lo, hi = bounds[:, 0], bounds[:, 1]
    starts = np.flatnonzero(rep == max_rep)
    # a row ends in a chunk where the next row starts (after its first level), or the page ends
    rows = np.searchsorted(starts, hi) - np.searchsorted(starts, np.minimum(lo + 1, hi))
    nonempty = hi > lo
    # the last row start before each chunk's end (-1: none)
    before_end = np.searchsorted(starts, hi) - 1
    at = np.where(nonempty & (before_end >= 0), np.append(starts, -1)[before_end], -1)
    left = np.where(at >= lo, hi - at, hi - lo)
    if lo.size:
        rows[-1] += 1
        left[-1] = 0
    # a chunk that begins with a row start ends the row left open by the chunk before
    opens = np.zeros(lo.size, bool)
    opens[nonempty] = rep[lo[nonempty]] == max_rep
    closes = opens[1:] & (left[:-1] != 0)
    rows[:-1] += closes
    left[:-1][closes] = 0
    return np.stack([rows, left], axis=1).astype(np.uint64).tobytes()


def encode_mini_block(
    values: MiniBlockValues,
    n: int,
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    visible: np.ndarray | None,
    layers: list[int],
    max_rep: int,
    large: bool,
) -> tuple[Any, list[bytes]]:
    """A mini-block page: its ``PageLayout`` and buffers (chunk words, chunks, repetition index).

    The levels are compressed as pylance does (see :mod:`level_compress`). Chunks are planned with
    the levels' raw size, an upper bound for bitpacking; should run-length encoded levels make a
    chunk too large, the page's levels are stored flat instead.

    Raises:
        ChunkTooLarge: some value cannot be put in a chunk with its levels.
    """
    num_levels = int(rep.size if rep is not None else defs.size if defs is not None else 0)
    planner = _Planner(values, n, num_levels, visible, rep is not None, defs is not None, large)
    rep_codec = choose(rep, large) if rep is not None else None
    def_codec = choose(defs, large, rep is not None) if defs is not None else None
    if rep is None and planner.vis_idx is None:
        fast = fast_page(values, n, defs, large, planner.head, planner.limit, planner.max_values, def_codec)
        if fast is not None and max(fast.sizes) > planner.limit:
            fast = fast_page(values, n, defs, large, planner.head, planner.limit, planner.max_values, FLAT)
        if fast is not None:
            layout = _layout(values, None, fast.def_codec, layers, n, large)
            word_bytes = _chunk_words(fast.sizes, fast.logs, large)
            fast_buffers: list[Any] = [word_bytes, fast.data]
            _add_dictionary(layout, values, fast_buffers)
            return layout, fast_buffers
    plan = planner.plan()
    values.prepare(list(itertools.pairwise([0] + [stop for stop, _, _ in plan])))
    built = _chunks(values, planner, plan, rep, defs, rep_codec, def_codec, large)
    if built is None:
        flat_rep = FLAT if rep is not None else None
        flat_def = FLAT if defs is not None else None
        built = _chunks(values, planner, plan, rep, defs, flat_rep, flat_def, large)
        rep_codec, def_codec = flat_rep, flat_def
    assert built is not None  # flat levels are within the planned sizes
    words, data, ranges = built
    layout = _layout(values, rep_codec, def_codec, layers, n, large)
    buffers = [np.array(words, np.uint32 if large else np.uint16).tobytes(), data]
    _add_dictionary(layout, values, buffers)
    if rep is not None:
        layout.mini_block_layout.repetition_index_depth = 1
        buffers.append(_repetition_index(rep, max_rep, ranges))
    return layout, buffers


def _chunk_words(sizes: list[int], logs: list[int], large: bool) -> bytes:
    """The chunk words of chunks of ``sizes`` bytes (multiples of 8, within the chunk limit, so a
    word holds them) and ``logs`` (log2 of their value counts, 0 for the last): u32 in 2.2 files
    (``large``), u16 in 2.1, packed in Python for the few chunks of a small page."""
    if len(sizes) <= _FEW_WORDS:
        mask = 0xFFFFFFFF if large else 0xFFFF  # (as numpy's cast would wrap them)
        words = [(((size // 8 - 1) << 4) | log) & mask for size, log in zip(sizes, logs)]
        return struct.pack(f"<{len(words)}{'I' if large else 'H'}", *words)
    array = ((np.array(sizes, np.int64) // 8 - 1) << 4) | np.array(logs, np.int64)
    return array.astype(np.uint32 if large else np.uint16).tobytes()


# pages of at most this many chunks pack their chunk words in Python (numpy's fixed cost per
# call outweighs so few words)
_FEW_WORDS = 16


def _chunks(
    values: MiniBlockValues,
    planner: _Planner,
    plan: list[tuple[int, int, int]],
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    rep_codec: LevelCodec | None,
    def_codec: LevelCodec | None,
    large: bool,
) -> tuple[list[int], bytes, list[tuple[int, int]]] | None:
    """The chunk words, the chunks' bytes and each chunk's level range; None when a chunk would
    exceed the limit with these level encodings."""
    if len(plan) == 1:
        return _one_chunk(values, planner, plan[0], rep, defs, rep_codec, def_codec, large)
    level_bounds = np.zeros(len(plan) + 1, np.int64)
    level_bounds[1:] = [planner.level_end(stop) for stop, _, _ in plan]
    compressed: list[LevelChunks] = []
    for lv, codec in ((rep, rep_codec), (defs, def_codec)):
        if lv is not None:
            assert codec is not None
            compressed.append(compress_chunks(lv, level_bounds, codec))
    n_chunks = len(plan)
    stops = [stop for stop, _, _ in plan]
    value_buffers = [values.chunk(a, b) for a, b in zip([0, *stops[:-1]], stops)]
    value_sizes = np.array([[len(b) for b in bufs] for bufs in value_buffers], np.int64)
    value_sizes = value_sizes.reshape(n_chunks, values.num_buffers)
    level_sizes = np.array([c.lengths for c in compressed], np.int64).reshape(len(compressed), n_chunks)
    # every chunk's header (level count, level sizes, buffer sizes), padded with the fill byte
    head_len = 2 + 2 * len(compressed) + (4 if large else 2) * values.num_buffers
    counts = np.vstack([np.diff(level_bounds)[None, :], level_sizes]).T
    if bool(np.any(counts > 0xFFFF)) or (not large and bool(np.any(value_sizes > 0xFFFF))):
        return None
    heads = np.full((n_chunks, pad8(head_len)), FILL_BYTE, np.uint8)
    heads[:, : 2 + 2 * len(compressed)] = np.ascontiguousarray(counts, "<u2").view(np.uint8)
    size_type = "<u4" if large else "<u2"
    heads[:, 2 + 2 * len(compressed) : head_len] = np.ascontiguousarray(value_sizes, size_type).view(np.uint8)
    sizes = heads.shape[1] + ((level_sizes + 7) & ~7).sum(axis=0) + ((value_sizes + 7) & ~7).sum(axis=1)
    if n_chunks and int(sizes.max()) > planner.limit:
        return None
    head_bytes = memoryview(heads.tobytes())
    step = heads.shape[1]
    fill = [bytes([FILL_BYTE]) * k for k in range(8)]
    # each level stream and each chunk's buffers, cut and padded, chunk by chunk
    level_pieces = []
    for c, lengths in zip(compressed, level_sizes):
        data = memoryview(c.data.tobytes())
        at = c.starts.tolist()
        level_pieces.append([(data[a : a + n], fill[-n % 8]) for a, n in zip(at, lengths.tolist())])
    parts: list[bytes | memoryview] = []
    for k in range(n_chunks):
        parts.append(head_bytes[k * step : (k + 1) * step])
        for pieces in level_pieces:
            parts.extend(pieces[k])
        for b in value_buffers[k]:
            parts.append(b)
            parts.append(fill[-len(b) % 8])
    logs = np.array([log for _, log, _ in plan], np.int64)
    words = (((sizes // 8 - 1) << 4) | logs).tolist()
    bounds = level_bounds.tolist()
    ranges = list(itertools.pairwise(bounds))
    return words, b"".join(parts), ranges


def _one_chunk(
    values: MiniBlockValues,
    planner: _Planner,
    planned: tuple[int, int, int],
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    rep_codec: LevelCodec | None,
    def_codec: LevelCodec | None,
    large: bool,
) -> tuple[list[int], bytes, list[tuple[int, int]]] | None:
    """:func:`_chunks` of a page of one chunk (a small page, a small append's): the same bytes,
    joined in Python rather than laid out for many chunks by numpy."""
    stop, log, _ = planned
    levels = planner.level_end(stop)
    pieces: list[bytes] = []
    for lv, codec in ((rep, rep_codec), (defs, def_codec)):
        if lv is not None:
            assert codec is not None
            pieces.append(compress_one(lv[:levels], codec))
    buffers = values.chunk(0, stop)
    counts = [levels, *(len(p) for p in pieces)]
    sizes = [len(b) for b in buffers]
    if max(counts) > 0xFFFF or (not large and max(sizes, default=0) > 0xFFFF):
        return None
    head_len = 2 + 2 * len(pieces) + (4 if large else 2) * values.num_buffers
    head = struct.pack(f"<{len(counts)}H{len(sizes)}{'I' if large else 'H'}", *counts, *sizes)
    parts = [head, FILL * (pad8(head_len) - head_len)]
    for b in (*pieces, *buffers):
        parts.append(b)
        parts.append(FILL * (-len(b) % 8))
    data = b"".join(parts)
    if len(data) > planner.limit:
        return None
    return [((len(data) // 8 - 1) << 4) | log], data, [(0, levels)]


def _layout(
    values: MiniBlockValues,
    rep_codec: LevelCodec | None,
    def_codec: LevelCodec | None,
    layers: list[int],
    n: int,
    large: bool,
) -> Any:
    layout = pb.PageLayout()
    mini = layout.mini_block_layout
    if rep_codec is not None:
        mini.rep_compression.CopyFrom(rep_codec.encoding())
    if def_codec is not None:
        mini.def_compression.CopyFrom(def_codec.encoding())
    mini.value_compression.CopyFrom(values.encoding)
    mini.layers.extend(layers)
    mini.num_buffers = values.num_buffers
    mini.num_items = n
    mini.has_large_chunk = large
    return layout


def _add_dictionary(layout: Any, values: MiniBlockValues, buffers: list[Any]) -> None:
    if values.dictionary is not None:
        dict_enc, dict_block, dict_items = values.dictionary
        layout.mini_block_layout.dictionary.CopyFrom(dict_enc)
        layout.mini_block_layout.num_dictionary_items = dict_items
        buffers.append(dict_block)
