"""Decoding of Lance 2.1/2.2 pages (``lance.encodings21.PageLayout``) for columns without nesting.

Supported: mini-block pages (u16 chunk words in 2.1, u32 in 2.2) with definition levels for nulls,
constant pages (all null or one repeated value) and full-zip pages without repetition/definition.
Value compressions: flat, inline and out-of-line FastLanes bitpacking, variable, FSST, dictionary,
RLE, general LZ4/ZSTD and fixed-size lists of fixed-width values. Lists, structs and anything else
raise :class:`UnsupportedFormatError` naming what is missing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file import fastlanes, fsst
from lance_table.file.decode20 import build_binary
from lance_table.file.pageio import PageIO, decompress
from lance_table.file.runs import Runs

_SCHEMES = {1: "lz4", 2: "zstd"}


@dataclass
class Fixed:
    """Fixed-width values: raw little-endian bytes, ``bits`` per value."""

    data: bytes | memoryview
    bits: int


@dataclass
class Var:
    """Variable-width values: bytes and n + 1 offsets into them.

    With ``symbols`` the bytes are still FSST-compressed: pieces of a page share one symbol table,
    so they are concatenated first and decompressed once.
    """

    data: bytes | memoryview
    offsets: np.ndarray
    symbols: bytes | None = None


Values = Fixed | Var


def _unsupported(io: PageIO, what: str) -> UnsupportedFormatError:
    return UnsupportedFormatError(
        f"{io.what}: {what} is not supported yet in Lance 2.1/2.2 files", path=io.path
    )


def _general(comp: Any, data: bytes | memoryview, io: PageIO) -> memoryview:
    scheme = _SCHEMES.get(comp.scheme)
    if scheme is None:
        raise _unsupported(io, f"buffer compression {comp.scheme}")
    return decompress(data, scheme, None, io)


def _words(data: bytes | memoryview, bits: int, io: PageIO) -> np.ndarray:
    dtype = fastlanes.DTYPES.get(bits)
    if dtype is None:
        raise _unsupported(io, f"bitpacking of {bits}-bit values")
    usable = len(data) // np.dtype(dtype).itemsize
    return np.frombuffer(data, dtype, usable)


def decode_values(enc: Any, buffers: list[bytes | memoryview], n: int, io: PageIO) -> Values:
    """Decode ``n`` values from a chunk's buffers (consumed from the front); n < 0: a whole buffer."""
    kind = enc.WhichOneof("compression")
    if kind == "flat":
        data = buffers.pop(0)
        if enc.flat.HasField("data"):
            data = _general(enc.flat.data, data, io)
        bits = int(enc.flat.bits_per_value)
        if n < 0:
            return Fixed(data, bits)
        need = (n * bits + 7) // 8
        if len(data) < need:
            raise io.corrupt(f"flat buffer of {len(data)} bytes cannot hold {n} values of {bits} bits")
        return Fixed(data[:need], bits)
    if kind == "inline_bitpacking":
        t = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        words = _words(buffers.pop(0), t, io)
        out = []
        at = 0
        blocks = -(-n // fastlanes.BLOCK)
        for _ in range(blocks):  # each block starts with one word holding its bit width
            if at >= words.size:
                raise io.corrupt("inline bitpacking runs out of words")
            w = int(words[at])
            if w > t:
                raise io.corrupt(f"bit width {w} exceeds {t}")
            size = w * fastlanes.BLOCK // t
            out.append(fastlanes.unpack(words[at + 1 : at + 1 + size], t, w, 1))
            at += 1 + size
        values = np.concatenate(out)[:n] if out else np.zeros(0, fastlanes.DTYPES[t])
        return Fixed(values.tobytes(), t)
    if kind == "out_of_line_bitpacking":
        t = int(enc.out_of_line_bitpacking.uncompressed_bits_per_value)
        inner = enc.out_of_line_bitpacking.values
        if inner.WhichOneof("compression") != "flat":
            raise _unsupported(io, "out-of-line bitpacking over a non-flat encoding")
        w = int(inner.flat.bits_per_value)
        words = _words(buffers.pop(0), t, io)
        full, tail = divmod(n, fastlanes.BLOCK)
        per_block = w * fastlanes.BLOCK // t
        values = fastlanes.unpack(words, t, w, full)
        if tail:
            rest = words[full * per_block :]
            if rest.size == tail:  # a short tail may be stored unpacked
                values = np.concatenate([values, rest])
            else:
                values = np.concatenate([values, fastlanes.unpack(rest, t, w, 1)[:tail]])
        return Fixed(values.tobytes(), t)
    if kind == "variable":
        data = buffers.pop(0)
        bits = int(enc.variable.offsets.flat.bits_per_value)
        dtype = {32: np.uint32, 64: np.uint64}.get(bits)
        if dtype is None or len(data) < (n + 1) * bits // 8:
            raise io.corrupt("variable offsets do not fit their buffer")
        offsets = np.frombuffer(data, dtype, n + 1).astype(np.int64)
        if offsets[-1] > len(data) or np.any(np.diff(offsets) < 0):
            raise io.corrupt("variable offsets are out of order or past the buffer")
        return Var(data, offsets)
    if kind == "fsst":
        inner = decode_values(enc.fsst.values, buffers, n, io)
        if not isinstance(inner, Var):
            raise io.corrupt("FSST over fixed-width values")
        return Var(inner.data, inner.offsets, bytes(enc.fsst.symbol_table))
    if kind == "rle":
        if len(buffers) == 1:
            # block form (levels): [u64 size of the values][values][run lengths]
            block = buffers.pop(0)
            if len(block) < 8:
                raise io.corrupt("RLE block without its length prefix")
            (size,) = struct.unpack_from("<Q", block, 0)
            if 8 + size > len(block):
                raise io.corrupt("RLE block values run past the block")
            buffers[:0] = [memoryview(block)[8 : 8 + size], memoryview(block)[8 + size :]]
        run_values = decode_values(enc.rle.values, buffers, -1, io)
        run_lengths = decode_values(enc.rle.run_lengths, buffers, -1, io)
        if not isinstance(run_values, Fixed) or not isinstance(run_lengths, Fixed):
            raise io.corrupt("RLE of variable-width values")
        counts = np.frombuffer(run_lengths.data, fastlanes.DTYPES[run_lengths.bits]).astype(np.int64)
        vals = np.frombuffer(run_values.data, fastlanes.DTYPES[run_values.bits])[: counts.size]
        if int(counts.sum()) < n:
            raise io.corrupt("RLE runs cover fewer values than the chunk holds")
        return Fixed(np.repeat(vals, counts[: vals.size])[:n].tobytes(), run_values.bits)
    if kind == "general":
        data = _general(enc.general.compression, buffers.pop(0), io)
        return decode_values(enc.general.values, [data], n, io)
    if kind == "fixed_size_list":
        if enc.fixed_size_list.has_validity:
            raise _unsupported(io, "fixed-size lists with item validity")
        return decode_values(
            enc.fixed_size_list.values, buffers, n * int(enc.fixed_size_list.items_per_value), io
        )
    raise _unsupported(io, f"value compression {kind!r}")


def _decode_block(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Values:
    """The whole-buffer ("block") form used for dictionaries."""
    kind = enc.WhichOneof("compression")
    if kind == "general":
        return _decode_block(enc.general.values, _general(enc.general.compression, data, io), n, io)
    if kind == "variable":
        (bits,) = struct.unpack_from("<I", data, 0)
        if bits == 32:
            (start,) = struct.unpack_from("<I", data, 4)
            offsets = np.frombuffer(data, np.uint32, n + 1, 8).astype(np.int64)
        elif bits == 64:
            (start,) = struct.unpack_from("<Q", data, 8)
            offsets = np.frombuffer(data, np.uint64, n + 1, 16).astype(np.int64)
        else:
            raise io.corrupt(f"dictionary offsets of {bits} bits")
        body = memoryview(data)[start:]
        if offsets.size and (offsets[-1] > len(body) or np.any(np.diff(offsets) < 0)):
            raise io.corrupt("dictionary offsets are out of order or past the buffer")
        return Var(body, offsets)
    return decode_values(enc, [data], n, io)


def to_arrow(values: Values, dtype: pa.DataType, n: int, io: PageIO) -> pa.Array:
    """An Arrow array of ``dtype`` from decoded values (no nulls yet)."""
    if isinstance(values, Var):
        values = _expand(values, io)
        valid = np.ones(n, bool)
        lengths = np.diff(values.offsets)
        lo = int(values.offsets[0])
        return build_binary(dtype, valid, lengths, pa.py_buffer(values.data), lo, io)
    if pa.types.is_boolean(dtype):
        if values.bits == 1:
            return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(values.data)])
        flags = np.frombuffer(values.data, fastlanes.DTYPES[values.bits])[:n] != 0
        return pa.array(flags, pa.bool_())
    if pa.types.is_fixed_size_list(dtype):
        items = to_arrow(values, dtype.value_type, n * dtype.list_size, io)
        return pa.FixedSizeListArray.from_arrays(items, type=dtype)
    width = dtype.byte_width if pa.types.is_fixed_size_binary(dtype) else dtype.bit_width // 8
    data = values.data
    if values.bits != width * 8:
        if values.bits in fastlanes.DTYPES and width * 8 in fastlanes.DTYPES:
            data = (
                np.frombuffer(data, fastlanes.DTYPES[values.bits])[:n]
                .astype(fastlanes.DTYPES[width * 8])
                .tobytes()
            )
        else:
            raise io.corrupt(f"{values.bits}-bit values cannot be read as {dtype}")
    if len(data) < n * width:
        raise io.corrupt(f"{len(data)} bytes cannot hold {n} values of {dtype}")
    return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(data)])


