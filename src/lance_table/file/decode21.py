"""Decoding of Lance 2.1/2.2 pages (``lance.encodings21.PageLayout``).

Layouts: mini-block (u16 chunk words in 2.1, u32 in 2.2, with dictionaries and repetition /
definition levels), constant (all null, or one value repeated, possibly with levels) and full-zip
(fixed or variable width, with control words). Value compressions live in :mod:`compress21`; the
levels are turned back into lists and structs by :mod:`repdef`.

A leaf without nesting takes a fast path (:func:`decode_page`): values and nulls straight into one
Arrow array, decoding only the mini-block chunks that hold the selected rows. A leaf below lists or
structs goes through :func:`decode_nested_page`, which returns the Arrow array of its whole path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.unknown_fields import UnknownFieldSet

from lance_table.errors import UnsupportedFormatError
from lance_table.file import batch21, fastlanes, repdef
from lance_table.file.compress21 import decode_block, decode_levels, decode_values, unsupported
from lance_table.file.decode20 import with_validity
from lance_table.file.pageio import PageIO
from lance_table.file.pervalue21 import decode_per_value
from lance_table.file.runs import Runs
from lance_table.file.values21 import Fixed, Values, Var, concat_values, to_arrow


def _pad8(x: np.ndarray) -> np.ndarray:
    return (x + 7) & ~7


def _le(u8: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned integers of ``width`` bytes at byte positions ``pos``."""
    out = np.zeros(pos.size, np.int64)
    for k in range(width):
        out |= u8[pos + k].astype(np.int64) << (8 * k)
    return out


@dataclass
class _Chunks:
    """The chunk table of a mini-block page."""

    byte_starts: np.ndarray  # n + 1
    item_starts: np.ndarray  # n + 1
    counts: np.ndarray  # items per chunk


