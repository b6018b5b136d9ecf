"""The whole pages of one leaf column of a struct or list field decoded in one pass.

pylance cuts a large nested column into pages of some 37k rows (a 1M-row ``list<string>`` is 27
pages). Decoded page by page, each page pays a few hundred Python calls of its own: its chunk
table, its chunk headers, its levels and values, unravelling and assembling its levels, and then
joining the pages' arrays. Here the pages a read needs whole that share one encoding of their
levels are read together (their chunk tables and chunks in one read) and decoded as the chunks of
one page: the chunk tables and headers with a few gathers for all chunks, the levels of all
chunks at once, the values of each run of pages with one value encoding at once (the values of
FSST pages each have their own symbol table), and the levels of all pages unravelled and
assembled in one call. A page holds whole rows, so the levels of pages one after another are
those of their rows one after another; each page's levels are checked to start a row and to hold
its rows and values before they join.

:func:`plan` groups a leaf's pages; :func:`decode` returns None where anything does not check out,
and the caller then decodes the pages one by one, which says what is wrong.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import LanceTableError
from lance_table.file.arrow import with_validity
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import nested_rows, repdef
from lance_table.file.v2_1.byteranges import exclusive_cumsum, spans
from lance_table.file.v2_1.chunk_headers import ChunksRead, le, parse_chunks
from lance_table.file.v2_1.miniblock import MAX_CHUNK_VALUES, chunk_values, dictionary_of, values_at
from lance_table.file.v2_1.values import to_arrow
from lance_table.storage.sources import read_joined

#: a group holds at least this many pages (fewer: decoded one by one, as the batch saves little)
MIN_PAGES = 2
#: values of a group above which its pages are cut into more groups: the temporaries of a batch
#: stay in the cache and in memory the allocator keeps (larger ones are mapped fresh and fault
#: their pages in). Measured on pylance's pages of 37k lists of strings: groups of 6-9 pages take
#: 25-30% less time than page by page, all 27 pages at once no less.
MAX_GROUP_VALUES = 1 << 19

#: a page read whole with the encoding it was stored with
Page = tuple[int, Runs, PageIO]


def batch_key(layout: Any) -> tuple[Any, ...] | None:
    """What the pages decoded together must share: the levels' encoding, layers, chunk header
    form and whether values are dictionary indices, of a mini-block page (None: another kind)."""
    if layout.WhichOneof("layout") != "mini_block_layout":
        return None
    mini = layout.mini_block_layout
    rep = mini.rep_compression.SerializeToString() if mini.HasField("rep_compression") else None
    defs = mini.def_compression.SerializeToString() if mini.HasField("def_compression") else None
    shape = (int(mini.num_buffers), int(mini.repetition_index_depth), mini.HasField("dictionary"))
    return (rep, defs, tuple(mini.layers), *shape)


def plan(pages: Sequence[Page], layouts: Sequence[Any], parts: int) -> list[list[int]]:
    """The ``pages`` (in order; ``layouts`` their encodings) cut into groups decoded by one call
    each, in order: runs of pages read whole with one :func:`batch_key`, each cut into at most
    ``parts`` groups of at least :data:`MIN_PAGES` pages (more where they would hold more than
    :data:`MAX_GROUP_VALUES` values); every other page a group of its own.
    Groups are lists of indices into ``pages``."""
    keys = [
        batch_key(layout)
        if local.is_span(0, int(io.page.length))
        else nested_rows.rows_key(layout, local, int(io.page.length))
        for (_, local, io), layout in zip(pages, layouts)
    ]
    out: list[list[int]] = []
    k = 0
    while k < len(pages):
        end = k + 1
        if keys[k] is not None:
            while end < len(pages) and keys[end] == keys[k]:
                end += 1
        n = end - k
        cuts = n  # one page alone: a group of its own
        if n >= MIN_PAGES:
            # the values of whole pages; a take's rows (a few values each, counted as one)
            values = sum(
                int(layouts[j].mini_block_layout.num_items) if pages[j][2].whole_page else pages[j][1].total
                for j in range(k, end)
            )
            cuts = min(max(min(parts, n // MIN_PAGES), -(-values // MAX_GROUP_VALUES)), n // MIN_PAGES)
        bounds = np.linspace(k, end, cuts + 1).astype(np.int64).tolist()
        out.extend(list(range(a, b)) for a, b in itertools.pairwise(bounds))
        k = end
    return out


def decode(
    layouts: Sequence[Any], ios: Sequence[PageIO], path: Sequence[pa.Field], large: bool
) -> pa.Array | None:
    """The path array of the rows of whole pages ``ios`` of one leaf (``layouts``: their
    encodings, all of one :func:`batch_key`), one page after another; None when anything does
    not check out (the caller then decodes the pages one by one, which says what is wrong)."""
    minis = [layout.mini_block_layout for layout in layouts]
    try:
        return _decode(minis, ios, path, large)
    except (LanceTableError, repdef.LevelError, pa.ArrowException):
        return None


def _page_bytes(ios: Sequence[PageIO], count: int) -> tuple[memoryview, np.ndarray] | None:
    """The first ``count`` buffers of every page (chunk table, data and, for dictionary indices,
    the dictionary) in one buffer, and where each starts in it (pages by buffers; each buffer
    8-byte aligned, as the batch decoders want it); one read of them all where no page has its
    buffers in hand or on their way."""
    if any(len(io.buffers) < count for io in ios):
        return None
    ranges = np.array([io.buffers[:count] for io in ios], np.int64).reshape(-1, 2)
    if not any(io._whole or io._fetching is not None for io in ios):
        order = np.argsort(ranges[:, 0], kind="stable")
        at = np.empty(ranges.shape[0], np.int64)
        at[order] = exclusive_cumsum(ranges[order, 1])
        if not bool(np.any(at % 8)):
            return read_joined(ios[0].source, ranges[order]), at.reshape(-1, count)
    # buffers fetched page by page (a remote scan fetches pages ahead), or read so that they
    # would not be aligned: joined with padding
    parts: list[bytes | memoryview] = []
    at = np.empty(ranges.shape[0], np.int64)
    pos = 0
    for j, io in enumerate(ios):
        for b in range(count):
            buf = io.whole(b)
            at[count * j + b] = pos
            parts.append(buf)
            pos += len(buf)
            pad = -pos % 8
            if pad:
                parts.append(bytes(pad))
                pos += pad
    return memoryview(b"".join(parts)), at.reshape(-1, count)


def _chunks(
    minis: Sequence[Any],
    u8: np.ndarray,
    meta_at: np.ndarray,
    data_at: np.ndarray,
    ios: Sequence[PageIO],
    large: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The chunk tables of the pages (:func:`miniblock.chunk_table` of each, for all at once):
    every chunk's start and end in the joined bytes and its value count, and each page's first
    chunk; None when a table does not describe its page."""
    word = 4 if large else 2
    meta_sizes = np.array([io.buffers[0][1] for io in ios], np.int64)
    data_sizes = np.array([io.buffers[1][1] for io in ios], np.int64)
    items = np.array([int(m.num_items) for m in minis], np.int64)
    n_chunks = meta_sizes // word
    if bool(np.any(n_chunks == 0)):
        return None
    words = le(u8, meta_at.repeat(n_chunks) + spans(np.zeros_like(n_chunks), n_chunks) * word, word)
    chunk_bytes = ((words >> 4) + 1) * 8
    counts = np.left_shift(1, words & 0xF)
    first = exclusive_cumsum(n_chunks)
    last = first + n_chunks - 1
    counts[last] = 0
    counts[last] = items - np.add.reduceat(counts, first)
    if bool(np.any(counts[last] < 0)) or bool(np.any(counts[last] > MAX_CHUNK_VALUES)):
        return None
    byte_ends = np.cumsum(chunk_bytes)
    page_base = byte_ends[last] - np.add.reduceat(chunk_bytes, first)  # bytes before each page
    if bool(np.any(byte_ends[last] - page_base > data_sizes)):
        return None
    shift = (data_at - page_base).repeat(n_chunks)
    ends = byte_ends + shift
    return ends - chunk_bytes, ends, counts, first


