"""One column of many 2.1/2.2 files decoded in one numpy pass.

A table of many small appends holds thousands of files of a few hundred rows, each column one
page of one mini-block chunk; a table written in fragments of some ten thousand rows holds
columns of one page of a few dozen chunks. Decoding them file by file costs a few dozen numpy
calls per file and column, more than the values themselves. Here the files' bytes are joined
into one buffer (each at an aligned place), the chunk tables and every chunk's header are read
with a few numpy gathers, and the chunks of all files that share an encoding are decoded as the
chunks of one page would be (see :mod:`batch`): the cost per file is a read and a few list
appends. A file of pages of many chunks is batched only when small or by a read of most of its rows
(:func:`worth_batching`); otherwise a take picks its rows file by file. Fields with structs and
lists (their leaf pages of one chunk, see :mod:`small_nested`) and constant pages without levels
(see :mod:`small_constant`) are batched too.

:func:`layout` says what a file's read of some columns looks like (kept per reader and column
selection); :func:`decode` returns None when anything does not check out, and the caller then
reads the files one by one, which also says what is wrong with a damaged one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_table.errors import LanceTableError
from lance_table.file.arrow import with_validity
from lance_table.file.arrow_take import take
from lance_table.file.compression import bitpacking
from lance_table.file.container import FileVersion
from lance_table.file.field_shapes import FLAT, NESTED, field_shape
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import batch, batch_runs, small_constant, small_nested
from lance_table.file.v2_1.byteranges import exclusive_cumsum, spans
from lance_table.file.v2_1.compress import decode_block
from lance_table.file.v2_1.layout import is_packed_struct
from lance_table.file.v2_1.miniblock_small import SmallPage, plan
from lance_table.file.v2_1.values import Fixed, Var, byte_width, to_arrow

if TYPE_CHECKING:
    from lance_table.file.reader import LanceFileReader

#: where each file's bytes start in the joined buffer: a multiple of this (the values of inline
#: bitpacking are read as aligned words)
ALIGN = 64
#: variable-width bytes of one column of a batch above which the files are read one by one
#: (32-bit Arrow offsets)
MAX_VAR_BYTES = 2**31 - 1
# Untyped errors damaged bytes may raise (the files are then read one by one, which reports them).
_ERRORS = (LanceTableError, IndexError, KeyError, OverflowError, ValueError, TypeError, pa.ArrowException)
# interned encoding keys: chunks of files whose keys are the same object decode as one batch
_KEYS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_MAX_KEYS = 4096
#: pages of several chunks are batched up to this many rows (a fragment of a few read ranges)
MAX_PAGE_ROWS = 1 << 18
#: bytes between a file's selected pages a batch reads along with them (pages of many chunks)
SPAN_SLACK = 64 * 1024
#: a read of at least this share of a file's rows reads its pages of many chunks whole, in a
#: batch; fewer rows (a take) are picked from their chunks by the file's own reader
DENSE_ROWS = 0.5
#: a span of pages of many chunks this small is read and decoded whole by any read, even of a few
#: rows: one request brings it as fast as its chunks, and decoding it in a batch costs less than
#: the file's own reader picking the rows from their chunks (a take of a few rows of each of
#: hundreds of small fragments)
SMALL_SPAN_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class ColumnLayout:
    """Where one column's page of one file is (relative to the file's span) and how it decodes."""

    meta_at: int  # the page's chunk table (one word)
    data_at: int  # the page's one chunk
    data_size: int
    page: SmallPage
    encoding: Any  # the value compression (a protobuf message)
    key: tuple[Any, ...]  # interned: same object for the same encoding
    chunks: int = 1  # mini-block chunks of the page (its chunk table's words)
    #: a page of dictionary indices: its dictionary's place and size, item count and compression
    dict_at: int = -1
    dict_size: int = 0
    dict_items: int = 0
    dict_encoding: Any = None


@dataclass(frozen=True, slots=True)
class FileLayout:
    """A read of some columns of a small file: the byte span holding their pages, and each page."""

    start: int
    length: int
    num_rows: int
    columns: tuple[ColumnLayout | small_nested.NestedLayout | small_constant.ConstantLayout, ...]
    #: the most chunks of a page: a file of pages of one chunk is read whole by any read; one of
    #: pages of many chunks only by a read of most of its rows (see :func:`worth_batching`)
    chunks: int = 1


def layout(reader: LanceFileReader, names: Sequence[str]) -> FileLayout | None:
    """The layout of a read of the file's columns ``names`` when every one is a column without
    nesting stored as one page of one small chunk (see :mod:`miniblock_small`), of values or of
    indices into a dictionary, or as a constant page, or a field with nesting whose leaves are
    such pages (see :mod:`small_nested`); else None. Kept per reader and selection."""
    key = tuple(names)
    cache = reader._many_layouts
    try:
        return cache[key]
    except KeyError:
        pass
    if len(cache) >= 16:
        cache.clear()
    found = cache[key] = _layout(reader, names)
    return found


def _layout(reader: LanceFileReader, names: Sequence[str]) -> FileLayout | None:
    meta = reader.metadata
    if meta.version is FileVersion.V2_0 or not meta.num_rows:
        return None
    large = meta.version is FileVersion.V2_2
    word = 4 if large else 2
    by_name = {n.name: n for n in reader._roots}
    cols: list[tuple[Any, ...]] = []
    nested: dict[int, tuple[small_nested.NestedLayout, list[tuple[int, int]]]] = {}
    constants: dict[int, small_constant.ConstantLayout] = {}
    for name in names:
        node = by_name.get(name)
        if node is not None and field_shape(node) == NESTED and not is_packed_struct(node):
            try:
                got = small_nested.layout(reader, node, large, _interned)
            except _ERRORS:
                return None
            if got is None:
                return None
            nested[len(cols)] = got
            cols.append((tuple(got[1]), None, None, got[0].key, 1))
            continue
        if node is None or field_shape(node) != FLAT or pa.types.is_dictionary(node.arrow_type):
            return None
        try:
            col = reader._column(node)
            if len(col.page_starts) != 2 or col.num_values != meta.num_rows:
                return None
            encoding = col.encoding(0, reader._stored)
            if encoding.WhichOneof("layout") == "constant_layout":
                const = small_constant.layout(encoding, col.buffers(0), 1, node.arrow_type, _interned)
                if const is None:
                    return None
                constants[len(cols)] = const[0]
                cols.append((tuple(const[1]), None, None, const[0].key, 1))
                continue
            form = _form(encoding, node.arrow_type, large)
            buffers = col.buffers(0)
            if form is None or len(buffers) != (2 if form[0].dictionary is None else 3):
                return None
            page, value_enc, interned = form
            chunks, rest = divmod(buffers[0][1], word)
            if rest or not chunks or (chunks > 1 and page.num_items > MAX_PAGE_ROWS):
                return None
            if page.num_items != meta.num_rows or not 0 < page.num_items <= max(1 << 16, MAX_PAGE_ROWS):
                return None
        except _ERRORS:
            return None
        cols.append((buffers, page, value_enc, interned, chunks))
    if not cols:
        return None
    start = min((o for b, *_ in cols for o, _ in b), default=0)
    end = max((o + s for b, *_ in cols for o, s in b), default=0)
    needed = sum(s for b, *_ in cols for _, s in b)
    if max(c[-1] for c in cols) > 1 and end - start > 2 * needed + SPAN_SLACK:
        return None  # the pages lie far apart: their span would read much that is not theirs
    return FileLayout(
        start,
        end - start,
        meta.num_rows,
        tuple(
            small_nested.shifted(nested[c][0], start)
            if c in nested
            else small_constant.shifted(constants[c], start)
            if c in constants
            else _column_layout(b, start, page, value_enc, k, chunks)
            for c, (b, page, value_enc, k, chunks) in enumerate(cols)
        ),
        max(c[-1] for c in cols),
    )


def _form(layout: Any, dtype: pa.DataType, large: bool) -> tuple[SmallPage, Any, tuple[Any, ...]] | None:
    """The page description, value compression and interned encoding key of a column's page
    layout (see :func:`_layout`), or None when a batch does not decode it. Kept per layout
    message: the files of a dataset share theirs (see ``container.unpack_encoding``)."""
    key = (id(layout), dtype, large)
    hit = _FORMS.get(key)
    if hit is not None and hit[0] is layout:
        return hit[1]
    page = plan(layout, large)
    if page is None and pa.types.is_fixed_size_list(dtype):
        page = _list_page(layout, dtype, large)
    found: tuple[SmallPage, Any, tuple[Any, ...]] | None = None
    if page is not None:
        enc = layout.mini_block_layout
        value_enc = enc.value_compression
        defs = enc.def_compression.SerializeToString() if enc.HasField("def_compression") else None
        dictionary = enc.dictionary.SerializeToString() if page.dictionary is not None else None
        ident = (large, value_enc.SerializeToString(), defs, tuple(enc.layers), dictionary)
        found = (page, value_enc, _interned(ident))
    if len(_FORMS) >= _MAX_KEYS:
        _FORMS.clear()
    _FORMS[key] = (layout, found)  # (the layout is kept: its id stays its own)
    return found


# the forms of page layouts, by the layout message's id (see _form)
_FORMS: dict[tuple[Any, ...], tuple[Any, tuple[SmallPage, Any, tuple[Any, ...]] | None]] = {}


def _interned(ident: tuple[Any, ...]) -> tuple[Any, ...]:
    """One object per encoding key: chunks of files whose keys are the same object decode as one."""
    interned = _KEYS.get(ident)
    if interned is None:
        if len(_KEYS) >= _MAX_KEYS:
            _KEYS.clear()
        interned = _KEYS.setdefault(ident, ident)
    return interned


def _column_layout(
    buffers: Sequence[tuple[int, int]], start: int, page: SmallPage, value_enc: Any, key: Any, chunks: int
) -> ColumnLayout:
    """A page's place relative to its file's span (``start``) and how it decodes."""
    (meta_at, _), (data_at, data_size) = buffers[0], buffers[1]
    found = ColumnLayout(meta_at - start, data_at - start, data_size, page, value_enc, key, chunks)
    if page.dictionary is None:
        return found
    mini = page.dictionary
    return replace(
        found,
        dict_at=buffers[2][0] - start,
        dict_size=buffers[2][1],
        dict_items=int(mini.num_dictionary_items),
        dict_encoding=mini.dictionary,
    )


def _list_page(encoding: Any, dtype: pa.DataType, large: bool) -> SmallPage | None:
    """The page of a column of fixed-size lists (of lists...) of plain values of ``dtype``'s
    sizes, without validity below the rows (vectors): :func:`batch.values` decodes its chunks
    as values of the whole list's width."""
    items = 1
    while pa.types.is_fixed_size_list(dtype):
        items *= dtype.list_size
        dtype = dtype.value_type
    width = byte_width(dtype)
    if not width or pa.types.is_boolean(dtype) or not items:
        return None
    page = plan(encoding, large, items)
    return page if page is not None and page.bits == items * width * 8 else None