def _chunk_table(layout: Any, meta: memoryview, data_len: int, large: bool, io: PageIO) -> _Chunks:
    n_items = int(layout.num_items)
    word_type = np.uint32 if large else np.uint16
    words = np.frombuffer(meta, word_type, len(meta) // np.dtype(word_type).itemsize).astype(np.int64)
    chunk_bytes = ((words >> 4) + 1) * 8
    counts = np.left_shift(1, words & 0xF)
    if counts.size:
        counts[-1] = n_items - int(counts[:-1].sum())
    byte_starts = np.zeros(words.size + 1, np.int64)
    np.cumsum(chunk_bytes, out=byte_starts[1:])
    item_starts = np.zeros(words.size + 1, np.int64)
    np.cumsum(counts, out=item_starts[1:])
    if (counts.size and int(counts[-1]) < 0) or int(byte_starts[-1]) > data_len or item_starts[-1] != n_items:
        raise io.corrupt(f"mini-block chunks do not describe the page's {n_items} values")
    return _Chunks(byte_starts, item_starts, counts)


@dataclass
class _Decoded:
    """Chunks decoded: their levels (None when the page has none) and their values."""

    rep: np.ndarray | None
    defs: np.ndarray | None
    values: Values
    count: int
    level_counts: np.ndarray  # levels per decoded chunk


# A selection of chunks holding less than this share of a page's bytes reads just those chunks.
_PARTIAL_READ_SHARE = 0.5


def _chosen_data(
    io: PageIO, table: _Chunks, chosen: np.ndarray
) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """The bytes of the chunks ``chosen`` (sorted chunk numbers) of a mini-block page, and where
    each of them starts and ends in those bytes.

    A small selection (a take of scattered rows) reads only its chunks; otherwise the whole
    data buffer is read once.
    """
    starts = table.byte_starts[chosen]
    ends = table.byte_starts[chosen + 1]
    sizes = ends - starts
    total = int(table.byte_starts[-1])
    if chosen.size == table.counts.size or int(sizes.sum()) >= _PARTIAL_READ_SHARE * total:
        return io.whole(1), starts, ends
    offset = io.locate(1)[0]
    parts = io.source.read_ranges(list(zip((starts + offset).tolist(), sizes.tolist())))
    at = np.zeros(chosen.size + 1, np.int64)
    np.cumsum(sizes, out=at[1:])
    return memoryview(b"".join(parts)), at[:-1], at[1:]


def _decode_chunks(layout: Any, io: PageIO, table: _Chunks, chosen: np.ndarray, large: bool) -> _Decoded:
    """Decode the chunks ``chosen`` (sorted chunk numbers) of a mini-block page."""
    data, starts, ends = _chosen_data(io, table, chosen)
    u8 = np.frombuffer(data, np.uint8)
    has_rep = layout.HasField("rep_compression")
    has_def = layout.HasField("def_compression")
    n_buffers = int(layout.num_buffers)
    size_len = 4 if large else 2
    head = 2 + 2 * has_rep + 2 * has_def + size_len * n_buffers
    if chosen.size and int((ends - starts).min()) < head:
        raise io.corrupt("a mini-block chunk is shorter than its header")
    num_levels = _le(u8, starts, 2)
    at = 2
    rep_size = def_size = None
    if has_rep:
        rep_size = _le(u8, starts + at, 2)
        at += 2
    if has_def:
        def_size = _le(u8, starts + at, 2)
        at += 2
    sizes = []
    for _ in range(n_buffers):
        sizes.append(_le(u8, starts + at, size_len))
        at += size_len
    cursor = starts + _pad8(np.int64(at))
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
    if chosen.size and bool(np.any(last_end > ends)):
        raise io.corrupt("a mini-block chunk's buffers run past the chunk")
    counts = table.counts[chosen]
    rep = defs = None
    if rep_size is not None:
        rep = _chunk_levels(layout.rep_compression, data, rep_at, rep_size, num_levels, io)
    if def_size is not None:
        defs = _chunk_levels(layout.def_compression, data, def_at, def_size, num_levels, io)
    values = None
    if n_buffers == 1 and chosen.size:
        values = batch21.values(layout.value_compression, data, buf_at[0], sizes[0], counts, io)
    if values is None:
        pieces = []
        for k in range(chosen.size):
            buffers: list[bytes | memoryview] = [
                data[int(b[k]) : int(b[k]) + int(size[k])] for b, size in zip(buf_at, sizes)
            ]
            pieces.append(decode_values(layout.value_compression, buffers, int(counts[k]), io))
        values = concat_values(pieces, io) if pieces else Fixed(b"", 8)
    return _Decoded(
        rep,
        defs,
        values,
        int(counts.sum()),
        num_levels,
    )


def _chunk_levels(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> np.ndarray:
    """The levels of the decoded chunks, concatenated."""
    got = batch21.levels(enc, data, at, sizes, counts, io)
    if got is not None:
        return got
    pieces = [
        decode_levels(enc, data[int(a) : int(a) + int(n)], int(c), io)
        for a, n, c in zip(at.tolist(), sizes.tolist(), counts.tolist())
    ]
    return np.concatenate(pieces) if pieces else np.zeros(0, np.uint16)


def _dictionary(layout: Any, io: PageIO) -> Values | None:
    if not layout.HasField("dictionary"):
        return None
    if len(io.page.buffer_offsets) < 3:
        raise io.corrupt("dictionary page without a dictionary buffer")
    return decode_block(layout.dictionary, io.whole(2), int(layout.num_dictionary_items), io)


def _values_array(
    values: Values,
    n: int,
    dtype: pa.DataType,
    dictionary: Values | None,
    items_n: int,
    valid: np.ndarray | None,
    io: PageIO,
) -> pa.Array:
    """Decoded values as Arrow (without nulls), resolving dictionary indices."""
    if dictionary is None:
        return to_arrow(values, dtype, n, io)
    if not isinstance(values, Fixed) or values.bits not in fastlanes.DTYPES:
        raise io.corrupt("dictionary indices are not fixed-width integers")
    idx = np.frombuffer(values.data, fastlanes.DTYPES[values.bits])[:n].astype(np.int64)
    value_type = dtype.value_type if pa.types.is_dictionary(dtype) else dtype
    items = to_arrow(dictionary, value_type, items_n, io)
    past = idx >= items_n
    if past.any():
        if valid is None or bool(np.any(past & valid)):
            raise io.corrupt("dictionary index past the dictionary")
        idx = np.where(past, 0, idx)
    if pa.types.is_dictionary(dtype):
        return pa.DictionaryArray.from_arrays(pa.array(idx).cast(dtype.index_type), items)
    return items.take(pa.array(idx))


def mini_block(
    layout: Any, io: PageIO, dtype: pa.DataType, large_chunks: bool, runs: Runs | None = None
) -> pa.Array:
    """Decode a mini-block page of a column without nesting: every row, or only ``runs``.

    With ``runs`` only the chunks that hold those rows are decoded (the chunk metadata says how
    many values each chunk holds), and the result has exactly the selected rows.
    """
    n_items = int(layout.num_items)
    if len(io.page.buffer_offsets) < 2:
        raise io.corrupt("mini-block page without metadata and data buffers")
    table = _chunk_table(layout, io.whole(0), io.locate(1)[1], large_chunks, io)
    dictionary = _dictionary(layout, io)
    if runs is None or runs.is_span(0, n_items):
        chosen = np.arange(table.counts.size)
        positions = chunk_of = None
    else:
        positions = runs.positions()
        chunk_of = np.searchsorted(table.item_starts[1:], positions, side="right")
        chosen = np.unique(chunk_of)
    got = _decode_chunks(layout, io, table, chosen, large_chunks)
    valid = (got.defs == 0) if got.defs is not None else None
    if valid is not None and valid.size != got.count:
        raise io.corrupt(f"{valid.size} definition levels for {got.count} values")
    values, count, local = got.values, got.count, None
    if positions is not None and chunk_of is not None:
        # rows of the decoded chunks -> the selected rows
        base = np.concatenate([[0], np.cumsum(table.counts[chosen])])[:-1]
        local = base[np.searchsorted(chosen, chunk_of)] + (positions - table.item_starts[chunk_of])
        if isinstance(values, Var) and dictionary is None and local.size * 4 < count:
            # Few rows of many strings: pick them before decompressing (each FSST string is
            # compressed on its own), then the rows are already in place.
            values, count = _pick(values, local, io), local.size
            valid = valid[local] if valid is not None else None
            local = None
    arr = _values_array(values, count, dtype, dictionary, int(layout.num_dictionary_items), valid, io)
    if valid is not None and not valid.all():
        arr = with_validity(arr, valid)
    return arr if local is None else arr.take(pa.array(local))


def _pick(values: Var, items: np.ndarray, io: PageIO) -> Var:
    """The variable-width values at ``items``, in that order (still compressed, if they were)."""
    offsets = values.offsets
    if items.size and int(items.max()) + 1 >= offsets.size:
        raise io.corrupt(f"value {int(items.max())} of {offsets.size - 1} values is missing")
    starts = offsets[items]
    lengths = offsets[items + 1] - starts
    if bool(np.any(lengths < 0)) or (offsets.size and int(offsets[-1]) > len(values.data)):
        raise io.corrupt("variable-width offsets are out of order or past their bytes")
    picked = np.frombuffer(values.data, np.uint8)[batch21.spans(starts, lengths)]
    new = np.zeros(items.size + 1, np.int64)
    np.cumsum(lengths, out=new[1:])
    return Var(batch21.as_bytes(picked), new, values.symbols)


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


def _mini_block_levels(
    layout: Any, io: PageIO, dtype: pa.DataType, large: bool, runs: Runs
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array, np.ndarray | None]:
    """Levels and values of a mini-block page, and where the rows ``runs`` are among them.

    Without a repetition index (or for the whole page) every chunk is decoded and the positions
    are None (take ``runs`` from the page's rows). Otherwise only the chunks holding the rows are
    decoded; a run of chunks that begins inside a row loses that row's end (its *preamble*).
    """
    if len(io.page.buffer_offsets) < 2:
        raise io.corrupt("mini-block page without metadata and data buffers")
    table = _chunk_table(layout, io.whole(0), io.locate(1)[1], large, io)
    n_chunks = table.counts.size
    limit = repdef.visible_limit(layout.layers)
    positions = None
    chosen = np.arange(n_chunks)
    whole = runs.is_span(0, int(io.page.length))
    if not whole and layout.repetition_index_depth and layout.HasField("rep_compression"):
        first, starts, preamble = _row_chunks(layout, io, n_chunks)
        wanted = runs.positions()
        chosen = _chunks_for_rows(wanted, first, starts, preamble)
    got = _decode_chunks(layout, io, table, chosen, large)
    rep, defs = got.rep, got.defs
    item_keep = None
    if chosen.size != n_chunks and rep is not None:
        max_rep = repdef.max_rep(layout.layers)
        level_starts = np.zeros(chosen.size + 1, np.int64)
        np.cumsum(got.level_counts, out=level_starts[1:])
        keep = np.ones(rep.size, bool)
        group_start = np.ones(chosen.size, bool)
        group_start[1:] = np.diff(chosen) != 1
        for k in np.flatnonzero(group_start & preamble[chosen]).tolist():
            lo, hi = int(level_starts[k]), int(level_starts[k + 1])
            new_rows = np.flatnonzero(rep[lo:hi] == max_rep)
            keep[lo : lo + (int(new_rows[0]) if new_rows.size else hi - lo)] = False
        visible = defs <= limit if defs is not None else np.ones(rep.size, bool)
        item_keep = keep[visible]
        rep = rep[keep]
        defs = defs[keep] if defs is not None else None
        # rows of the decoded chunks, in order
        row_base = np.zeros(chosen.size, np.int64)
        firsts = first[chosen]
        counts = starts[chosen]
        row_base[1:] = np.cumsum(counts)[:-1]
        group_of = np.searchsorted(firsts, wanted, side="right") - 1
        positions = row_base[group_of] + (wanted - firsts[group_of])
    valid = None
    if got.defs is not None:
        valid = got.defs[got.defs <= limit] == 0
    values = _values_array(
        got.values, got.count, dtype, _dictionary(layout, io), int(layout.num_dictionary_items), valid, io
    )
    if item_keep is not None and not item_keep.all():
        values = values.filter(pa.array(item_keep))
    return rep, defs, values, positions


def _value_buffer(layout: Any, io: PageIO) -> bool:
    """Whether a constant page keeps its value in page buffer 0 (values too wide to be inline,
    e.g. strings: then the level buffers, if any, follow it)."""
    return not layout.HasField("inline_value") and len(io.page.buffer_offsets) % 2 == 1


def _constant_value(layout: Any, dtype: pa.DataType, n: int, io: PageIO) -> pa.Array:
    if _value_buffer(layout, io):
        # [u32 offset count (2)][u32 offset bytes][u32 value bytes][offsets][value]
        raw = io.whole(0)
        if len(raw) < 12:
            raise io.corrupt("constant value buffer too short")
        count, offset_bytes, size = np.frombuffer(raw, np.uint32, 3).astype(np.int64).tolist()
        if count != 2 or offset_bytes not in (8, 16) or 12 + offset_bytes + size > len(raw):
            raise io.corrupt("constant value buffer does not hold one value")
        offsets = np.frombuffer(raw, np.uint32 if offset_bytes == 8 else np.uint64, 2, 12).astype(np.int64)
        if not 0 <= offsets[0] <= offsets[1] <= size:
            raise io.corrupt("constant value offsets are out of order")
        start = 12 + offset_bytes
        value = bytes(raw[start + int(offsets[0]) : start + int(offsets[1])])
        return to_arrow(Var(value * n, np.arange(n + 1, dtype=np.int64) * len(value)), dtype, n, io)
    if not layout.HasField("inline_value"):
        return pa.nulls(n, dtype)
    value = bytes(layout.inline_value)
    return to_arrow(Fixed(value * n, len(value) * 8), dtype, n, io)


def _level_buffers(layout: Any, io: PageIO) -> range:
    """The page buffers of a constant page that hold repetition and definition levels."""
    first = 1 if _value_buffer(layout, io) else 0
    return range(first, len(io.page.buffer_offsets))


def _has_level_buffers(layout: Any, io: PageIO) -> bool:
    return any(int(io.page.buffer_sizes[i]) for i in _level_buffers(layout, io))


def _constant_levels(
    layout: Any, io: PageIO, dtype: pa.DataType
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array]:
    """A constant page's levels (u16 unless compressed; repetition first) and its values."""
    got: list[np.ndarray | None] = []
    buffers = _level_buffers(layout, io)
    for k, field, count in (
        (0, "rep_compression", "num_rep_values"),
        (1, "def_compression", "num_def_values"),
    ):
        index = buffers.start + k
        if index >= len(io.page.buffer_offsets) or not int(io.page.buffer_sizes[index]):
            got.append(None)
            continue
        raw = io.whole(index)
        if layout.HasField(field):
            got.append(decode_levels(getattr(layout, field), raw, int(getattr(layout, count)), io))
        else:
            got.append(np.frombuffer(raw, np.uint16, len(raw) // 2))
    rep, defs = got
    n = int(io.page.length)
    if defs is not None:
        n = int(np.count_nonzero(defs <= repdef.visible_limit(layout.layers)))
    elif rep is not None:
        n = rep.size
    values = _constant_value(layout, dtype, n, io)
    return rep, defs, values


def constant(layout: Any, io: PageIO, dtype: pa.DataType) -> pa.Array:
    """A constant page without levels: all null, or one value on every row."""
    return _constant_value(layout, dtype, int(io.page.length), io)


# -- full-zip ----------------------------------------------------------------------------------


def _word_bytes(bits: int) -> int:
    if bits == 0:
        return 0
    return 1 if bits <= 8 else 2 if bits <= 16 else 4


def _row_starts(io: PageIO, rows: int, data_len: int) -> np.ndarray:
    """The full-zip repetition index: the byte where each row starts, plus the end."""
    if len(io.page.buffer_offsets) < 2:
        raise io.corrupt("variable-width full-zip page without its repetition index")
    raw = io.whole(1)
    width = len(raw) // (rows + 1) if rows + 1 else 0
    if width not in (1, 2, 4, 8) or width * (rows + 1) != len(raw):
        raise io.corrupt(f"full-zip repetition index of {len(raw)} bytes for {rows} rows")
    starts = np.frombuffer(raw, fastlanes.DTYPES[width * 8], rows + 1).astype(np.int64)
    if rows and (starts[0] != 0 or int(starts[-1]) > data_len or bool(np.any(np.diff(starts) < 0))):
        raise io.corrupt("full-zip repetition index is out of order or past the page")
    return starts


@dataclass
class _Entries:
    """Full-zip entries in file order: levels and where each visible value's bytes are."""

    rep: np.ndarray | None
    defs: np.ndarray | None
    visible: np.ndarray
    value_at: np.ndarray
    value_len: np.ndarray


def _walk_full_zip(layout: Any, io: PageIO, u8: np.ndarray) -> _Entries:
    """Parse every entry ([control word][value]) of a full-zip page, all rows in step.

    Each row's entries are sequential (a value's size says where the next entry starts), so the
    walk advances every row by one entry per round; rounds = the most entries in one row.
    """
    bits_rep, bits_def = int(layout.bits_rep), int(layout.bits_def)
    cw = _word_bytes(bits_rep + bits_def)
    rows = int(io.page.length)
    fixed = layout.WhichOneof("details") == "bits_per_value"
    width = int(layout.bits_per_value) // 8 if fixed else int(layout.bits_per_offset) // 8
    if fixed and int(layout.bits_per_value) % 8:
        raise unsupported(io, f"full-zip values of {int(layout.bits_per_value)} bits")
    if not fixed and width not in (1, 2, 4, 8):
        raise io.corrupt(f"full-zip lengths of {width * 8} bits")
    limit = repdef.visible_limit(layout.layers)
    both = bits_rep > 0 and bits_def > 0
    if fixed and not bits_rep:  # one entry per row, all the same size
        stride = cw + width
        if rows * stride > u8.size:
            raise io.corrupt("full-zip values run past the page")
        pos = np.arange(rows, dtype=np.int64) * stride
        word = _le(u8, pos, cw)
        return _Entries(None, word if bits_def else None, np.ones(rows, bool), pos + cw, np.full(rows, width))
    bounds = _row_starts(io, rows, u8.size)
    cur = bounds[:-1].copy()
    end = bounds[1:]
    active = np.flatnonzero(cur < end)
    parts = []
    while active.size:
        pos = cur[active]
        if int(pos.max()) + cw > u8.size:
            raise io.corrupt("full-zip control word past the page")
        word = _le(u8, pos, cw)
        rep_l = (word >> bits_def) if bits_rep else None
        def_l = (word & ((1 << bits_def) - 1)) if bits_def else None
        visible = (def_l <= limit) if both and def_l is not None else np.ones(pos.size, bool)
        if fixed:
            value_len = np.where(visible, width, 0)
            value_at = pos + cw
            size = cw + value_len
        else:
            has = visible & (def_l == 0) if def_l is not None else visible
            at = pos + cw
            length = np.zeros(pos.size, np.int64)
            if has.any():
                if int(at[has].max()) + width > u8.size:
                    raise io.corrupt("full-zip value length past the page")
                length[has] = _le(u8, at[has], width)
            value_at = np.where(has, at + width, at)
            value_len = length
            size = cw + np.where(has, width + length, 0)
        parts.append((pos, rep_l, def_l, visible, value_at, value_len))
        cur[active] = pos + size
        over = cur[active] > end[active]
        if over.any():
            raise io.corrupt("a full-zip row runs past the next row's start")
        active = active[cur[active] < end[active]]
    if not parts:
        empty = np.zeros(0, np.int64)
        return _Entries(None, None, np.zeros(0, bool), empty, empty)
    order = np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")

    def cat(k: int) -> np.ndarray:
        return np.concatenate([p[k] for p in parts])[order]

    return _Entries(cat(1) if bits_rep else None, cat(2) if bits_def else None, cat(3), cat(4), cat(5))


def _full_zip_values(layout: Any, io: PageIO, u8: np.ndarray, e: _Entries, dtype: pa.DataType) -> pa.Array:
    """The visible values of a full-zip page (nulls not applied)."""
    at, lengths = e.value_at[e.visible], e.value_len[e.visible]
    n = int(at.size)
    if n and int((at + lengths).max()) > u8.size:
        raise io.corrupt("full-zip values run past the page")
    body = batch21.join(memoryview(u8.data), at, lengths)
    if layout.WhichOneof("details") == "bits_per_value":
        return to_arrow(decode_values(layout.value_compression, [body], n, io), dtype, n, io)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = decode_per_value(layout.value_compression, Var(body, offsets), io)
    return to_arrow(values, dtype, n, io)


def _full_zip_levels(
    layout: Any, io: PageIO, dtype: pa.DataType
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array]:
    u8 = np.frombuffer(io.whole(0), np.uint8)
    entries = _walk_full_zip(layout, io, u8)
    return entries.rep, entries.defs, _full_zip_values(layout, io, u8, entries, dtype)


def full_zip(layout: Any, io: PageIO, dtype: pa.DataType) -> pa.Array:
    """A full-zip page of a column without nesting."""
    rep, defs, values = _full_zip_levels(layout, io, dtype)
    if rep is not None:
        raise io.corrupt("a column without lists has repetition levels")
    if defs is not None:
        values = with_validity(values, defs == 0)
    return values


# -- pages -------------------------------------------------------------------------------------


# -- blob layout ------------------------------------------------------------------------------


def _blob_descriptors(layout: Any, io: PageIO, large: bool) -> np.ndarray:
    """The (position, size) pair of every level of a blob page, as an (n, 2) int64 array."""
    inner = layout.inner_layout
    if inner.WhichOneof("layout") != "mini_block_layout":
        raise unsupported(io, f"blob descriptors in a {inner.WhichOneof('layout')!r} page")
    mini = type(inner.mini_block_layout)()
    mini.CopyFrom(inner.mini_block_layout)
    comp = mini.value_compression
    if comp.WhichOneof("compression") == "packed_struct":
        if list(comp.packed_struct.bits_per_value) != [64, 64]:
            raise io.corrupt("blob descriptors are not two 64-bit fields")
        mini.value_compression.CopyFrom(comp.packed_struct.values)
    if len(io.page.buffer_offsets) < 2:
        raise io.corrupt("blob page without metadata and data buffers")
    table = _chunk_table(mini, io.whole(0), io.locate(1)[1], large, io)
    got = _decode_chunks(mini, io, table, np.arange(table.counts.size), large)
    if not isinstance(got.values, Fixed) or got.values.bits != 128:
        raise io.corrupt("blob descriptors are not 128 bits wide")
    pairs = np.frombuffer(got.values.data, np.uint64, got.count * 2).reshape(-1, 2)
    return pairs.astype(np.int64)


def _blob_levels(
    layout: Any, io: PageIO, dtype: pa.DataType, large: bool, runs: Runs
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array, np.ndarray | None]:
    """A blob page: descriptors in an inner page, the blob bytes wherever they point.

    A descriptor with size 0 and a non-zero position is a level entry instead of a blob: the
    position holds the repetition level (low 16 bits) and definition level (next 16 bits). Only
    the blobs of the selected rows are fetched when the column has no lists.
    """
    desc = _blob_descriptors(layout, io, large)
    pos, size = desc[:, 0], desc[:, 1]
    special = (size == 0) & (pos != 0)
    rep_all = np.where(special, pos & 0xFFFF, 0)
    def_all = np.where(special, (pos >> 16) & 0xFFFF, 0)
    layers = list(layout.layers)
    rep = rep_all if bool(rep_all.any()) else None
    defs = def_all if layers != [repdef.ALL_VALID_ITEM] else None
    positions = None
    if rep is None and not runs.is_span(0, len(desc)):
        keep = runs.positions()
        if keep.size and int(keep.max()) >= len(desc):
            raise io.corrupt(f"{len(desc)} blob descriptors for a page of {io.page.length} rows")
        pos, size, def_all = pos[keep], size[keep], def_all[keep]
        defs = def_all if defs is not None else None
        positions = np.arange(keep.size)
    visible = def_all <= repdef.visible_limit(layers)
    fetch = visible & (def_all == 0) & (size > 0)
    if bool(np.any(pos[fetch] + size[fetch] > io.source.size())) or bool(np.any(pos[fetch] < 0)):
        raise io.corrupt("a blob lies beyond the end of the file")
    ranges = list(zip(pos[fetch].tolist(), size[fetch].tolist()))
    body = b"".join(io.source.read_ranges(ranges)) if ranges else b""
    lengths = np.where(fetch, size, 0)[visible]
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return rep, defs, to_arrow(Var(body, offsets), dtype, int(lengths.size), io), positions


def _layout_kind(layout: Any, io: PageIO) -> str:
    """Which layout a page uses; a layout this reader does not know is named by its field number."""
    kind = layout.WhichOneof("layout")
    if kind is None:
        numbers = sorted({f.field_number for f in UnknownFieldSet(layout)})
        what = f"page layout number {numbers[0]}" if numbers else "a page without a layout"
        raise UnsupportedFormatError(f"{io.what}: {what} is not known to this reader", path=io.path)
    return str(kind)


def _flat(layout: Any, io: PageIO) -> bool:
    """Whether a page of a column without nesting can take the fast path."""
    kind = _layout_kind(layout, io)
    if kind == "mini_block_layout":
        return not layout.mini_block_layout.HasField("rep_compression")
    if kind == "constant_layout":
        return not _has_level_buffers(layout.constant_layout, io)
    return kind == "full_zip_layout"


def decode_page(layout: Any, io: PageIO, dtype: pa.DataType, large_chunks: bool, runs: Runs) -> pa.Array:
    """The rows ``runs`` of a 2.1/2.2 page of a column without nesting."""
    if not _flat(layout, io):
        return decode_nested_page(layout, io, [pa.field("value", dtype)], large_chunks, runs)
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        return mini_block(layout.mini_block_layout, io, dtype, large_chunks, runs)
    if kind == "constant_layout":
        arr = constant(layout.constant_layout, io, dtype)
    else:
        arr = full_zip(layout.full_zip_layout, io, dtype)
    if len(arr) != io.page.length:
        raise io.corrupt(f"page decodes to {len(arr)} rows, its metadata says {io.page.length}")
    return arr if runs.is_span(0, len(arr)) else arr.take(pa.array(runs.positions()))


def decode_nested_page(
    layout: Any, io: PageIO, path: Sequence[pa.Field], large_chunks: bool, runs: Runs
) -> pa.Array:
    """The rows ``runs`` of a page of the leaf at the end of ``path`` (top-level field first).

    The result is the Arrow array of the whole path, with structs holding only this leaf (see
    :func:`repdef.merge`).
    """
    kind = _layout_kind(layout, io)
    dtype = path[-1].type
    if kind == "mini_block_layout":
        inner = layout.mini_block_layout
        rep, defs, values, positions = _mini_block_levels(inner, io, dtype, large_chunks, runs)
    elif kind == "constant_layout":
        inner = layout.constant_layout
        rep, defs, values = _constant_levels(inner, io, dtype)
        positions = None
    elif kind == "full_zip_layout":
        inner = layout.full_zip_layout
        rep, defs, values = _full_zip_levels(inner, io, dtype)
        positions = None
    elif kind == "blob_layout":
        inner = layout.blob_layout
        rep, defs, values, positions = _blob_levels(inner, io, dtype, large_chunks, runs)
    else:
        raise unsupported(io, f"page layout {kind!r}")
    try:
        levels = repdef.unravel(rep, defs, list(inner.layers), len(values))
        if positions is not None:
            arr = repdef.assemble(path, levels, values, with_validity)
            return arr.take(pa.array(positions))
        if levels[0].length != io.page.length:
            raise repdef.LevelError(f"levels describe {levels[0].length} rows, the page has {io.page.length}")
        arr = repdef.assemble(path, levels, values, with_validity)
    except repdef.LevelError as exc:
        raise io.corrupt(str(exc)) from exc
    return arr if runs.is_span(0, len(arr)) else arr.take(pa.array(runs.positions()))