def _decode(
    minis: Sequence[Any], ios: Sequence[PageIO], path: Sequence[pa.Field], large: bool
) -> pa.Array | None:
    mini = minis[0]
    layers = list(mini.layers)
    repdef.check_layers(layers)
    dictionaries = mini.HasField("dictionary")
    if dictionaries and pa.types.is_dictionary(path[-1].type):
        return None  # (Arrow dictionary arrays of many pages: each page its own dictionary)
    got = _page_bytes(ios, 3 if dictionaries else 2)
    if got is None:
        return None
    data, at = got
    meta_at, data_at = at[:, 0], at[:, 1]
    u8 = np.frombuffer(data, np.uint8)
    table = _chunks(minis, u8, meta_at, data_at, ios, large)
    if table is None:
        return None
    starts, ends, counts, first = table
    read = parse_chunks(mini, data, starts, ends, counts, large, ios[0])
    rows = np.array([int(io.page.length) for io in ios], np.int64)
    items = np.array([int(m.num_items) for m in minis], np.int64)
    n_levels = np.add.reduceat(read.level_counts, first)
    if not repdef.whole_rows(read.rep, read.defs, layers, n_levels, rows, items):
        return None
    if dictionaries:
        values = _looked_up(minis, read, first, items, path[-1].type, ios, data, at[:, 2], n_levels)
    else:
        values = _values(minis, read, first, items, path[-1].type, ios[0])
    total = int(items.sum())
    if values is None or len(values) != total:
        return None
    levels = repdef.unravel(read.rep, read.defs, layers, total)
    if levels[0].length != int(rows.sum()):
        return None
    return repdef.assemble(path, levels, values, with_validity)


