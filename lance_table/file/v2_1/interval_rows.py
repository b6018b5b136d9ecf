"""Which rows of a 2.1/2.2 page of integers hold a value in given intervals, read off the packed
values.

A filter such as ``id = 12345``, ``id >= 500000 AND id < 500100`` or ``id IN (3, 9)`` only asks
which values lie in some closed intervals ``[low, high]``. On a mini-block page of inline
FastLanes bitpacking (how pylance writes integers) the answer is worked out run of blocks by run
of blocks, where a run is blocks of one bit width W back to back:

* a block of width W below the type's holds values in ``[0, 2 ** W)``, so a run whose range misses
  the intervals is not unpacked at all, and the intervals are compared in that range, unsigned;
* long runs are compared field by field where they are unpacked (:func:`unpack_fields.match`):
  the values are never laid out in row order nor widened to the column's type, only the answers
  of a group with a match are;
* short runs and blocks of the type's full width (negative values) are unpacked and compared.

The padding of each chunk's last block, null rows and rows outside the ones asked for never match.
Pages of other layouts and encodings are not read here (:func:`handles` tells).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lance_table._buffers import empty
from lance_table.file.compression import bitpacking, unpack_fields
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import inline_blocks, repdef
from lance_table.file.v2_1.byteranges import exclusive_cumsum
from lance_table.file.v2_1.miniblock import chunk_table, read_chunks, span_chunks

#: runs of at least this many blocks are compared field by field (below it, the field-by-field
#: kernel's fixed cost per call outweighs the copies it saves)
FIELD_BLOCKS = 64


def handles(layout: Any) -> bool:
    """Whether a page of ``layout`` (a 2.1/2.2 page layout) is read here: a mini-block page
    without repetition or dictionary, of inline-bitpacked values."""
    if layout.WhichOneof("layout") != "mini_block_layout":
        return False
    mini = layout.mini_block_layout
    if mini.HasField("rep_compression") or mini.HasField("dictionary"):
        return False
    try:
        repdef.check_layers(mini.layers)
    except repdef.LevelError:
        return False  # (the ordinary decoder reports the damage)
    return mini.value_compression.WhichOneof("compression") == "inline_bitpacking"


def page_rows(
    layout: Any, io: PageIO, large: bool, runs: Runs, signed: bool, ranges: Sequence[tuple[int, int]]
) -> np.ndarray:
    """The rows among ``runs`` (page-local, not empty) of a page that :func:`handles` takes whose
    values lie in one of ``ranges`` (closed intervals, bounds in the column's type, ``signed`` or
    not), sorted.

    Raises:
        CorruptFileError: the page's chunks or blocks do not hold together.
    """
    mini = layout.mini_block_layout
    n_items = int(mini.num_items)
    if len(io.page.buffer_offsets) < 2:
        raise io.corrupt("mini-block page without metadata and data buffers")
    if n_items != io.page.length:
        raise io.corrupt(f"mini-block page of {io.page.length} rows holds {n_items} values")
    t = int(mini.value_compression.inline_bitpacking.uncompressed_bits_per_value)
    table = chunk_table(mini, io.whole(0), io.locate(1)[1], large, io)
    first, end = int(runs.starts[0]), runs.end
    chosen, _ = span_chunks(table, first, end - first, io)
    read = read_chunks(mini, io, table, chosen, large)
    if len(read.buf_at) != 1:
        raise io.corrupt(f"an inline-bitpacked chunk with {len(read.buf_at)} value buffers")
    found = inline_blocks.walk(t, read.data, read.buf_at[0], read.counts, io, read.sizes[0])
    if found is None:
        raise io.corrupt("inline bitpacking of an unknown width or out of its words' alignment")
    hits = _matches(found, read.counts, t, signed, ranges)
    if read.defs is not None:
        if read.defs.size != int(read.counts.sum()):
            raise io.corrupt(f"{read.defs.size} definition levels for {int(read.counts.sum())} values")
        hits = hits[read.defs[hits] == 0]
    rows = hits + int(table.item_starts[chosen[0]]) if chosen.size else hits
    return rows[runs.contains(rows)]


def _matches(
    found: inline_blocks.InlineBlocks,
    counts: np.ndarray,
    t: int,
    signed: bool,
    ranges: Sequence[tuple[int, int]],
) -> np.ndarray:
    """The positions among the chunks' values (back to back) of those in one of ``ranges``."""
    width = found.width
    nb = width.size
    if not nb:
        return np.zeros(0, np.int64)
    block = bitpacking.BLOCK
    held = np.full(nb, block, np.int64)  # the values of each block: a chunk's last one is short
    has = found.n_blocks > 0
    tail = counts - (found.n_blocks - 1) * block
    held[(found.first_block + found.n_blocks - 1)[has]] = tail[has]
    value_at = exclusive_cumsum(held)
    bounds = np.flatnonzero(width[1:] != width[:-1]) + 1
    starts = np.append(0, bounds).tolist()
    stops = np.append(bounds, nb).tolist()
    out = []
    for a, b in zip(starts, stops):
        w = int(width[a])
        if w < t:  # values in [0, 2 ** w), unsigned
            top = (1 << w) - 1
            clipped = [(max(lo, 0), min(hi, top)) for lo, hi in ranges if hi >= 0 and lo <= top]
            if not clipped:
                continue
            at = _run_matches(found, a, b, t, w, clipped, None)
        else:
            at = _run_matches(found, a, b, t, w, ranges, signed)
        if not at.size:
            continue
        blk, offset = np.divmod(at, block)
        blk += a
        at = at[offset < held[blk]]  # (the padding of a chunk's last block)
        out.append(value_at[blk[offset < held[blk]]] + at % block)
    if not out:
        return np.zeros(0, np.int64)
    return np.concatenate(out) if len(out) > 1 else out[0]


def _run_matches(
    found: inline_blocks.InlineBlocks,
    a: int,
    b: int,
    t: int,
    w: int,
    ranges: Sequence[tuple[int, int]],
    signed: bool | None,
) -> np.ndarray:
    """Positions (from the run's first value, padding included) of the values of blocks
    ``[a, b)`` (all of width ``w``) in one of ``ranges``: unsigned bounds below ``2 ** w``
    (``signed`` None), or bounds in the column's type for blocks of its full width."""
    n = b - a
    if not w:  # every value is 0 (and 0 lies in the bounds: the run was not skipped)
        return np.arange(n * bitpacking.BLOCK, dtype=np.int64)
    at = found.data_at[a:b]
    lanes = bitpacking.BLOCK // t
    step = int(at[1] - at[0]) if n > 1 else w * lanes
    if signed is None and n >= FIELD_BLOCKS and bool(np.all(np.diff(at) == step)):
        size = found.words.itemsize  # evenly spaced blocks (led by their width words): a strided view
        strides = (step * size, lanes * size, size)
        packed = np.ndarray((n, w, lanes), found.words.dtype, found.words, int(at[0]) * size, strides)
        return unpack_fields.match(packed, t, w, ranges)
    values = bitpacking.unpack(found.words, t, w, n, at, empty(n * bitpacking.BLOCK, bitpacking.DTYPES[t]))
    if signed:
        values = values.view(f"<i{t // 8}")
    kind = values.dtype.type
    hit = np.zeros(values.size, bool)
    part = np.empty(values.size, bool)
    for low, high in ranges:
        if low == high:
            np.equal(values, kind(low), out=part)
        else:
            np.greater_equal(values, kind(low), out=part)
            part &= values <= kind(high)
        hit |= part
    return np.flatnonzero(hit)