def worth_batching(file: FileLayout, rows: int) -> bool:
    """Whether a read of ``rows`` rows of a file with this layout belongs in a batch: a file of
    pages of one chunk (a few hundred rows) always; pages of many chunks, which a batch decodes
    whole, when most of their rows are read or when their span is at most
    :data:`SMALL_SPAN_BYTES`."""
    return file.chunks == 1 or file.length <= SMALL_SPAN_BYTES or rows >= DENSE_ROWS * file.num_rows


def joined(blobs: Sequence[bytes | memoryview]) -> tuple[memoryview, np.ndarray]:
    """The files' bytes in one buffer, each from a multiple of :data:`ALIGN`, and where each starts."""
    lengths = np.fromiter((len(b) for b in blobs), np.int64, len(blobs))
    padded = -(-lengths // ALIGN) * ALIGN
    bases = exclusive_cumsum(padded)
    pads = (padded - lengths).tolist()
    pieces: list[bytes | memoryview] = []
    for blob, pad in zip(blobs, pads):
        pieces.append(blob)
        if pad:
            pieces.append(bytes(pad))
    return memoryview(b"".join(pieces)), bases


def decode(
    layouts: Sequence[FileLayout],
    data: memoryview,
    bases: np.ndarray,
    column: int,
    dtype: pa.DataType,
    io: PageIO,
    floor: int | None = None,
) -> pa.Array | None:
    """Every row of column ``column`` (of the layouts' selection) of the files, one file after
    another, from their bytes ``data`` (the file of ``layouts[k]`` from ``bases[k]``, see
    :func:`joined`); None when the files must be read one by one. Integer values below ``floor``
    may read as 0 (see :func:`batch.values`). ``io`` stands for the pages in messages."""
    cols = [f.columns[column] for f in layouts]
    first = cols[0].key
    try:
        if all(c.key is first for c in cols):
            return _decoded(cols, layouts, data, bases, dtype, io, floor)
        groups: dict[int, list[int]] = {}
        for k, c in enumerate(cols):
            groups.setdefault(id(c.key), []).append(k)
        counts = np.fromiter((f.num_rows for f in layouts), np.int64, len(layouts))
        starts = exclusive_cumsum(counts)
        parts, order = [], []
        for members in groups.values():
            sel = np.asarray(members, np.int64)
            got = _decoded(
                [cols[k] for k in members], [layouts[k] for k in members], data, bases[sel], dtype, io, floor
            )
            if got is None:
                return None
            parts.append(got)
            order.append(spans(starts[sel], counts[sel]))
        # the groups' rows back in file order
        where = np.empty(int(counts.sum()), np.int64)
        where[np.concatenate(order)] = np.arange(where.size)
        return take(pa.concat_arrays(parts), pa.array(where))
    except _ERRORS:
        return None


def _decoded(
    cols: list[Any],
    files: Sequence[FileLayout],
    data: memoryview,
    bases: np.ndarray,
    dtype: pa.DataType,
    io: PageIO,
    floor: int | None,
) -> pa.Array | None:
    """The rows of the files whose pages of the column share one encoding key."""
    if isinstance(cols[0], (small_nested.NestedLayout, small_constant.ConstantLayout)):
        rows = np.fromiter((f.num_rows for f in files), np.int64, len(files))
        if isinstance(cols[0], small_constant.ConstantLayout):
            return small_constant.decode(cols, rows, data, bases, dtype, io)
        return small_nested.decode(cols, rows, data, bases, io, _looked_up)
    return _decode(cols, files, data, bases, dtype, io, floor)


def _le(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned integers of ``width`` bytes at byte positions ``at``."""
    out = u8[at].astype(np.int64)
    for k in range(1, width):
        out |= u8[at + k].astype(np.int64) << (8 * k)
    return out


def _decode(
    cols: list[ColumnLayout],
    files: Sequence[FileLayout],
    data: memoryview,
    bases: np.ndarray,
    dtype: pa.DataType,
    io: PageIO,
    floor: int | None,
) -> pa.Array | None:
    """The chunks of files whose pages share one encoding (the checks of
    :func:`miniblock_small.decode` and :func:`miniblock.chunk_table`, for all chunks at once)."""
    page = cols[0].page
    u8 = np.frombuffer(data, np.uint8)
    rows = np.fromiter((f.num_rows for f in files), np.int64, len(files))
    meta_at = bases + np.fromiter((c.meta_at for c in cols), np.int64, len(cols))
    page_at = bases + np.fromiter((c.data_at for c in cols), np.int64, len(cols))
    data_size = np.fromiter((c.data_size for c in cols), np.int64, len(cols))
    chunks = np.fromiter((c.chunks for c in cols), np.int64, len(cols))
    word = 4 if page.large else 2
    if int((page_at + data_size).max()) > u8.size or int((meta_at + chunks * word).max()) > u8.size:
        return None
    if bool(np.all(chunks == 1)):  # pages of one chunk (small files): no chunk table to walk
        n, chunk_at, page_of = rows, page_at, None
        chunk_bytes = ((_le(u8, meta_at, word) >> 4) + 1) * 8
        if bool(np.any(chunk_bytes > data_size)):
            return None
    else:
        found = _chunk_tables(u8, meta_at, page_at, data_size, chunks, rows, word)
        if found is None:
            return None
        n, chunk_at, chunk_bytes, page_of = found
    header = page.header.size
    if bool(np.any(chunk_bytes < header)):
        return None
    at = (header + 7) & ~7
    size_width = 4 if page.large else 2
    valid = None
    if page.defs is not None:
        if bool(np.any(_le(u8, chunk_at, 2) != n)):
            return None
        def_size = _le(u8, chunk_at + 2, 2)
        value_at = at + ((def_size + 7) & ~7)
        size = _le(u8, chunk_at + 4, size_width)
    else:
        def_size = None
        value_at = np.full(n.size, at, np.int64)
        size = _le(u8, chunk_at + 2, size_width)
    second = None  # run lengths in a buffer of their own: where they start, and their size
    if page.buffers == 2:
        size_at = 4 if page.defs is not None else 2
        second = value_at + ((size + 7) & ~7), _le(u8, chunk_at + size_at + size_width, size_width)
        if bool(np.any(second[0] + second[1] > chunk_bytes)):
            return None
    if bool(np.any(value_at + size > chunk_bytes)):
        return None
    total = int(n.sum())
    if def_size is not None:
        levels = batch.levels(page.defs, data, chunk_at + at, def_size, n, io)
        if levels is None or levels.size != total:
            return None
        valid = levels == 0
    enc = cols[0].encoding
    if cols[0].dict_at >= 0:
        floor = None  # dictionary indices say nothing of the values
    values = None
    if floor is None and page_of is None and enc.WhichOneof("compression") == "inline_bitpacking":
        # short chunks fill a little of their 1024-value blocks: only their values are unpacked
        share = total / (int((-(-n // bitpacking.BLOCK)).sum()) * bitpacking.BLOCK)
        values = batch.pick_values(enc, data, chunk_at + value_at, size, n, np.arange(total), io, share)
    if values is None and second is not None:
        runs = batch_runs.chunk_runs(
            enc.rle, data, chunk_at + value_at, size, chunk_at + second[0], second[1], n, io
        )
        values = batch_runs.values(runs)
    elif values is None:
        values = batch.values(enc, data, chunk_at + value_at, size, n, io, floor)
    if values is None:
        return None
    if isinstance(values, Var) and len(values.data) > MAX_VAR_BYTES:
        return None
    if not isinstance(values, (Fixed, Var)):
        return None
    if cols[0].dict_at >= 0:
        arr = _looked_up(values, cols, rows, data, bases, dtype, valid, io)
        if arr is None:
            return None
    else:
        arr = to_arrow(values, dtype, total, io)
    if len(arr) != total:
        return None
    if valid is not None and not valid.all():
        arr = with_validity(arr, valid)
    return arr


def _looked_up(
    indices: Fixed | Var,
    cols: list[Any],
    rows: np.ndarray,
    data: memoryview,
    bases: np.ndarray,
    dtype: pa.DataType,
    valid: np.ndarray | None,
    io: PageIO,
) -> pa.Array | None:
    """The values that the files' dictionary indices (``rows`` of each file, one after another) stand
    for: each file's dictionary decoded, all joined, and every index moved to its file's part of
    the join (None where anything does not check out)."""
    if not isinstance(indices, Fixed) or indices.bits not in bitpacking.DTYPES:
        return None
    total = int(rows.sum())
    idx = np.frombuffer(indices.data, bitpacking.DTYPES[indices.bits], total).astype(np.int64)
    items = np.fromiter((c.dict_items for c in cols), np.int64, len(cols))
    limit = np.repeat(items, rows)
    past = idx >= limit
    if bool(past.any()):  # only null rows may hold any index
        if valid is None or bool(np.any(past & valid)):
            return None
        idx[past] = 0
    if bool(np.any((items == 0) & (rows > 0))) and (valid is None or bool(valid.any())):
        return None
    pieces = []
    for c, base, n in zip(cols, bases.tolist(), rows.tolist()):
        if c.dict_items > max(n + 1, 8 * (c.dict_size + c.data_size)):
            return None  # more items than the page can hold (the general decoder says so)
        at = base + c.dict_at
        got = decode_block(c.dict_encoding, data[at : at + c.dict_size], c.dict_items, io)
        pieces.append(to_arrow(got, dtype, c.dict_items, io))
    joined_items = pa.concat_arrays(pieces)  # (past 32-bit offsets: an ArrowInvalid, read one by one)
    idx += np.repeat(exclusive_cumsum(items), rows)
    return take(joined_items, pa.array(idx))


# values one chunk may hold (see miniblock.MAX_CHUNK_VALUES)
_MAX_CHUNK_VALUES = 1 << 16


def _chunk_tables(
    u8: np.ndarray,
    meta_at: np.ndarray,
    page_at: np.ndarray,
    data_size: np.ndarray,
    chunks: np.ndarray,
    rows: np.ndarray,
    word: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The chunks of pages of ``chunks`` chunks each (their chunk tables at ``meta_at``, their
    chunks from ``page_at``, ``rows`` values each): each chunk's value count, where it starts, its
    size and its page; None where a table does not describe its page (the checks of
    :func:`miniblock.chunk_table`)."""
    first = exclusive_cumsum(chunks)
    page_of = np.repeat(np.arange(chunks.size), chunks)
    ordinal = np.arange(page_of.size, dtype=np.int64) - first[page_of]
    words = _le(u8, meta_at[page_of] + ordinal * word, word)
    chunk_bytes = ((words >> 4) + 1) * 8
    counts = np.left_shift(1, words & 0xF)
    last = first + chunks - 1
    counts[last] = 0
    counts[last] = rows - np.bincount(page_of, counts, chunks.size).astype(np.int64)
    if bool(np.any(counts[last] < 0)) or bool(np.any(counts[last] > _MAX_CHUNK_VALUES)):
        return None
    ends = np.cumsum(chunk_bytes)
    within = ends - chunk_bytes - (ends - chunk_bytes)[first][page_of]
    if bool(np.any(within[last] + chunk_bytes[last] > data_size)):
        return None
    return counts, page_at[page_of] + within, chunk_bytes, page_of
