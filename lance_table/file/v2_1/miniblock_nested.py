"""Mini-block pages under nesting: the rep/def levels and values of the rows a read selects.

A page of a list column (or of a struct's leaf) holds levels for every row. A read of some rows
decodes the levels of just the chunks that hold them (the repetition index says which), cuts the
levels of the selected rows out of them, and decodes only the values those levels point at where
the value encoding allows it. Then unravelling and assembling levels work on the selected rows
alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import batch, repdef
from lance_table.file.v2_1.miniblock import (
    Chunks,
    chunk_table,
    chunk_values,
    dictionary_of,
    read_chunks,
    rows_in_chunks,
    span_chunks,
    values_at,
)


def _row_chunks(layout: Any, io: PageIO, n_chunks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From the repetition index: per chunk, the first row starting in it, how many rows start in
    it (a row cut off at its end counts) and whether it begins with the end of an earlier row."""
    depth = int(layout.repetition_index_depth)
    raw = io.whole(len(io.page.buffer_offsets) - 1)
    stride = depth + 1
    if len(raw) < n_chunks * stride * 8:
        raise io.corrupt(f"repetition index of {len(raw)} bytes for {n_chunks} chunks")
    index = np.frombuffer(raw, np.uint64, n_chunks * stride).reshape(n_chunks, stride).astype(np.int64)
    ends, partial = index[:, 0], index[:, 1]
    trailer = partial > 0
    preamble = np.zeros(n_chunks, bool)
    preamble[1:] = trailer[:-1]
    starts = ends + trailer - preamble
    if bool(np.any(starts < 0)) or int(starts.sum()) != int(io.page.length):
        raise io.corrupt(f"the repetition index does not count the page's {int(io.page.length)} rows")
    first = np.zeros(n_chunks, np.int64)
    np.cumsum(starts[:-1], out=first[1:])
    return first, starts, preamble


def _chunks_for_rows(
    positions: np.ndarray, first: np.ndarray, starts: np.ndarray, preamble: np.ndarray
) -> np.ndarray:
    """The chunks holding rows ``positions``: where each starts, and the chunks it runs on into."""
    holders = np.flatnonzero(starts > 0)
    chunk_of = holders[np.searchsorted(first[holders], positions, side="right") - 1]
    chosen = np.zeros(first.size, bool)
    chosen[chunk_of] = True
    last_row = first + starts - 1
    spills = chunk_of[(positions == last_row[chunk_of]) & (chunk_of + 1 < first.size)]
    # a row cut off at a chunk's end goes on through the following chunks that start no row
    nxt = spills + 1
    while nxt.size:
        nxt = nxt[preamble[nxt]]
        chosen[nxt] = True
        nxt = nxt[(starts[nxt] == 0) & (nxt + 1 < first.size)] + 1
    return np.flatnonzero(chosen)


def mini_block_levels(
    layout: Any, io: PageIO, dtype: pa.DataType, large: bool, runs: Runs
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array, int | None]:
    """Levels and values of a mini-block page: of every row (rows read None), or of the rows
    ``runs`` only, in order (rows read: how many, the levels' rows)."""
    if len(io.page.buffer_offsets) < 2:
        raise io.corrupt("mini-block page without metadata and data buffers")
    table = chunk_table(layout, io.whole(0), io.locate(1)[1], large, io)
    if runs.count == 1 and not runs.is_span(0, int(io.page.length)):
        return _span_rows(layout, io, dtype, large, table, int(runs.starts[0]), int(runs.lengths[0]))
    if not runs.is_span(0, int(io.page.length)):
        return _selected_rows(layout, io, dtype, large, table, runs.positions())
    read = read_chunks(layout, io, table, np.arange(table.counts.size), large)
    values, _ = chunk_values(layout, read, io)
    dictionary = dictionary_of(layout, io)
    # the validity only matters for checking dictionary indices of null slots
    valid = _visible_valid(read.defs, repdef.visible_limit(layout.layers)) if dictionary is not None else None
    arr, _ = values_at(values, int(read.counts.sum()), False, None, layout, dictionary, dtype, valid, io)
    return read.rep, read.defs, arr, None


def _visible_valid(defs: np.ndarray | None, limit: int) -> np.ndarray | None:
    """Per value slot (a level at or below ``limit``): whether it holds a value."""
    return None if defs is None else np.compress(defs <= limit, defs) == 0