def _values(
    minis: Sequence[Any],
    read: ChunksRead,
    first: np.ndarray,
    items: np.ndarray,
    dtype: pa.DataType,
    io: PageIO,
) -> pa.Array | None:
    """The values of the pages' chunks as Arrow: those of each run of pages with one value
    encoding decoded at once, the runs joined."""
    encodings = [m.value_compression for m in minis]
    bounds = [0] + [j for j in range(1, len(minis)) if encodings[j] != encodings[j - 1]] + [len(minis)]
    chunk_bounds = np.append(first, read.counts.size)
    parts = []
    for a, b in itertools.pairwise(bounds):
        lo, hi = int(chunk_bounds[a]), int(chunk_bounds[b])
        part = read if (a, b) == (0, len(minis)) else _sliced(read, lo, hi)
        values, _ = chunk_values(minis[a], part, io)
        parts.append(to_arrow(values, dtype, int(items[a:b].sum()), io))
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _looked_up(
    minis: Sequence[Any],
    read: ChunksRead,
    first: np.ndarray,
    items: np.ndarray,
    dtype: pa.DataType,
    ios: Sequence[PageIO],
    data: memoryview,
    dict_at: np.ndarray,
    n_levels: np.ndarray,
) -> pa.Array:
    """The values of pages of dictionary indices: each page's indices looked up in its own
    dictionary (the validity of its value slots says which indices may lie past it)."""
    chunk_bounds = np.append(first, read.counts.size)
    level_bounds = np.append(0, np.cumsum(n_levels)).tolist()
    limit = repdef.visible_limit(list(minis[0].layers))
    parts = []
    for j, (mini, io) in enumerate(zip(minis, ios)):
        at = int(dict_at[j])
        dictionary = dictionary_of(mini, io, data[at : at + io.buffers[2][1]])
        indices, _ = chunk_values(mini, _sliced(read, int(chunk_bounds[j]), int(chunk_bounds[j + 1])), io)
        defs = read.defs
        valid = None
        if defs is not None:
            page = defs[level_bounds[j] : level_bounds[j + 1]]
            valid = np.compress(page <= limit, page) == 0
        parts.append(values_at(indices, int(items[j]), False, None, mini, dictionary, dtype, valid, io)[0])
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _sliced(read: ChunksRead, lo: int, hi: int) -> ChunksRead:
    """The chunks ``lo:hi`` of ``read`` for decoding their values (levels left out)."""
    return ChunksRead(
        read.data,
        [b[lo:hi] for b in read.buf_at],
        [s[lo:hi] for s in read.sizes],
        read.counts[lo:hi],
        None,
        None,
        read.level_counts[lo:hi],
    )