def _expand(values: Var, io: PageIO) -> Var:
    """Decompress FSST values (a no-op for plain ones)."""
    if values.symbols is None:
        return values
    lo, hi = int(values.offsets[0]), int(values.offsets[-1])
    try:
        text, offsets = fsst.decode(values.symbols, bytes(values.data[lo:hi]), values.offsets - lo)
    except fsst.FsstError as exc:
        raise io.corrupt(f"FSST data: {exc}") from exc
    return Var(text, offsets)


def _concat_values(pieces: list[Values], io: PageIO) -> Values:
    if isinstance(pieces[0], Fixed):
        return Fixed(b"".join(bytes(p.data) for p in pieces), pieces[0].bits)
    datas, offsets, base = [], [np.zeros(1, np.int64)], 0
    symbols = pieces[0].symbols if isinstance(pieces[0], Var) else None
    for p in pieces:
        if not isinstance(p, Var):
            raise io.corrupt("a page mixes fixed- and variable-width chunks")
        if p.symbols != symbols:  # one page has one symbol table; be safe anyway
            p = _expand(p, io)
            if symbols is not None:
                raise io.corrupt("chunks of one page use different FSST symbol tables")
        lo, hi = int(p.offsets[0]), int(p.offsets[-1])
        datas.append(bytes(p.data[lo:hi]))
        offsets.append(p.offsets[1:] - lo + base)
        base += hi - lo
    return Var(b"".join(datas), np.concatenate(offsets), symbols)