def _selected_rows(
    layout: Any, io: PageIO, dtype: pa.DataType, large: bool, table: Chunks, wanted: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array, int]:
    """The levels and values of the rows ``wanted`` (sorted, distinct positions in the page)."""
    n_chunks = table.counts.size
    has_rep = layout.HasField("rep_compression")
    first = starts = preamble = None
    if not has_rep:
        # no lists: every level is a row with a value slot, so chunks are found by their counts
        if wanted.size and int(wanted.max()) >= int(table.item_starts[-1]):
            last = int(table.item_starts[-1])
            raise io.corrupt(f"row {int(wanted.max())} is past the page's {last} values")
        chosen, rows = rows_in_chunks(table, wanted)
    elif layout.repetition_index_depth:
        first, starts, preamble = _row_chunks(layout, io, n_chunks)
        chosen = _chunks_for_rows(wanted, first, starts, preamble)
        rows = None
    else:
        chosen, rows = np.arange(n_chunks), wanted
    read = read_chunks(layout, io, table, chosen, large)
    rep, defs = read.rep, read.defs
    count = int(read.counts.sum())
    # chunks without levels hold one value per row
    n_levels = count if rep is None and defs is None else int(read.level_counts.sum())
    if rep is None:
        assert rows is not None
        lo, hi = rows, rows + 1
    else:
        row_at = None
        if rows is None:
            assert first is not None and starts is not None and preamble is not None
            rows = _rows_among_chunks(wanted, chosen, first, starts)
            row_at = check_row_starts(
                rep, repdef.max_rep(layout.layers), read.level_counts, starts[chosen], preamble[chosen], io
            )
        lo, hi = _row_levels(rep, repdef.max_rep(layout.layers), read.level_counts, chosen, rows, io, row_at)
    levels = batch.spans(lo, hi - lo)
    limit = repdef.visible_limit(layout.layers)
    shown, local = _value_slots(defs, limit, levels, n_levels, count, io)
    values, picked = chunk_values(layout, read, io, local, local.size / max(count, 1))
    dictionary = dictionary_of(layout, io)
    # the validity of the shown slots (it only matters for checking dictionary indices)
    valid = defs[shown] == 0 if dictionary is not None and defs is not None else None
    arr, _ = values_at(values, count, picked, local, layout, dictionary, dtype, valid, io, valid_cut=True)
    rep_out = rep[levels] if rep is not None else None
    defs_out = defs[levels] if defs is not None else None
    return rep_out, defs_out, arr, int(wanted.size)


def _span_rows(
    layout: Any, io: PageIO, dtype: pa.DataType, large: bool, table: Chunks, start: int, length: int
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array, int]:
    """The levels and values of the rows ``[start, start + length)`` of a page: the chunks that
    hold them are decoded whole, and the rows' levels and values cut out of them as slices."""
    n_chunks = table.counts.size
    has_rep = layout.HasField("rep_compression")
    first = starts = preamble = None
    if not has_rep:  # every level is a row with a value slot
        chosen, (row, _) = span_chunks(table, start, length, io)
    elif layout.repetition_index_depth:
        first, starts, preamble = _row_chunks(layout, io, n_chunks)
        ends = _chunks_for_rows(np.array([start, start + length - 1]), first, starts, preamble)
        chosen = np.arange(int(ends[0]), int(ends[-1]) + 1)
    else:
        chosen, row = np.arange(n_chunks), start
    read = read_chunks(layout, io, table, chosen, large)
    rep, defs = read.rep, read.defs
    count = int(read.counts.sum())
    n_levels = count if rep is None and defs is None else int(read.level_counts.sum())
    if rep is None:
        lo, hi = row, row + length
    else:
        row_at = None
        if first is not None:
            assert starts is not None and preamble is not None
            row = int(_rows_among_chunks(np.array([start]), chosen, first, starts)[0])
            row_at = check_row_starts(
                rep, repdef.max_rep(layout.layers), read.level_counts, starts[chosen], preamble[chosen], io
            )
        rows = np.array([row, row + length - 1])
        bounds = _row_levels(rep, repdef.max_rep(layout.layers), read.level_counts, chosen, rows, io, row_at)
        lo, hi = int(bounds[0][0]), int(bounds[1][1])
    if hi > n_levels:
        raise io.corrupt(f"rows end at level {hi} of the {n_levels} levels of their chunks")
    limit = repdef.visible_limit(layout.layers)
    if defs is None:
        if n_levels != count:
            raise io.corrupt(f"{n_levels} levels in chunks holding {count} values")
        first_slot, slots = lo, hi - lo
    else:
        visible = defs <= limit
        first_slot, slots = int(np.count_nonzero(visible[:lo])), int(np.count_nonzero(visible[lo:hi]))
        if first_slot + slots + int(np.count_nonzero(visible[hi:])) != count:
            raise io.corrupt(f"the levels of chunks holding {count} values do not show {count} slots")
    values, _ = chunk_values(layout, read, io)
    dictionary = dictionary_of(layout, io)
    valid = _visible_valid(defs, limit) if dictionary is not None else None
    arr, _ = values_at(values, count, False, None, layout, dictionary, dtype, valid, io)
    rep_out = rep[lo:hi] if rep is not None else None
    defs_out = defs[lo:hi] if defs is not None else None
    return rep_out, defs_out, arr.slice(first_slot, slots), length


