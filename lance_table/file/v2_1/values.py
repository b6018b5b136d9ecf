"""Decoded values of Lance 2.1/2.2 pages, and their conversion to Arrow.

The value decompressors (:mod:`compress21` for mini-block chunks, dictionaries and level blocks,
:mod:`pervalue21` for the values of full-zip pages) return :data:`Values`: fixed-width bytes,
variable-width bytes with offsets (possibly still FSST-compressed), fixed-size lists with item
validity, packed structs, or all-null runs. :func:`to_arrow` turns them into Arrow arrays and
:func:`concat_values` joins the pieces of one page.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
from lance_table.file.arrow import binary_from_offsets, with_validity
from lance_table.file.arrow_take import take
from lance_table.file.compression import bitpacking, fsst, fsst_files
from lance_table.file.pageio import PageIO

# Arrow counts the items of a fixed-size list in 32 bits.
MAX_LIST_SIZE = 2**31 - 1


@dataclass
class Fixed:
    """Fixed-width values: raw little-endian bytes, ``bits`` per value."""

    data: bytes | memoryview
    bits: int


@dataclass
class Var:
    """Variable-width values: bytes and n + 1 offsets into them.

    With ``symbols`` the bytes are still FSST-compressed: pieces of a page share one symbol table,
    so they are concatenated first and decompressed once. ``ascii``: the bytes are known to be
    ASCII (decompressed with a table and escapes that can produce nothing else).
    """

    data: bytes | memoryview
    offsets: np.ndarray
    symbols: bytes | None = None
    ascii: bool = False


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    """The n + 1 offsets of values with these ``lengths``, starting at 0."""
    out = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


@dataclass
class FixedList:
    """One fixed-size-list level whose items have validity (or hold such a level further down).

    ``count`` lists of ``dim`` items each; ``items`` holds their ``count * dim`` items and ``valid``
    says which items are valid (None: all of them). Levels without any validity are decoded
    flattened into a plain :class:`Fixed` instead.
    """

    items: Values
    dim: int
    count: int
    valid: np.ndarray | None = None


@dataclass
class Struct:
    """A packed struct: one decoded child per struct field, in field order.

    ``present`` (None: every row) marks the rows that have data; the children hold only those rows.
    The others are null rows of a full-zip page, which store no bytes.
    """

    children: list[Values]
    present: np.ndarray | None = None


@dataclass
class Nulls:
    """``count`` values that are all null (a constant without a value)."""

    count: int


Values = Fixed | Var | FixedList | Struct | Nulls


def to_arrow(values: Values, dtype: pa.DataType, n: int, io: PageIO) -> pa.Array:
    """An Arrow array of ``dtype`` from decoded values (no nulls yet, except null items of lists)."""
    if isinstance(values, Nulls):
        if values.count < n:
            raise io.corrupt(f"{values.count} null values cannot fill {n} rows")
        return pa.nulls(n, dtype)
    if isinstance(values, Struct):
        return _struct_to_arrow(values, dtype, n, io)
    if isinstance(values, FixedList):
        return _list_to_arrow(values, dtype, n, io)
    if isinstance(values, Var):
        if not is_binary(dtype):
            raise io.corrupt(f"variable-width values cannot be read as {dtype}")
        values = expand(values, io)
        if values.offsets.size < n + 1:
            raise io.corrupt(f"{values.offsets.size - 1} values cannot fill {n} rows")
        return binary_from_offsets(dtype, values.offsets[: n + 1], pa.py_buffer(values.data), io)
    if n == 0 and not values.data:
        return pa.array([], type=dtype)
    if pa.types.is_boolean(dtype):
        if values.bits == 1:
            if len(values.data) * 8 < n:
                raise io.corrupt(f"{len(values.data)} bytes cannot hold {n} booleans")
            return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(values.data)])
        if values.bits not in bitpacking.DTYPES:
            raise io.corrupt(f"{values.bits}-bit values cannot be read as booleans")
        flags = np.frombuffer(values.data, bitpacking.DTYPES[values.bits])[:n] != 0
        return pa.array(flags, pa.bool_())
    if pa.types.is_fixed_size_list(dtype):
        items = to_arrow(values, dtype.value_type, n * dtype.list_size, io)
        return pa.FixedSizeListArray.from_arrays(items, type=dtype)
    width = byte_width(dtype)
    if not width:
        raise io.corrupt(f"{values.bits}-bit values cannot be read as {dtype}")
    data = values.data
    if values.bits != width * 8:
        if values.bits in bitpacking.DTYPES and width * 8 in bitpacking.DTYPES:
            data = (
                np.frombuffer(data, bitpacking.DTYPES[values.bits])[:n]
                .astype(bitpacking.DTYPES[width * 8])
                .tobytes()
            )
        else:
            raise io.corrupt(f"{values.bits}-bit values cannot be read as {dtype}")
    if len(data) < n * width:
        raise io.corrupt(f"{len(data)} bytes cannot hold {n} values of {dtype}")
    return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(data)])


def is_binary(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
    )


def byte_width(dtype: pa.DataType) -> int:
    """Bytes per value of a fixed-width Arrow type; 0 for anything else."""
    if pa.types.is_fixed_size_binary(dtype):
        return int(dtype.byte_width)
    if pa.types.is_struct(dtype) or pa.types.is_fixed_size_list(dtype) or pa.types.is_dictionary(dtype):
        return 0
    try:
        bits = int(dtype.bit_width)
    except ValueError:  # variable-width types have no bit width
        return 0
    return bits // 8 if bits % 8 == 0 else 0


def _struct_to_arrow(values: Struct, dtype: pa.DataType, n: int, io: PageIO) -> pa.Array:
    if not pa.types.is_struct(dtype) or dtype.num_fields != len(values.children):
        raise io.corrupt(f"a packed struct of {len(values.children)} fields cannot be read as {dtype}")
    present = values.present
    if present is None:
        kids = [to_arrow(child, dtype.field(i).type, n, io) for i, child in enumerate(values.children)]
        return pa.StructArray.from_arrays(kids, fields=list(dtype))
    if present.size < n:
        raise io.corrupt(f"{present.size} packed struct rows cannot fill {n} rows")
    present = present[:n]
    m = int(np.count_nonzero(present))
    kids = [to_arrow(child, dtype.field(i).type, m, io) for i, child in enumerate(values.children)]
    rows = pa.StructArray.from_arrays(kids, fields=list(dtype))
    # rows without data (null rows of the page) become nulls; their validity comes from the levels
    where = np.maximum(np.cumsum(present) - 1, 0)
    return take(rows, pa.array(where, mask=~present)) if m else pa.nulls(n, dtype)


def _list_to_arrow(values: FixedList, dtype: pa.DataType, n: int, io: PageIO) -> pa.Array:
    if not pa.types.is_fixed_size_list(dtype) or dtype.list_size != values.dim:
        raise io.corrupt(f"fixed-size lists of {values.dim} items cannot be read as {dtype}")
    if values.count < n:
        raise io.corrupt(f"{values.count} fixed-size lists cannot fill {n} rows")
    count = n * values.dim
    items = to_arrow(values.items, dtype.value_type, count, io)
    if values.valid is not None and not isinstance(values.items, Nulls):
        if values.valid.size < count:
            raise io.corrupt(f"{values.valid.size} item validity bits cannot cover {count} items")
        items = with_validity(items, values.valid[:count])
    return pa.FixedSizeListArray.from_arrays(items, type=dtype)


def _from_zero(offsets: np.ndarray, lo: int) -> np.ndarray:
    """``offsets - lo`` as int64 (no copy when there is nothing to change; else in a buffer from
    Arrow's pool, which faults no fresh pages in)."""
    if not lo and offsets.dtype == np.int64:
        return offsets
    out = empty(offsets.size, np.int64)
    out[:] = offsets
    if lo:
        out -= lo
    return out


def expand(values: Var, io: PageIO) -> Var:
    """Decompress FSST values (a no-op for plain ones)."""
    if values.symbols is None:
        return values
    lo, hi = int(values.offsets[0]), int(values.offsets[-1])
    try:
        data = memoryview(values.data)[lo:hi]
        got = fsst.decode_text(values.symbols, data, _from_zero(values.offsets, lo))
    except fsst.FsstError as exc:
        raise io.corrupt(f"FSST data: {exc}") from exc
    return Var(got.data, got.offsets, ascii=got.ascii)


def expand_files(values: Var, symbol_tables: list[bytes], counts: np.ndarray, io: PageIO) -> Var:
    """Decompress FSST values of several files, ``counts[k]`` of them compressed with
    ``symbol_tables[k]``, one file after another (see :func:`fsst_files.decode_files`)."""
    lo = int(values.offsets[0])
    try:
        got = fsst_files.decode_files(
            symbol_tables, memoryview(values.data)[lo:], _from_zero(values.offsets, lo), counts
        )
    except fsst.FsstError as exc:
        raise io.corrupt(f"FSST data: {exc}") from exc
    return Var(got.data, got.offsets, ascii=got.ascii)


def concat_values(pieces: list[Values], io: PageIO) -> Values:
    """The values of several chunks of one page, joined (all pieces have the same form)."""
    first = pieces[0]
    if isinstance(first, Fixed):
        if any(not isinstance(p, Fixed) or p.bits != first.bits for p in pieces):
            raise io.corrupt("the chunks of a page decode to different value widths")
        return Fixed(b"".join(p.data for p in pieces if isinstance(p, Fixed)), first.bits)
    if isinstance(first, Nulls):
        if any(not isinstance(p, Nulls) for p in pieces):
            raise io.corrupt("a page mixes null and non-null chunks")
        return Nulls(sum(p.count for p in pieces if isinstance(p, Nulls)))
    if isinstance(first, FixedList):
        lists = [p for p in pieces if isinstance(p, FixedList) and p.dim == first.dim]
        if len(lists) != len(pieces):
            raise io.corrupt("the chunks of a page decode to different list shapes")
        counts = [p.count * p.dim for p in lists]
        valid = None
        if any(p.valid is not None for p in lists):
            masks = [p.valid if p.valid is not None else np.ones(c, bool) for p, c in zip(lists, counts)]
            if any(m.size < c for m, c in zip(masks, counts)):
                raise io.corrupt("an item validity bitmap is shorter than its items")
            valid = np.concatenate([m[:c] for m, c in zip(masks, counts)])
        items = _concat_counted([p.items for p in lists], counts, io)
        return FixedList(items, first.dim, sum(p.count for p in lists), valid)
    if isinstance(first, Struct):
        structs = [
            p
            for p in pieces
            if isinstance(p, Struct) and len(p.children) == len(first.children) and p.present is None
        ]
        if len(structs) != len(pieces):
            raise io.corrupt("the chunks of a page decode to different struct shapes")
        return Struct(
            [concat_values([s.children[i] for s in structs], io) for i in range(len(first.children))]
        )
    datas, offsets, base = [], [np.zeros(1, np.int64)], 0
    symbols = first.symbols
    for p in pieces:
        if not isinstance(p, Var):
            raise io.corrupt("a page mixes fixed- and variable-width chunks")
        if p.symbols != symbols:  # one page has one symbol table; be safe anyway
            p = expand(p, io)
            if symbols is not None:
                raise io.corrupt("chunks of one page use different FSST symbol tables")
        lo, hi = int(p.offsets[0]), int(p.offsets[-1])
        datas.append(memoryview(p.data)[lo:hi])
        offsets.append(p.offsets[1:] - lo + base)
        base += hi - lo
    return Var(b"".join(datas), np.concatenate(offsets), symbols)


def _concat_counted(pieces: list[Values], counts: list[int], io: PageIO) -> Values:
    """Join pieces holding exactly ``counts`` values each (fixed-width ones may carry padding)."""
    first = pieces[0]
    if isinstance(first, Nulls):
        return Nulls(sum(counts))
    if not isinstance(first, Fixed):
        return concat_values(pieces, io)
    bits = first.bits
    parts = []
    for p, c in zip(pieces, counts):
        if not isinstance(p, Fixed) or p.bits != bits or len(p.data) * 8 < c * bits:
            raise io.corrupt(f"list items are not {c} values of {bits} bits")
        parts.append(p.data)
    if bits % 8 == 0:
        return Fixed(b"".join(bytes(d[: c * bits // 8]) for d, c in zip(parts, counts)), bits)
    # sub-byte items (booleans): join bit by bit
    flat = [
        np.unpackbits(np.frombuffer(d, np.uint8, (c * bits + 7) // 8), bitorder="little")[: c * bits]
        for d, c in zip(parts, counts)
    ]
    return Fixed(np.packbits(np.concatenate(flat), bitorder="little").tobytes(), bits)
