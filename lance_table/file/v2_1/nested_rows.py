"""Rows picked from many pages of one list leaf column (a take) decoded in one pass.

A take of a thousand rows of a 1M-row ``list<string>`` column touches each of its 27 pages for a
few dozen rows; page by page, each pays its own Python calls for the repetition index, the chunk
headers, the levels and values of its chunks, unravelling and assembling. Here the pages of a
take that share one encoding of levels and values are seen as the chunks of one page (see
:mod:`miniblock_nested` for the steps on one page): their chunk tables and repetition indexes
joined (a page ends with a whole row, so no row runs on from one page into the next), the chunks
holding the rows read from the file at once, and the levels and values of the rows decoded and
assembled once.

:func:`decode` returns None where anything does not check out, and the caller then decodes the
pages one by one, which says what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import LanceTableError
from lance_table.file.arrow import with_validity
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import batch, repdef
from lance_table.file.v2_1.byteranges import exclusive_cumsum
from lance_table.file.v2_1.chunk_headers import parse_chunks
from lance_table.file.v2_1.miniblock import MAX_CHUNK_VALUES, chunk_values, values_at
from lance_table.file.v2_1.miniblock_nested import (
    _chunks_for_rows,
    _row_levels,
    _rows_among_chunks,
    _value_slots,
    check_row_starts,
)
from lance_table.storage.sources import read_spans

#: a page's runs of more than this many rows in one span are read as a span (see miniblock_nested)
MAX_SPAN_ROWS = 64


def rows_key(layout: Any, local: Runs, page_rows: int) -> tuple[Any, ...] | None:
    """What the pages of a take decoded together must share (None: a page read whole or in a
    long span, or a page this does not decode): a mini-block page of lists with a repetition
    index, without dictionary, and its encodings."""
    if local.is_span(0, page_rows) or (local.count == 1 and int(local.lengths[0]) > MAX_SPAN_ROWS):
        return None
    if layout.WhichOneof("layout") != "mini_block_layout":
        return None
    mini = layout.mini_block_layout
    if (
        mini.HasField("dictionary")
        or not mini.HasField("rep_compression")
        or not int(mini.repetition_index_depth)
    ):
        return None
    defs = mini.def_compression.SerializeToString() if mini.HasField("def_compression") else None
    return (
        "rows",
        mini.rep_compression.SerializeToString(),
        defs,
        mini.value_compression.SerializeToString(),
        tuple(mini.layers),
        int(mini.num_buffers),
        int(mini.repetition_index_depth),
    )


def decode(
    layouts: Sequence[Any], pages: Sequence[tuple[int, Runs, PageIO]], path: Sequence[pa.Field], large: bool
) -> pa.Array | None:
    """The path array of the rows ``local`` of each of ``pages`` (``layouts``: their encodings,
    all of one :func:`rows_key`), one page after another; None when anything does not check out."""
    try:
        return _decode([layout.mini_block_layout for layout in layouts], pages, path, large)
    except (LanceTableError, repdef.LevelError, pa.ArrowException):
        return None


def _tables(
    minis: Sequence[Any], ios: Sequence[PageIO], large: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The pages' chunk tables and repetition indexes joined: every chunk's byte range in the
    file and value count, and per chunk the first row starting in it, how many start in it and
    whether it begins with the end of an earlier row; None when they do not describe the pages."""
    word = np.uint32 if large else np.uint16
    byte_starts, sizes, values, row_starts, preambles = [], [], [], [], []
    for mini, io in zip(minis, ios):
        if len(io.buffers) < 3:
            return None
        words = np.frombuffer(io.whole(0), word).astype(np.int64)
        n = words.size
        depth = int(mini.repetition_index_depth)
        raw = io.whole(len(io.buffers) - 1)
        if not n or len(raw) < n * (depth + 1) * 8:
            return None
        index = np.frombuffer(raw, np.uint64, n * (depth + 1)).reshape(n, depth + 1).astype(np.int64)
        chunk_bytes = ((words >> 4) + 1) * 8
        count = np.left_shift(1, words & 0xF)
        count[-1] = int(mini.num_items) - int(count[:-1].sum())
        data_at, data_size = io.buffers[1]
        if not 0 <= int(count[-1]) <= MAX_CHUNK_VALUES or int(chunk_bytes.sum()) > data_size:
            return None
        trailer = index[:, 1] > 0
        if bool(trailer[-1]):  # a row running on past the page
            return None
        preamble = np.zeros(n, bool)
        preamble[1:] = trailer[:-1]
        starts = index[:, 0] + trailer - preamble
        if int(starts.sum()) != int(io.page.length):
            return None
        byte_starts.append(data_at + exclusive_cumsum(chunk_bytes))
        sizes.append(chunk_bytes)
        values.append(count)
        row_starts.append(starts)
        preambles.append(preamble)
    at = np.concatenate(byte_starts)
    starts = np.concatenate(row_starts)
    first = exclusive_cumsum(starts)
    return (
        at,
        at + np.concatenate(sizes),
        np.concatenate(values),
        np.stack([first, starts]),
        np.concatenate(preambles),
    )


def _decode(
    minis: Sequence[Any], pages: Sequence[tuple[int, Runs, PageIO]], path: Sequence[pa.Field], large: bool
) -> pa.Array | None:
    mini = minis[0]
    layers = list(mini.layers)
    repdef.check_layers(layers)
    ios = [io for _, _, io in pages]
    found = _tables(minis, ios, large)
    if found is None:
        return None
    at, ends, counts, rows_of, preamble = found
    first, starts = rows_of[0], rows_of[1]
    page_rows = np.array([int(io.page.length) for io in ios], np.int64)
    base = exclusive_cumsum(page_rows)
    wanted = np.concatenate([local.positions() + b for (_, local, _), b in zip(pages, base.tolist())])
    if not wanted.size or bool(np.any(np.diff(wanted) <= 0)):
        return None
    chosen = _chunks_for_rows(wanted, first, starts, preamble)
    data, s, e = read_spans(ios[0].source, at[chosen], ends[chosen])
    read = parse_chunks(mini, data, s, e, counts[chosen], large, ios[0])
    rep, defs = read.rep, read.defs
    if rep is None:
        return None
    count = int(read.counts.sum())
    n_levels = int(read.level_counts.sum())
    rows = _rows_among_chunks(wanted, chosen, first, starts)
    # (a page short of a row start would take it from the next page's chunks)
    max_rep = repdef.max_rep(layers)
    row_at = check_row_starts(rep, max_rep, read.level_counts, starts[chosen], preamble[chosen], ios[0])
    lo, hi = _row_levels(rep, max_rep, read.level_counts, chosen, rows, ios[0], row_at)
    levels = batch.spans(lo, hi - lo)
    limit = repdef.visible_limit(layers)
    _, local = _value_slots(defs, limit, levels, n_levels, count, ios[0])
    values, picked = chunk_values(mini, read, ios[0], local, local.size / max(count, 1))
    arr, _ = values_at(values, count, picked, local, mini, None, path[-1].type, None, ios[0], valid_cut=True)
    rep_out = rep[levels]
    defs_out = defs[levels] if defs is not None else None
    unravelled = repdef.unravel(rep_out, defs_out, layers, len(arr))
    out = repdef.assemble(path, unravelled, arr, with_validity)
    return out if len(out) == wanted.size else None