def _value_slots(
    defs: np.ndarray | None, limit: int, levels: np.ndarray, n_levels: int, count: int, io: PageIO
) -> tuple[np.ndarray, np.ndarray]:
    """Of the ``levels`` (sorted positions among the chunks' levels): those that hold a value
    slot (a level at or below ``limit``), and where those slots are among the chunks' values."""
    if defs is None:  # every level is a value slot
        if n_levels != count:
            raise io.corrupt(f"{n_levels} levels in chunks holding {count} values")
        return levels, levels
    visible = defs <= limit
    shown = np.compress(visible[levels], levels)
    if shown.size * 64 < count:
        # a few levels are found among the slots
        slots = np.flatnonzero(visible)
        n_slots = slots.size
        local = np.searchsorted(slots, shown)
    else:
        # many read off a running count (in 32 bits, which is several times faster, for the
        # pages of fewer than 2^31 levels that are written)
        running = np.cumsum(visible, dtype=np.int32 if visible.size < 1 << 31 else np.int64)
        n_slots = int(running[-1]) if running.size else 0
        local = running[shown].astype(np.int64) - 1
    if n_slots != count:
        raise io.corrupt(f"{n_slots} value slots in the levels of chunks holding {count} values")
    return shown, local


def check_row_starts(
    rep: np.ndarray,
    max_rep: int,
    level_counts: np.ndarray,
    starts: np.ndarray,
    preamble: np.ndarray,
    io: PageIO,
) -> np.ndarray:
    """Refuse read chunks whose levels do not start the rows the repetition index says: each
    chunk's levels start ``starts`` rows, and begin with the end of an earlier row exactly where
    ``preamble`` says so (else a row's levels would be taken from a neighbour chunk, or page).
    Returns where the rows start among the levels (for :func:`_row_levels`).

    Raises:
        CorruptFileError: a chunk's levels and the repetition index disagree.
    """
    bounds = np.zeros(level_counts.size + 1, np.int64)
    np.cumsum(level_counts, out=bounds[1:])
    if rep.size != int(bounds[-1]):
        raise io.corrupt(f"{rep.size} repetition levels in chunks holding {int(bounds[-1])}")
    row_at = np.flatnonzero(rep == max_rep)
    found = np.searchsorted(row_at, bounds)  # each chunk's first row start at or after its start
    first_at = row_at[np.minimum(found[:-1], row_at.size - 1)] if row_at.size else bounds[:-1] - 1
    opens = first_at == bounds[:-1]  # its first level starts a row
    if not np.array_equal(np.diff(found), starts) or bool(np.any((opens == preamble) & (level_counts > 0))):
        raise io.corrupt("the levels of a chunk do not start the rows its repetition index says")
    return row_at


def _row_levels(
    rep: np.ndarray,
    max_rep: int,
    level_counts: np.ndarray,
    chosen: np.ndarray,
    rows: np.ndarray,
    io: PageIO,
    row_at: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Where the ``rows`` (sorted positions among the rows starting in the decoded chunks) begin
    and end among the chunks' levels. A row ends where the next begins, or where its run of
    consecutive chunks ends (the levels after that begin with the end of a row that started in a
    chunk not read); ``row_at``: where rows start among the levels, if known."""
    starts = np.flatnonzero(rep == max_rep) if row_at is None else row_at
    if rows.size and int(rows[-1]) >= starts.size:
        raise io.corrupt(f"row {int(rows[-1])} of the read chunks is past the {starts.size} rows they hold")
    lo = starts[rows]
    after = rows + 1
    nxt = np.where(after < starts.size, starts[np.minimum(after, starts.size - 1)], rep.size)
    level_starts = np.zeros(chosen.size + 1, np.int64)
    np.cumsum(level_counts, out=level_starts[1:])
    # the end of the run of consecutive chunks each row's first chunk belongs to
    run_last = np.flatnonzero(np.append(np.diff(chosen) != 1, True))
    chunk = np.searchsorted(level_starts, lo, side="right") - 1
    end = level_starts[run_last + 1][np.searchsorted(run_last, chunk)]
    return lo, np.minimum(nxt, end)


def _rows_among_chunks(
    wanted: np.ndarray, chosen: np.ndarray, first: np.ndarray, starts: np.ndarray
) -> np.ndarray:
    """Where the page rows ``wanted`` are among the rows that start in the chunks ``chosen``."""
    firsts = first[chosen]
    row_base = np.zeros(chosen.size, np.int64)
    np.cumsum(starts[chosen][:-1], out=row_base[1:])
    chunk = np.searchsorted(firsts, wanted, side="right") - 1
    return row_base[chunk] + (wanted - firsts[chunk])
