"""Mini-block pages of Lance 2.1/2.2: chunks of a few thousand values, each with its own levels and
compressed buffers (u16 chunk words in 2.1, u32 in 2.2), an optional dictionary and, under lists,
a repetition index that says which rows start in which chunk.

Only the chunks that hold the selected rows are read and decoded; the chunks' buffers are decoded
together (:mod:`batch21`) where their compression allows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.file import utf8
from lance_table.file.arrow import with_validity
from lance_table.file.arrow_take import filter_rows, sliced, take
from lance_table.file.compression import bitpacking, fsst
from lance_table.file.pageio import PageIO
from lance_table.file.runs import Runs
from lance_table.file.v2_1 import batch, batch_runs, kept_flat
from lance_table.file.v2_1.chunk_headers import ChunksRead, parse_chunks
from lance_table.file.v2_1.compress import decode_block, decode_values
from lance_table.file.v2_1.values import Fixed, Values, Var, concat_values, expand, offsets_of, to_arrow
from lance_table.storage.sources import read_spans


@dataclass
class Chunks:
    """The chunk table of a mini-block page."""

    byte_starts: np.ndarray  # n + 1
    item_starts: np.ndarray  # n + 1
    counts: np.ndarray  # items per chunk


# Values one mini-block chunk may hold: pylance writes at most 4096; a chunk's levels are counted
# in 16 bits, so more than 2^16 is damage.
MAX_CHUNK_VALUES = 1 << 16


def chunk_table(layout: Any, meta: memoryview, data_len: int, large: bool, io: PageIO) -> Chunks:
    n_items = int(layout.num_items)
    word_type = np.uint32 if large else np.uint16
    words = np.frombuffer(meta, word_type, len(meta) // np.dtype(word_type).itemsize).astype(np.int64)
    chunk_bytes = ((words >> 4) + 1) * 8
    counts = np.left_shift(1, words & 0xF)
    if counts.size:
        last = n_items - int(counts[:-1].sum())
        if not 0 <= last <= MAX_CHUNK_VALUES:
            raise io.corrupt(f"mini-block chunks do not describe the page's {n_items} values")
        counts[-1] = last
    elif n_items:
        raise io.corrupt(f"a mini-block page of {n_items} values has no chunks")
    byte_starts = np.zeros(words.size + 1, np.int64)
    np.cumsum(chunk_bytes, out=byte_starts[1:])
    item_starts = np.zeros(words.size + 1, np.int64)
    np.cumsum(counts, out=item_starts[1:])
    if (counts.size and int(counts[-1]) < 0) or int(byte_starts[-1]) > data_len or item_starts[-1] != n_items:
        raise io.corrupt(f"mini-block chunks do not describe the page's {n_items} values")
    return Chunks(byte_starts, item_starts, counts)


@dataclass
class _Decoded:
    """Chunks decoded: their levels (None when the page has none) and their values."""

    rep: np.ndarray | None
    defs: np.ndarray | None
    values: Values
    count: int
    level_counts: np.ndarray  # levels per decoded chunk
    picked: bool = False  # values are only the picked ones (count is still all the chunks')
    defs_picked: bool = False  # definition levels are only those of the picked values


# A selection of chunks holding less than this share of a page's bytes reads just those chunks.
_PARTIAL_READ_SHARE = 0.5


def _chosen_data(io: PageIO, table: Chunks, chosen: np.ndarray) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """The bytes of the chunks ``chosen`` (sorted chunk numbers) of a mini-block page, and where
    each of them starts and ends in those bytes.

    A run of consecutive chunks (a span of rows) is read as one range; a small selection of
    scattered chunks (a take) reads only those; otherwise the whole data buffer is read once.
    """
    starts = table.byte_starts[chosen]
    ends = table.byte_starts[chosen + 1]
    sizes = ends - starts
    total = int(table.byte_starts[-1])
    if chosen.size == table.counts.size or io.locate(1) in io._whole:  # all, or already in hand
        return io.whole(1), starts, ends
    offset = io.locate(1)[0]
    if chosen.size and int(chosen[-1]) - int(chosen[0]) + 1 == chosen.size:  # a run of chunks: one read
        lo = int(starts[0])
        return memoryview(io.byte_runs(1, Runs.span(lo, int(ends[-1]) - lo))), starts - lo, ends - lo
    if int(sizes.sum()) >= _PARTIAL_READ_SHARE * total:
        return io.whole(1), starts, ends
    return _spans_read(io, offset, starts, ends)


def _spans_read(
    io: PageIO, offset: int, starts: np.ndarray, ends: np.ndarray
) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """Chunks (sorted byte ``starts`` and ``ends`` in the data buffer at file ``offset``) read as
    coalesced spans (:func:`read_spans`); where each chunk lies in the spans read."""
    return read_spans(io.source, starts + offset, ends + offset)


def read_chunks(
    layout: Any,
    io: PageIO,
    table: Chunks,
    chosen: np.ndarray,
    large: bool,
    def_pick: np.ndarray | None = None,
) -> ChunksRead:
    """Read the chunks ``chosen`` (sorted chunk numbers) of a mini-block page and decode their
    levels; :func:`chunk_values` then decodes their values.

    ``def_pick`` (a page without repetition, where every level is a value): decode only the
    definition levels at these sorted positions among the chunks' values, where the encoding
    allows it (``defs_picked`` then says so)."""
    data, starts, ends = _chosen_data(io, table, chosen)
    return parse_chunks(layout, data, starts, ends, table.counts[chosen], large, io, def_pick)


def chunk_values(
    layout: Any,
    read: ChunksRead,
    io: PageIO,
    pick: np.ndarray | None = None,
    share: float = 0.0,
    floor: int | None = None,
) -> tuple[Values, bool]:
    """The values of chunks read by :func:`read_chunks`, and whether they are only the ``pick``
    ones (sorted positions among the chunks' values, each below their total): picked values are
    decoded alone where the encoding allows it and, where picking costs more per value than
    decoding whole chunks, ``share`` (picked values over the chunks' values) is small enough.
    Values below ``floor`` may come back as 0 (see :func:`batch.values`)."""
    data, buf_at, sizes, counts = read.data, read.buf_at, read.sizes, read.counts
    if len(buf_at) == 1 and counts.size and pick is not None:
        got = batch.pick_values(layout.value_compression, data, buf_at[0], sizes[0], counts, pick, io, share)
        if got is not None:
            return got, True
    if len(buf_at) == 1 and counts.size:
        # (no levels viewing the chunks: their values may be joined where they lie)
        reuse = read.rep is None and read.defs is None
        got = batch.values(layout.value_compression, data, buf_at[0], sizes[0], counts, io, floor, reuse)
        if got is not None:
            return got, False
    enc = layout.value_compression
    if len(buf_at) == 2 and counts.size and enc.WhichOneof("compression") == "rle":
        runs = batch_runs.chunk_runs(enc.rle, data, buf_at[0], sizes[0], buf_at[1], sizes[1], counts, io)
        got = batch_runs.values(runs)
        if got is not None:
            return got, False
    pieces = []
    for k in range(counts.size):
        buffers: list[bytes | memoryview] = [
            data[int(b[k]) : int(b[k]) + int(size[k])] for b, size in zip(buf_at, sizes)
        ]
        pieces.append(decode_values(layout.value_compression, buffers, int(counts[k]), io))
    return (concat_values(pieces, io) if pieces else Fixed(b"", 8)), False


def decode_chunks(
    layout: Any,
    io: PageIO,
    table: Chunks,
    chosen: np.ndarray,
    large: bool,
    pick: np.ndarray | None = None,
    share: float = 0.0,
    floor: int | None = None,
) -> _Decoded:
    """Decode the chunks ``chosen`` (sorted chunk numbers) of a mini-block page: their levels,
    and their values (see :func:`chunk_values` for ``pick``, ``share`` and ``floor``, and :func:`read_chunks`
    for the definition levels of just the picked values)."""
    read = read_chunks(layout, io, table, chosen, large, pick)
    values, picked = chunk_values(layout, read, io, pick, share, floor)
    count = int(read.counts.sum())
    return _Decoded(read.rep, read.defs, values, count, read.level_counts, picked, read.defs_picked)


def dictionary_of(layout: Any, io: PageIO, raw: bytes | memoryview | None = None) -> Values | None:
    """The dictionary of a mini-block page (None: it has none), from its buffer's bytes ``raw``
    when the caller has read them."""
    if not layout.HasField("dictionary"):
        return None
    if len(io.page.buffer_offsets) < 3:
        raise io.corrupt("dictionary page without a dictionary buffer")
    items_n = int(layout.num_dictionary_items)
    if items_n > max(int(layout.num_items) + 1, io.max_items()):
        raise io.corrupt(f"a dictionary of {items_n} items")
    return decode_block(layout.dictionary, io.whole(2) if raw is None else raw, items_n, io)


def _values_array(
    values: Values,
    n: int,
    dtype: pa.DataType,
    dictionary: Values | None,
    items_n: int,
    valid: np.ndarray | None,
    io: PageIO,
) -> pa.Array:
    """Decoded values as Arrow (without nulls), resolving dictionary indices. FSST strings that
    decompress to nothing but ASCII need no UTF-8 check: the page is marked checked."""
    if dictionary is None:
        if isinstance(values, Var) and values.symbols is not None:
            values = expand(values, io)
            io.strings_checked |= values.ascii
        return to_arrow(values, dtype, n, io)
    if not isinstance(values, Fixed) or values.bits not in bitpacking.DTYPES:
        raise io.corrupt("dictionary indices are not fixed-width integers")
    idx = np.frombuffer(values.data, bitpacking.DTYPES[values.bits])[:n]
    value_type = dtype.value_type if pa.types.is_dictionary(dtype) else dtype
    items = to_arrow(dictionary, value_type, items_n, io)
    if utf8.holds_strings(value_type) and utf8.problem_of(items, value_type) is None:
        io.strings_checked = True  # the values are the dictionary's (else the rows read are checked)
    if idx.size and int(idx.max()) >= items_n:  # one pass when every index is in the dictionary
        past = idx >= items_n
        if valid is None or bool(np.any(past & valid)):
            raise io.corrupt("dictionary index past the dictionary")
        idx = np.where(past, 0, idx)
    if pa.types.is_dictionary(dtype):
        if io.filtered:  # the dictionary would outlive the read as a view of the file's map
            items = pa.concat_arrays([items])
        return pa.DictionaryArray.from_arrays(pa.array(idx).cast(dtype.index_type), items)
    return take(items, pa.array(idx))


def mini_block(
    layout: Any,
    io: PageIO,
    dtype: pa.DataType,
    large_chunks: bool,
    runs: Runs | None = None,
    floor: int | None = None,
    keep: pa.BooleanArray | None = None,
) -> pa.Array:
    """Decode a mini-block page of a column without nesting: every row, or only ``runs``.

    With ``runs`` only the chunks that hold those rows are decoded (the chunk metadata says how
    many values each chunk holds), and the result has exactly the selected rows. Integer values
    below ``floor`` may come back as 0 (not dictionary indices: they say nothing of the values).
    ``keep`` (a mask over the rows of ``runs``, one span, or of the page) leaves only the rows it
    marks: dictionary indices are selected before their values are looked up.
    """
    n_items = int(layout.num_items)
    if len(io.page.buffer_offsets) < 2:
        raise io.corrupt("mini-block page without metadata and data buffers")
    if n_items != io.page.length:
        raise io.corrupt(f"mini-block page of {io.page.length} rows holds {n_items} values")
    table = chunk_table(layout, io.whole(0), io.locate(1)[1], large_chunks, io)
    dictionary = dictionary_of(layout, io)
    local = None
    cut: tuple[int, int] | None = None  # one span of rows: its chunks decoded whole, then sliced
    if runs is None or runs.is_span(0, n_items):
        chosen = np.arange(table.counts.size)
    elif runs.count == 1:
        chosen, cut = span_chunks(table, int(runs.starts[0]), int(runs.lengths[0]), io)
    else:
        positions = runs.positions()
        if positions.size and int(positions[-1]) >= n_items:
            raise io.corrupt(f"row {int(positions[-1])} is past the page's {n_items} values")
        chosen, local = rows_in_chunks(table, positions)
    if keep is not None and local is None and dictionary is None and kept_flat.applies(layout):
        # values of one width: the kept rows copied once, from the chunks (not joined, then filtered)
        read = read_chunks(layout, io, table, chosen, large_chunks)
        start = cut[0] if cut is not None else 0
        return kept_flat.kept(read, layout.value_compression, start, keep, dtype, io)
    # selected rows: decode just those values where the encoding allows it
    share = 0.0 if local is None else local.size / max(int(table.counts[chosen].sum()), 1)
    floor = floor if dictionary is None else None
    got = decode_chunks(layout, io, table, chosen, large_chunks, local, share, floor)
    valid = (got.defs == 0) if got.defs is not None else None
    if valid is not None and not got.defs_picked and valid.size != got.count:
        raise io.corrupt(f"{valid.size} definition levels for {got.count} values")
    fsst_values = isinstance(got.values, Var) and got.values.symbols is not None
    if keep is not None and local is None and (dictionary is not None or fsst_values):
        # only the kept rows' dictionary indices are looked up, or their FSST strings decompressed
        start = cut[0] if cut is not None else 0
        if dictionary is not None:
            kept: Values = _kept_fixed(got.values, start, keep, io)
        else:
            assert isinstance(got.values, Var)
            kept = _kept_var(got.values, start, keep, io)
        if valid is not None:
            valid = np.asarray(pa.array(valid[start : start + len(keep)]).filter(keep))
        items_n = int(layout.num_dictionary_items)
        arr = _values_array(kept, keep.true_count, dtype, dictionary, items_n, valid, io)
        return with_validity(arr, valid) if valid is not None and not valid.all() else arr
    arr, valid = values_at(
        got.values,
        got.count,
        got.picked,
        local,
        layout,
        dictionary,
        dtype,
        valid,
        io,
        valid_cut=got.defs_picked,
    )
    if valid is not None and not valid.all():
        arr = with_validity(arr, valid)
    arr = sliced(arr, *cut) if cut is not None else arr
    return filter_rows(arr, keep) if keep is not None else arr


def span_chunks(table: Chunks, start: int, length: int, io: PageIO) -> tuple[np.ndarray, tuple[int, int]]:
    """The chunks holding items ``[start, start + length)``, and where those items lie among the
    chunks' values decoded back to back (their offset and length)."""
    if start < 0 or length < 1 or start + length > int(table.item_starts[-1]):
        raise io.corrupt(
            f"rows {start}..{start + length} are past the page's {int(table.item_starts[-1])} values"
        )
    first = int(np.searchsorted(table.item_starts, start, "right")) - 1
    last = int(np.searchsorted(table.item_starts, start + length, "left"))
    return np.arange(first, last), (start - int(table.item_starts[first]), length)


def values_at(
    values: Values,
    count: int,
    picked: bool,
    local: np.ndarray | None,
    layout: Any,
    dictionary: Values | None,
    dtype: pa.DataType,
    valid: np.ndarray | None,
    io: PageIO,
    valid_cut: bool = False,
) -> tuple[pa.Array, np.ndarray | None]:
    """Decoded chunk values as Arrow (without nulls): all ``count`` of them, or those at
    ``local`` (sorted positions among them; ``picked`` says the values are already just those);
    with the validity ``valid`` of all the values cut the same way (``valid_cut``: ``valid`` is
    already that of the values at ``local``)."""

    def cut(valid: np.ndarray | None) -> np.ndarray | None:
        return valid[local] if valid is not None and not valid_cut else valid

    if local is not None and picked:
        count = local.size
        valid = cut(valid)
        local = None
    if local is not None:
        if isinstance(values, Var) and dictionary is None and local.size * 4 < count:
            # Few rows of many strings: pick them before decompressing (each FSST string is
            # compressed on its own), then the rows are already in place.
            values, count = pick(values, local, io), local.size
            valid = cut(valid)
            local = None
        elif dictionary is not None:
            # Dictionary indices: pick the rows before looking their values up
            values, count = _pick_fixed(values, local, io), local.size
            valid = cut(valid)
            local = None
    # the validity only matters for dictionary indices, which are picked by now
    shown_valid = valid if local is None else None
    arr = _values_array(values, count, dtype, dictionary, int(layout.num_dictionary_items), shown_valid, io)
    if local is not None:
        arr = take(arr, pa.array(local))
        valid = cut(valid)
    return arr, valid


def rows_in_chunks(table: Chunks, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The chunks holding the sorted item ``positions`` (below the page's count), and where each
    position lands among the values of just those chunks, decoded back to back."""
    per_chunk = np.diff(np.searchsorted(positions, table.item_starts))
    chosen = np.flatnonzero(per_chunk)
    base = np.zeros(chosen.size, np.int64)
    np.cumsum(table.counts[chosen][:-1], out=base[1:])
    # a position moves by its chunk's start among the decoded values less its start in the page
    shift = np.repeat(base - table.item_starts[chosen], per_chunk[chosen])
    return chosen, positions + shift


def pick(values: Var, items: np.ndarray, io: PageIO) -> Var:
    """The variable-width values at ``items``, in that order (still compressed, if they were)."""
    offsets = values.offsets
    if items.size and int(items.max()) + 1 >= offsets.size:
        raise io.corrupt(f"value {int(items.max())} of {offsets.size - 1} values is missing")
    starts = offsets[items]
    lengths = offsets[items + 1] - starts
    if bool(np.any(lengths < 0)) or (offsets.size and int(offsets[-1]) > len(values.data)):
        raise io.corrupt("variable-width offsets are out of order or past their bytes")
    return Var(batch.gather(values.data, starts, lengths), offsets_of(lengths), values.symbols)


def _kept_fixed(values: Values, start: int, keep: pa.BooleanArray, io: PageIO) -> Fixed:
    """The byte-wide fixed-width values from ``start`` on that ``keep`` marks (one per value)."""
    if not isinstance(values, Fixed) or values.bits not in bitpacking.DTYPES:
        raise io.corrupt("dictionary indices are not fixed-width integers")
    words = np.frombuffer(values.data, bitpacking.DTYPES[values.bits])
    if start + len(keep) > words.size:
        raise io.corrupt(f"{words.size} dictionary indices, {start + len(keep)} needed")
    kept = pa.array(words[start : start + len(keep)]).filter(keep)
    return Fixed(batch.as_bytes(kept.to_numpy()), values.bits)


def _kept_var(values: Var, start: int, keep: pa.BooleanArray, io: PageIO) -> Var:
    """The variable-width values from ``start`` on that ``keep`` marks (one per value), still
    compressed: Arrow's filter of their bytes and offsets, once the offsets are checked."""
    n = len(keep)
    offsets = values.offsets
    if start + n >= offsets.size:
        raise io.corrupt(f"{offsets.size - 1} variable-width values, {start + n} needed")
    own = offsets[start : start + n + 1]
    if n and (int(own[0]) < 0 or int(own[-1]) > len(values.data) or fsst.descends(own)):
        raise io.corrupt("variable-width offsets are out of order or past their bytes")
    arr = pa.Array.from_buffers(
        pa.large_binary(),
        n,
        [None, pa.py_buffer(np.ascontiguousarray(own, np.int64)), pa.py_buffer(values.data)],
    )
    kept = arr.filter(keep)
    bufs = kept.buffers()
    kept_offsets = np.frombuffer(bufs[1], np.int64, len(kept) + 1, kept.offset * 8)
    data = bufs[2] if bufs[2] is not None else b""
    return Var(memoryview(data), kept_offsets, values.symbols)


def _pick_fixed(values: Values, items: np.ndarray, io: PageIO) -> Fixed:
    """The byte-wide fixed-width values at ``items``, in that order."""
    if not isinstance(values, Fixed) or values.bits not in bitpacking.DTYPES:
        raise io.corrupt("dictionary indices are not fixed-width integers")
    words = np.frombuffer(values.data, bitpacking.DTYPES[values.bits])
    if items.size and int(items.max()) >= words.size:
        raise io.corrupt(f"index {int(items.max())} of {words.size} dictionary indices is missing")
    return Fixed(batch.as_bytes(words[items]), values.bits)