def _levels(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> np.ndarray:
    values = decode_values(enc, [data], n, io)
    if not isinstance(values, Fixed):
        raise io.corrupt("definition levels are not fixed-width")
    if values.bits == 1:
        return np.unpackbits(np.frombuffer(values.data, np.uint8), bitorder="little")[:n].astype(np.uint16)
    return np.frombuffer(values.data, fastlanes.DTYPES[values.bits])[:n].astype(np.uint16)


def _pad8(x: int) -> int:
    return (x + 7) & ~7


def mini_block(
    layout: Any, io: PageIO, dtype: pa.DataType, large_chunks: bool, runs: Runs | None = None
) -> pa.Array:
    """Decode a mini-block page of a column without repetition: every row, or only ``runs``.

    With ``runs`` only the chunks that hold those rows are decoded (the chunk metadata says how
    many values each chunk holds), and the result has exactly the selected rows.
    """
    if layout.repetition_index_depth or layout.HasField("rep_compression"):
        raise _unsupported(io, "lists (repetition levels)")
    n_items = int(layout.num_items)
    count = len(io.page.buffer_offsets)
    if count < 2:
        raise io.corrupt("mini-block page without metadata and data buffers")
    meta, data = io.whole(0), io.whole(1)
    dictionary = None
    if layout.HasField("dictionary"):
        if count < 3:
            raise io.corrupt("dictionary page without a dictionary buffer")
        dictionary = _decode_block(layout.dictionary, io.whole(2), int(layout.num_dictionary_items), io)
    word_type = np.uint32 if large_chunks else np.uint16
    words = np.frombuffer(meta, word_type, len(meta) // np.dtype(word_type).itemsize).astype(np.int64)
    size_fmt, size_len = ("<I", 4) if large_chunks else ("<H", 2)
    has_def = layout.HasField("def_compression")
    chunk_bytes = ((words >> 4) + 1) * 8
    counts = np.left_shift(1, words & 0xF)
    if counts.size:
        counts[-1] = n_items - int(counts[:-1].sum())
    byte_starts = np.concatenate([[0], np.cumsum(chunk_bytes)])
    row_starts = np.concatenate([[0], np.cumsum(counts)])
    if (
        (counts.size and int(counts[-1]) < 0)
        or int(byte_starts[-1]) > len(data)
        or int(row_starts[-1]) != n_items
    ):
        raise io.corrupt(f"mini-block chunks do not describe the page's {n_items} values")
    if runs is None or runs.is_span(0, n_items):
        chosen = np.arange(words.size)
        positions = None
    else:
        positions = runs.positions()
        chunk_of = np.searchsorted(row_starts[1:], positions, side="right")
        chosen = np.unique(chunk_of)
    pieces: list[Values] = []
    defs = []
    done = 0
    for i in chosen.tolist():
        n = int(counts[i])
        chunk = memoryview(data)[int(byte_starts[i]) : int(byte_starts[i + 1])]
        done += n
        (num_levels,) = struct.unpack_from("<H", chunk, 0)
        off = 2
        def_size = 0
        if has_def:
            (def_size,) = struct.unpack_from("<H", chunk, off)
            off += 2
        sizes = []
        for _ in range(int(layout.num_buffers)):
            (size,) = struct.unpack_from(size_fmt, chunk, off)
            sizes.append(size)
            off += size_len
        off = _pad8(off)
        if has_def:
            defs.append(_levels(layout.def_compression, chunk[off : off + def_size], num_levels, io))
            off = _pad8(off + def_size)
        buffers: list[bytes | memoryview] = []
        for size in sizes:
            if off + size > len(chunk):
                raise io.corrupt(f"mini-block chunk {i} buffer runs past the chunk")
            buffers.append(chunk[off : off + size])
            off = _pad8(off + size)
        pieces.append(decode_values(layout.value_compression, buffers, n, io))
    values = _concat_values(pieces, io) if pieces else Fixed(b"", 8)
    valid = (np.concatenate(defs) == 0) if defs else None
    if dictionary is not None:
        if not isinstance(values, Fixed):
            raise io.corrupt("dictionary indices are not fixed-width")
        idx = np.frombuffer(values.data, fastlanes.DTYPES[values.bits])[:done].astype(np.int64)
        items_n = int(layout.num_dictionary_items)
        value_type = dtype.value_type if pa.types.is_dictionary(dtype) else dtype
        items = to_arrow(dictionary, value_type, items_n, io)
        if (
            idx.size
            and int(idx.max()) >= items_n
            and (valid is None or int(idx[valid].max(initial=0)) >= items_n)
        ):
            raise io.corrupt("dictionary index past the dictionary")
        idx = np.where(idx < items_n, idx, 0)
        if pa.types.is_dictionary(dtype):
            arr: pa.Array = pa.DictionaryArray.from_arrays(pa.array(idx).cast(dtype.index_type), items)
        else:
            arr = items.take(pa.array(idx))
    else:
        arr = to_arrow(values, dtype, done, io)
    if valid is not None and not valid.all():
        from lance_table.file.decode20 import with_validity

        arr = with_validity(arr, valid)
    if positions is None:
        return arr
    # rows of the decoded chunks -> the selected rows
    base = np.concatenate([[0], np.cumsum(counts[chosen])])[:-1]
    local = base[np.searchsorted(chosen, chunk_of)] + (positions - row_starts[chunk_of])
    return arr.take(pa.array(local))


def constant(layout: Any, io: PageIO, dtype: pa.DataType) -> pa.Array:
    n = int(io.page.length)
    if layout.HasField("rep_compression") or layout.HasField("def_compression"):
        raise _unsupported(io, "constant pages with repetition/definition levels")
    if not layout.HasField("inline_value"):
        return pa.nulls(n, dtype)
    value = bytes(layout.inline_value)
    return to_arrow(Fixed(value * n, len(value) * 8), dtype, n, io)


def full_zip(layout: Any, io: PageIO, dtype: pa.DataType) -> pa.Array:
    if layout.bits_rep or layout.bits_def:
        raise _unsupported(io, "full-zip pages with repetition/definition levels")
    n = int(layout.num_items)
    data = io.whole(0)
    if layout.WhichOneof("details") == "bits_per_value":
        return to_arrow(decode_values(layout.value_compression, [data], n, io), dtype, n, io)
    width = int(layout.bits_per_offset) // 8
    if width not in (4, 8):
        raise io.corrupt(f"full-zip offsets of {width * 8} bits")
    # values are [length][bytes] back to back: walk the lengths (one step per value)
    lengths = np.empty(n, np.int64)
    starts = np.empty(n, np.int64)
    at = 0
    fmt = "<I" if width == 4 else "<Q"
    for i in range(n):
        if at + width > len(data):
            raise io.corrupt("full-zip values run past the page")
        (length,) = struct.unpack_from(fmt, data, at)
        starts[i] = at + width
        lengths[i] = length
        at += width + length
    if at > len(data):
        raise io.corrupt("full-zip values run past the page")
    keep = np.zeros(len(data), bool)
    for s, ln in zip(starts.tolist(), lengths.tolist()):
        keep[s : s + ln] = True
    body = np.frombuffer(data, np.uint8)[keep].tobytes()
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values: Values = Var(body, offsets)
    if layout.value_compression.WhichOneof("compression") == "fsst":
        out, new = fsst.decode(layout.value_compression.fsst.symbol_table, body, offsets)
        values = Var(out, new)
    return to_arrow(values, dtype, n, io)


def decode_page(layout: Any, io: PageIO, dtype: pa.DataType, large_chunks: bool, runs: Runs) -> pa.Array:
    """The rows ``runs`` of a 2.1/2.2 page of a column without nesting."""
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        return mini_block(layout.mini_block_layout, io, dtype, large_chunks, runs)
    if kind == "constant_layout":
        arr = constant(layout.constant_layout, io, dtype)
    elif kind == "full_zip_layout":
        arr = full_zip(layout.full_zip_layout, io, dtype)
    else:
        raise _unsupported(io, f"page layout {kind!r}")
    if len(arr) != io.page.length:
        raise io.corrupt(f"page decodes to {len(arr)} rows, its metadata says {io.page.length}")
    return arr if runs.is_span(0, len(arr)) else arr.take(pa.array(runs.positions()))
