"""Decoding of Lance 2.1/2.2 pages (``lance.encodings21.PageLayout``).

Layouts: mini-block (u16 chunk words in 2.1, u32 in 2.2, with dictionaries and repetition /
definition levels), constant (all null, or one value repeated, possibly with levels), full-zip
(fixed or variable width, with control words) and blob pages. Mini-block pages are decoded in
:mod:`miniblock21`; value compressions live in :mod:`compress21` and :mod:`pervalue21`, the decoded
values in :mod:`values21`; the levels are turned back into lists and structs by :mod:`repdef`.

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
from lance_table.file.arrow import rows_of, with_validity
from lance_table.file.arrow_take import filter_rows
from lance_table.file.compression import bitpacking
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import batch, repdef
from lance_table.file.v2_1.chunk_headers import le
from lance_table.file.v2_1.compress import decode_levels, decode_values, unsupported
from lance_table.file.v2_1.miniblock import chunk_table, decode_chunks, mini_block
from lance_table.file.v2_1.miniblock_nested import mini_block_levels
from lance_table.file.v2_1.pervalue import decode_per_value
from lance_table.file.v2_1.values import Fixed, Var, offsets_of, to_arrow
from lance_table.storage.sources import read_joined


def _value_buffer(layout: Any, io: PageIO) -> bool:
    """Whether a constant page keeps its value in page buffer 0 (values too wide to be inline,
    e.g. strings: then the level buffers, if any, follow it)."""
    return not layout.HasField("inline_value") and len(io.page.buffer_offsets) % 2 == 1


def constant_bytes(raw: bytes | memoryview, io: PageIO) -> bytes:
    """The value of a constant page kept in a buffer of its own (``raw``)."""
    # [u32 offset count (2)][u32 offset bytes][u32 value bytes][offsets][value]; a fixed-width
    # value wider than an inline one (pylance 2.2: over 32 bytes) is [u32 1][u32 value bytes][value]
    if len(raw) >= 8 and int(np.frombuffer(raw, np.uint32, 1)[0]) == 1:
        size = int(np.frombuffer(raw, np.uint32, 1, 4)[0])
        if 8 + size > len(raw):
            raise io.corrupt("constant value buffer does not hold its value")
        return bytes(raw[8 : 8 + size])
    if len(raw) < 12:
        raise io.corrupt("constant value buffer too short")
    count, offset_bytes, size = np.frombuffer(raw, np.uint32, 3).astype(np.int64).tolist()
    if count != 2 or offset_bytes not in (8, 16) or 12 + offset_bytes + size > len(raw):
        raise io.corrupt("constant value buffer does not hold one value")
    offsets = np.frombuffer(raw, np.uint32 if offset_bytes == 8 else np.uint64, 2, 12).astype(np.int64)
    if not 0 <= offsets[0] <= offsets[1] <= size:
        raise io.corrupt("constant value offsets are out of order")
    start = 12 + offset_bytes
    return bytes(raw[start + int(offsets[0]) : start + int(offsets[1])])


def _constant_value(layout: Any, dtype: pa.DataType, n: int, io: PageIO) -> pa.Array:
    if _value_buffer(layout, io):
        value = constant_bytes(io.whole(0), io)
        if pa.types.is_fixed_size_binary(dtype):  # (a fixed-width value too wide to be inline)
            return to_arrow(Fixed(value * n, len(value) * 8), dtype, n, io)
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
    starts = np.frombuffer(raw, bitpacking.DTYPES[width * 8], rows + 1).astype(np.int64)
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


def _walk_full_zip(layout: Any, io: PageIO, u8: np.ndarray, bounds: np.ndarray | None = None) -> _Entries:
    """Parse every entry ([control word][value]) of a full-zip page, all rows in step; or, with
    ``bounds`` (where each row starts in ``u8``, plus the end), of some rows' entries back to back.

    Each row's entries are sequential (a value's size says where the next entry starts), so the
    walk advances every row by one entry per round; rounds = the most entries in one row.
    """
    bits_rep, bits_def = int(layout.bits_rep), int(layout.bits_def)
    cw = _word_bytes(bits_rep + bits_def)
    rows = int(io.page.length) if bounds is None else bounds.size - 1
    fixed = layout.WhichOneof("details") == "bits_per_value"
    width = int(layout.bits_per_value) // 8 if fixed else int(layout.bits_per_offset) // 8
    if fixed and int(layout.bits_per_value) % 8:
        raise unsupported(io, f"full-zip values of {int(layout.bits_per_value)} bits")
    if not fixed and width not in (1, 2, 4, 8):
        raise io.corrupt(f"full-zip lengths of {width * 8} bits")
    limit = repdef.visible_limit(layout.layers)
    both = bits_rep > 0 and bits_def > 0
    if fixed and not bits_rep and bounds is None:  # one entry per row, all the same size
        stride = cw + width
        if rows * stride > u8.size:
            raise io.corrupt("full-zip values run past the page")
        pos = np.arange(rows, dtype=np.int64) * stride
        word = le(u8, pos, cw)
        return _Entries(None, word if bits_def else None, np.ones(rows, bool), pos + cw, np.full(rows, width))
    if bounds is None:
        bounds = _row_starts(io, rows, u8.size)
    cur = bounds[:-1].copy()
    end = bounds[1:]
    active = np.flatnonzero(cur < end)
    parts = []
    while active.size:
        pos = cur[active]
        if int(pos.max()) + cw > u8.size:
            raise io.corrupt("full-zip control word past the page")
        word = le(u8, pos, cw)
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
                length[has] = le(u8, at[has], width)
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
    body = batch.join(memoryview(u8.data), at, lengths)
    if layout.WhichOneof("details") == "bits_per_value":
        return to_arrow(decode_values(layout.value_compression, [body], n, io), dtype, n, io)
    values = decode_per_value(layout.value_compression, Var(body, offsets_of(lengths)), io)
    return to_arrow(values, dtype, n, io)


def _full_zip_levels(
    layout: Any, io: PageIO, dtype: pa.DataType
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array]:
    u8 = np.frombuffer(io.whole(0), np.uint8)
    entries = _walk_full_zip(layout, io, u8)
    return entries.rep, entries.defs, _full_zip_values(layout, io, u8, entries, dtype)


# A selection of fewer rows than this share of a full-zip page reads and decodes only their entries.
_FULL_ZIP_ROWS_SHARE = 0.25


def _full_zip_rows(layout: Any, io: PageIO, dtype: pa.DataType, runs: Runs) -> pa.Array | None:
    """The rows ``runs`` of a full-zip page of variable-width values without lists (long strings),
    reading and decoding only their entries, which the repetition index locates; None for other
    pages, for every row, or for scattered rows that are a large share of the page (then it is
    read whole). One span of rows (a scan's share of a page) is one read."""
    if layout.WhichOneof("details") != "bits_per_offset" or int(layout.bits_rep):
        return None
    rows = int(io.page.length)
    if runs.is_span(0, rows) or (runs.count > 1 and runs.total >= _FULL_ZIP_ROWS_SHARE * rows):
        return None
    offset, size = io.locate(0)
    starts = _row_starts(io, rows, size)
    if runs.count and (int(runs.starts.min()) < 0 or runs.end > rows):
        raise io.corrupt(f"rows past the page's {rows} rows")
    if runs.count == 1:
        first, last = int(runs.starts[0]), runs.end
        lo = int(starts[first])
        data = io.byte_runs(0, Runs.span(lo, int(starts[last]) - lo)) if last > first else b""
        bounds = starts[first : last + 1] - lo
    else:
        positions = runs.positions()
        at, end = starts[positions], starts[positions + 1]
        data = read_joined(io.source, np.stack([at + offset, end - at], axis=1))
        bounds = offsets_of(end - at)
    u8 = np.frombuffer(data, np.uint8)
    entries = _walk_full_zip(layout, io, u8, bounds)
    values = _full_zip_values(layout, io, u8, entries, dtype)
    return with_validity(values, entries.defs == 0) if entries.defs is not None else values


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
    table = chunk_table(mini, io.whole(0), io.locate(1)[1], large, io)
    got = decode_chunks(mini, io, table, np.arange(table.counts.size), large)
    if not isinstance(got.values, Fixed) or got.values.bits != 128:
        raise io.corrupt("blob descriptors are not 128 bits wide")
    pairs = np.frombuffer(got.values.data, np.uint64, got.count * 2).reshape(-1, 2)
    return pairs.astype(np.int64)


def _blob_levels(
    layout: Any, io: PageIO, dtype: pa.DataType, large: bool, runs: Runs
) -> tuple[np.ndarray | None, np.ndarray | None, pa.Array, int | None]:
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
    rows_read = None
    if rep is None and not runs.is_span(0, len(desc)):
        keep = runs.positions()
        if keep.size and int(keep.max()) >= len(desc):
            raise io.corrupt(f"{len(desc)} blob descriptors for a page of {io.page.length} rows")
        pos, size, def_all = pos[keep], size[keep], def_all[keep]
        defs = def_all if defs is not None else None
        rows_read = int(keep.size)
    visible = def_all <= repdef.visible_limit(layers)
    fetch = visible & (def_all == 0) & (size > 0)
    if bool(np.any(pos[fetch] + size[fetch] > io.source.size())) or bool(np.any(pos[fetch] < 0)):
        raise io.corrupt("a blob lies beyond the end of the file")
    body = read_joined(io.source, np.stack([pos[fetch], size[fetch]], axis=1))
    lengths = np.where(fetch, size, 0)[visible]
    return rep, defs, to_arrow(Var(body, offsets_of(lengths)), dtype, int(lengths.size), io), rows_read


def _check_layers(inner: Any, io: PageIO) -> None:
    """A page's rep/def layers must all be known kinds (before any level is interpreted)."""
    try:
        repdef.check_layers(inner.layers)
    except repdef.LevelError as exc:
        raise io.corrupt(str(exc)) from exc


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


def selection_buffers(layout: Any, io: PageIO) -> list[int]:
    """The page buffers that reading some rows of a page needs whole before its data: a
    mini-block page's chunk table, dictionary and repetition index (small, one per page)."""
    if layout.WhichOneof("layout") == "full_zip_layout":  # the repetition index of long values
        full = layout.full_zip_layout
        flat_variable = full.WhichOneof("details") == "bits_per_offset" and not int(full.bits_rep)
        return [1] if flat_variable and len(io.page.buffer_offsets) > 1 else []
    if layout.WhichOneof("layout") != "mini_block_layout":
        return []
    mini = layout.mini_block_layout
    n = len(io.page.buffer_offsets)
    wanted = [0]
    if mini.HasField("dictionary"):
        wanted.append(2)
    if int(mini.repetition_index_depth):
        wanted.append(n - 1)
    return [k for k in wanted if k < n]


def decode_page(
    layout: Any,
    io: PageIO,
    dtype: pa.DataType,
    large_chunks: bool,
    runs: Runs,
    floor: int | None = None,
    keep: pa.BooleanArray | None = None,
) -> pa.Array:
    """The rows ``runs`` of a 2.1/2.2 page of a column without nesting (integer values below a
    ``floor`` may read as 0: see :meth:`LanceFileReader.read_runs`); with ``keep`` (a mask over
    those rows, ``runs`` then one span), only the rows it marks."""
    if keep is not None and (not _flat(layout, io) or layout.WhichOneof("layout") != "mini_block_layout"):
        return filter_rows(decode_page(layout, io, dtype, large_chunks, runs, floor), keep)
    if not _flat(layout, io):
        return decode_nested_page(layout, io, [pa.field("value", dtype)], large_chunks, runs)
    _check_layers(getattr(layout, str(layout.WhichOneof("layout"))), io)
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        return mini_block(layout.mini_block_layout, io, dtype, large_chunks, runs, floor, keep)
    if kind == "constant_layout":
        arr = constant(layout.constant_layout, io, dtype)
    else:
        picked = _full_zip_rows(layout.full_zip_layout, io, dtype, runs)
        if picked is not None:
            if len(picked) != runs.total:
                raise io.corrupt(f"{runs.total} rows of a full-zip page decode to {len(picked)}")
            return picked
        arr = full_zip(layout.full_zip_layout, io, dtype)
    if len(arr) != io.page.length:
        raise io.corrupt(f"page decodes to {len(arr)} rows, its metadata says {io.page.length}")
    return rows_of(arr, runs)


def decode_nested_page(
    layout: Any, io: PageIO, path: Sequence[pa.Field], large_chunks: bool, runs: Runs
) -> pa.Array:
    """The rows ``runs`` of a page of the leaf at the end of ``path`` (top-level field first).

    The result is the Arrow array of the whole path, with structs holding only this leaf (see
    :func:`repdef.merge`).
    """
    kind = _layout_kind(layout, io)
    dtype = path[-1].type
    _check_layers(getattr(layout, kind), io)
    if kind == "mini_block_layout":
        inner = layout.mini_block_layout
        rep, defs, values, rows_read = mini_block_levels(inner, io, dtype, large_chunks, runs)
    elif kind == "constant_layout":
        inner = layout.constant_layout
        rep, defs, values = _constant_levels(inner, io, dtype)
        rows_read = None
    elif kind == "full_zip_layout":
        inner = layout.full_zip_layout
        rep, defs, values = _full_zip_levels(inner, io, dtype)
        rows_read = None
    elif kind == "blob_layout":
        inner = layout.blob_layout
        rep, defs, values, rows_read = _blob_levels(inner, io, dtype, large_chunks, runs)
    else:
        raise unsupported(io, f"page layout {kind!r}")
    try:
        levels = repdef.unravel(rep, defs, list(inner.layers), len(values))
        if rows_read is not None:  # the levels are of the rows read, in order
            arr = repdef.assemble(path, levels, values, with_validity)
            if len(arr) != rows_read:
                raise repdef.LevelError(f"levels describe {len(arr)} rows, {rows_read} were read")
            return arr
        if levels[0].length != io.page.length:
            raise repdef.LevelError(f"levels describe {levels[0].length} rows, the page has {io.page.length}")
        arr = repdef.assemble(path, levels, values, with_validity)
    except repdef.LevelError as exc:
        raise io.corrupt(str(exc)) from exc
    return rows_of(arr, runs)
