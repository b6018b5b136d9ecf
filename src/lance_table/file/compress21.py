"""Value compressions of Lance 2.1/2.2 pages (``lance.encodings21.CompressiveEncoding``).

Decodes the buffers of one mini-block chunk, a dictionary, a full-zip page or a level block into
:class:`Fixed` or :class:`Var` values, and turns those into Arrow arrays. Supported: flat, inline
and out-of-line FastLanes bitpacking, variable, FSST, dictionary blocks, RLE, general LZ4/ZSTD and
fixed-size lists of fixed-width values.
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


def unsupported(io: PageIO, what: str) -> UnsupportedFormatError:
    return UnsupportedFormatError(
        f"{io.what}: {what} is not supported yet in Lance 2.1/2.2 files", path=io.path
    )


def _general(comp: Any, data: bytes | memoryview, io: PageIO) -> memoryview:
    scheme = _SCHEMES.get(comp.scheme)
    if scheme is None:
        raise unsupported(io, f"buffer compression {comp.scheme}")
    return decompress(data, scheme, None, io)


def _words(data: bytes | memoryview, bits: int, io: PageIO) -> np.ndarray:
    dtype = fastlanes.DTYPES.get(bits)
    if dtype is None:
        raise unsupported(io, f"bitpacking of {bits}-bit values")
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
            raise unsupported(io, "out-of-line bitpacking over a non-flat encoding")
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
            raise unsupported(io, "fixed-size lists with item validity")
        return decode_values(
            enc.fixed_size_list.values, buffers, n * int(enc.fixed_size_list.items_per_value), io
        )
    raise unsupported(io, f"value compression {kind!r}")


def decode_block(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Values:
    """The whole-buffer ("block") form used for dictionaries."""
    kind = enc.WhichOneof("compression")
    if kind == "general":
        return decode_block(enc.general.values, _general(enc.general.compression, data, io), n, io)
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
        values = expand(values, io)
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


def expand(values: Var, io: PageIO) -> Var:
    """Decompress FSST values (a no-op for plain ones)."""
    if values.symbols is None:
        return values
    lo, hi = int(values.offsets[0]), int(values.offsets[-1])
    try:
        text, offsets = fsst.decode(values.symbols, bytes(values.data[lo:hi]), values.offsets - lo)
    except fsst.FsstError as exc:
        raise io.corrupt(f"FSST data: {exc}") from exc
    return Var(text, offsets)


def concat_values(pieces: list[Values], io: PageIO) -> Values:
    if isinstance(pieces[0], Fixed):
        return Fixed(b"".join(bytes(p.data) for p in pieces), pieces[0].bits)
    datas, offsets, base = [], [np.zeros(1, np.int64)], 0
    symbols = pieces[0].symbols if isinstance(pieces[0], Var) else None
    for p in pieces:
        if not isinstance(p, Var):
            raise io.corrupt("a page mixes fixed- and variable-width chunks")
        if p.symbols != symbols:  # one page has one symbol table; be safe anyway
            p = expand(p, io)
            if symbols is not None:
                raise io.corrupt("chunks of one page use different FSST symbol tables")
        lo, hi = int(p.offsets[0]), int(p.offsets[-1])
        datas.append(bytes(p.data[lo:hi]))
        offsets.append(p.offsets[1:] - lo + base)
        base += hi - lo
    return Var(b"".join(datas), np.concatenate(offsets), symbols)


def decode_levels(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> np.ndarray:
    values = decode_values(enc, [data], n, io)
    if not isinstance(values, Fixed):
        raise io.corrupt("definition levels are not fixed-width")
    if values.bits == 1:
        return np.unpackbits(np.frombuffer(values.data, np.uint8), bitorder="little")[:n].astype(np.uint16)
    return np.frombuffer(values.data, fastlanes.DTYPES[values.bits])[:n].astype(np.uint16)
