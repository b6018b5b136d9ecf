"""Value compressions of Lance 2.1/2.2 pages (``lance.encodings21.CompressiveEncoding``).

Decodes the buffers of one mini-block chunk, a dictionary, a full-zip page or a level block into
:data:`Values`, and turns those into Arrow arrays. Supported: flat, constant, inline and
out-of-line FastLanes bitpacking, variable, FSST, dictionary blocks, RLE, byte-stream split,
general LZ4/ZSTD (per chunk, and per value for full-zip pages), fixed-size lists with or without
item validity (mini-block and per-value forms), packed structs, variable packed structs (per value),
and the metadata-only range and delta sequences (which pylance 14 writes only to 2.3 files).

Everything is vectorized: a chunk's values are decoded with numpy whatever their count; the Python
loops below run over encoding layers, struct fields or inline-bitpacking blocks, never over values.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file import fastlanes, fsst
from lance_table.file.decode20 import build_binary, with_validity
from lance_table.file.pageio import PageIO, decompress

_SCHEMES = {1: "lz4", 2: "zstd"}
_UINT = {32: np.uint32, 64: np.uint64}


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


def unsupported(io: PageIO, what: str) -> UnsupportedFormatError:
    return UnsupportedFormatError(
        f"{io.what}: {what} is not supported yet in Lance 2.1/2.2 files", path=io.path
    )


def _kind(enc: Any, io: PageIO) -> str:
    """Which compression an encoding node uses; a typed error when none or an unknown one is set."""
    kind = enc.WhichOneof("compression")
    if kind is not None:
        return str(kind)
    raw = enc.SerializeToString()
    if not raw:
        raise io.corrupt("a value encoding names no compression")
    # An unknown oneof member survives as an unknown field: name its number (the first key).
    key, shift = 0, 0
    for byte in raw[:10]:
        key |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    raise UnsupportedFormatError(
        f"{io.what}: value compression number {key >> 3} is unknown to this reader (written by a "
        "newer Lance?)",
        path=io.path,
    )


def _take(buffers: list[bytes | memoryview], io: PageIO, what: str) -> bytes | memoryview:
    if not buffers:
        raise io.corrupt(f"{what} needs a buffer the chunk does not have")
    return buffers.pop(0)


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


def _bitmap(data: bytes | memoryview, count: int, io: PageIO) -> np.ndarray:
    """``count`` LSB-first bits as a bool array."""
    if len(data) * 8 < count:
        raise io.corrupt(f"a validity bitmap of {len(data)} bytes cannot hold {count} items")
    return np.unpackbits(np.frombuffer(data, np.uint8, (count + 7) // 8), bitorder="little")[:count].astype(
        bool
    )


def _need_count(n: int, what: str, io: PageIO) -> None:
    if n < 0:
        raise io.corrupt(f"{what} cannot fill a buffer of unknown value count")


def decode_values(enc: Any, buffers: list[bytes | memoryview], n: int, io: PageIO) -> Values:
    """Decode ``n`` values from a chunk's buffers (consumed from the front); n < 0: a whole buffer."""
    kind = _kind(enc, io)
    if kind == "flat":
        data = _take(buffers, io, "flat values")
        if enc.flat.HasField("data"):
            data = _general(enc.flat.data, data, io)
        bits = int(enc.flat.bits_per_value)
        if bits <= 0:
            raise io.corrupt(f"flat values of {bits} bits")
        if n < 0:
            return Fixed(data, bits)
        need = (n * bits + 7) // 8
        if len(data) < need:
            raise io.corrupt(f"flat buffer of {len(data)} bytes cannot hold {n} values of {bits} bits")
        return Fixed(data[:need], bits)
    if kind == "inline_bitpacking":
        return _inline_bitpacking(enc.inline_bitpacking, _take(buffers, io, "bitpacking"), n, io)
    if kind == "out_of_line_bitpacking":
        return _out_of_line_bitpacking(enc.out_of_line_bitpacking, _take(buffers, io, "bitpacking"), n, io)
    if kind == "variable":
        return _variable(enc.variable, _take(buffers, io, "variable values"), n, io)
    if kind == "fsst":
        inner = decode_values(enc.fsst.values, buffers, n, io)
        if not isinstance(inner, Var):
            raise io.corrupt("FSST over fixed-width values")
        return Var(inner.data, inner.offsets, bytes(enc.fsst.symbol_table))
    if kind == "rle":
        return _rle(enc.rle, buffers, n, io)
    if kind == "general":
        data = _general(enc.general.compression, _take(buffers, io, "general compression"), io)
        return decode_values(enc.general.values, [data], n, io)
    if kind == "byte_stream_split":
        return _byte_stream_split(enc.byte_stream_split, _take(buffers, io, "byte-stream split"), n, io)
    if kind == "fixed_size_list":
        return _fixed_size_list(enc, buffers, n, io)
    if kind == "packed_struct":
        return _packed_struct(enc.packed_struct, buffers, n, io)
    if kind == "constant":
        _need_count(n, "a constant", io)
        if not enc.constant.HasField("value"):
            return Nulls(n)
        value = bytes(enc.constant.value)
        if not value:
            raise io.corrupt("a constant with an empty value")
        return Fixed(value * n, len(value) * 8)
    if kind == "range":
        return _range(enc.range, n, io)
    if kind == "delta":
        return _delta(enc.delta, buffers, n, io)
    if kind == "variable_packed_struct":
        raise unsupported(io, "variable packed structs outside full-zip pages")
    raise unsupported(io, f"value compression {kind!r}")


def _inline_bitpacking(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Fixed:
    t = int(enc.uncompressed_bits_per_value)
    words = _words(data, t, io)
    if n < 0:
        raise io.corrupt("inline bitpacking needs a value count")
    out = []
    at = 0
    for _ in range(-(-n // fastlanes.BLOCK)):  # each block starts with one word holding its bit width
        if at >= words.size:
            raise io.corrupt("inline bitpacking runs out of words")
        w = int(words[at])
        if w > t:
            raise io.corrupt(f"bit width {w} exceeds {t}")
        size = w * fastlanes.BLOCK // t
        if at + 1 + size > words.size:
            raise io.corrupt("inline bitpacking block runs past its buffer")
        out.append(fastlanes.unpack(words[at + 1 : at + 1 + size], t, w, 1))
        at += 1 + size
    values = np.concatenate(out)[:n] if out else np.zeros(0, fastlanes.DTYPES[t])
    return Fixed(values.tobytes(), t)


def _out_of_line_bitpacking(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Fixed:
    t = int(enc.uncompressed_bits_per_value)
    if _kind(enc.values, io) != "flat":
        raise unsupported(io, "out-of-line bitpacking over a non-flat encoding")
    w = int(enc.values.flat.bits_per_value)
    words = _words(data, t, io)
    if w > t:
        raise io.corrupt(f"bit width {w} exceeds {t}")
    if n < 0:
        raise io.corrupt("out-of-line bitpacking needs a value count")
    full, tail = divmod(n, fastlanes.BLOCK)
    per_block = w * fastlanes.BLOCK // t
    if words.size < full * per_block + (tail and min(tail, per_block)):
        raise io.corrupt("out-of-line bitpacking runs out of words")
    values = fastlanes.unpack(words, t, w, full)
    if tail:
        rest = words[full * per_block :]
        if rest.size == tail:  # a short tail may be stored unpacked
            values = np.concatenate([values, rest])
        else:
            if rest.size < per_block:
                raise io.corrupt("out-of-line bitpacking tail is cut short")
            values = np.concatenate([values, fastlanes.unpack(rest, t, w, 1)[:tail]])
    return Fixed(values.tobytes(), t)


def _variable(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Var:
    """Mini-block variable values: n + 1 offsets counted from the buffer start, then the bytes."""
    if _kind(enc.offsets, io) != "flat":
        raise unsupported(io, "variable-width values with compressed offsets")
    bits = int(enc.offsets.flat.bits_per_value)
    dtype = _UINT.get(bits)
    if dtype is None or n < 0 or len(data) < (n + 1) * bits // 8:
        raise io.corrupt("variable offsets do not fit their buffer")
    offsets = np.frombuffer(data, dtype, n + 1).astype(np.int64)
    if offsets[-1] > len(data) or np.any(np.diff(offsets) < 0):
        raise io.corrupt("variable offsets are out of order or past the buffer")
    return Var(data, offsets)


def _rle(enc: Any, buffers: list[bytes | memoryview], n: int, io: PageIO) -> Fixed:
    if len(buffers) == 1:
        # block form (levels): [u64 size of the values][values][run lengths]
        block = buffers.pop(0)
        if len(block) < 8:
            raise io.corrupt("RLE block without its length prefix")
        (size,) = struct.unpack_from("<Q", block, 0)
        if 8 + size > len(block):
            raise io.corrupt("RLE block values run past the block")
        buffers[:0] = [memoryview(block)[8 : 8 + size], memoryview(block)[8 + size :]]
    run_values = decode_values(enc.values, buffers, -1, io)
    run_lengths = decode_values(enc.run_lengths, buffers, -1, io)
    if (
        not isinstance(run_values, Fixed)
        or not isinstance(run_lengths, Fixed)
        or run_values.bits not in fastlanes.DTYPES
        or run_lengths.bits not in fastlanes.DTYPES
    ):
        raise io.corrupt("RLE runs are not fixed-width integers")
    raw = np.frombuffer(run_lengths.data, fastlanes.DTYPES[run_lengths.bits]).astype(np.uint64)
    vals = np.frombuffer(run_values.data, fastlanes.DTYPES[run_values.bits])[: raw.size]
    raw = raw[: vals.size]
    if n < 0:
        if raw.size and int(raw.max()) > 1 << 32:
            raise io.corrupt("an RLE run is longer than any page")
        n = int(raw.sum())
    # Runs are cut to the chunk's value count before expanding, so a damaged length cannot blow up.
    counts = np.minimum(raw, np.uint64(n)).astype(np.int64)
    if int(counts.sum()) < n:
        raise io.corrupt("RLE runs cover fewer values than the chunk holds")
    cut = int(np.searchsorted(np.cumsum(counts), n)) + 1
    return Fixed(np.repeat(vals[:cut], counts[:cut])[:n].tobytes(), run_values.bits)


def _byte_stream_split(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Fixed:
    """Byte ``j`` of value ``i`` is stored at ``j * n + i`` (one stream per byte position)."""
    if _kind(enc.values, io) != "flat":
        raise unsupported(io, "byte-stream split over a non-flat encoding")
    bits = int(enc.values.flat.bits_per_value)
    if bits <= 0 or bits % 8 or bits > 64:
        raise io.corrupt(f"byte-stream split of {bits}-bit values")
    width = bits // 8
    if n < 0:
        n = len(data) // width
    if len(data) < n * width:
        raise io.corrupt(
            f"byte-stream split buffer of {len(data)} bytes cannot hold {n} values of {bits} bits"
        )
    planes = np.frombuffer(data, np.uint8, n * width).reshape(width, n)
    return Fixed(planes.T.tobytes(), bits)


def _fsl_chain(enc: Any, io: PageIO) -> tuple[list[tuple[int, bool]], Any]:
    """The fixed-size-list levels of an encoding, outermost first, and the encoding of their items."""
    levels = []
    while _kind(enc, io) == "fixed_size_list":
        dim = int(enc.fixed_size_list.items_per_value)
        if dim <= 0:
            raise io.corrupt(f"a fixed-size list of {dim} items")
        levels.append((dim, bool(enc.fixed_size_list.has_validity)))
        enc = enc.fixed_size_list.values
    return levels, enc


def _fixed_size_list(enc: Any, buffers: list[bytes | memoryview], n: int, io: PageIO) -> Values:
    """Mini-block form: one validity bitmap per level that has one (outermost first), then the items.

    The per-value (full-zip) form of lists with item validity comes as one buffer instead.
    """
    fsl = enc.fixed_size_list
    dim = int(fsl.items_per_value)
    if dim <= 0:
        raise io.corrupt(f"a fixed-size list of {dim} items")
    if len(buffers) == 1 and any(v for _, v in _fsl_chain(enc, io)[0]):
        return _fsl_per_value(enc, buffers.pop(0), n, io)
    count = n * dim if n >= 0 else -1
    valid = None
    if fsl.has_validity:
        _need_count(n, "a fixed-size list with item validity", io)
        valid = _bitmap(_take(buffers, io, "fixed-size list validity"), count, io)
    items = decode_values(fsl.values, buffers, count, io)
    if valid is None and isinstance(items, Fixed):
        return items  # flattened, as before
    _need_count(n, "a fixed-size list of lists with validity", io)
    if isinstance(items, Fixed):  # inner levels without validity came back flattened
        inner, _ = _fsl_chain(fsl.values, io)
        items = _nest(items, [d for d, _ in inner], count)
    return FixedList(items, dim, n, valid)


def _nest(leaf: Values, dims: list[int], count: int) -> Values:
    """The leaf items of ``count`` values of nested lists (``dims`` outermost first) as list
    levels without validity."""
    counts = []
    for dim in dims:
        counts.append(count)
        count *= dim
    for dim, c in zip(reversed(dims), reversed(counts)):
        leaf = FixedList(leaf, dim, c)
    return leaf


def _fsl_per_value(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Values:
    """Per-value form: each value is its levels' validity bytes (ceil(items / 8) each, outermost
    first) followed by its item bytes."""
    levels, leaf = _fsl_chain(enc, io)
    leaf_kind = _kind(leaf, io)
    total = 1
    bitmap_sizes = []
    for dim, has_validity in levels:
        total *= dim
        bitmap_sizes.append((total + 7) // 8 if has_validity else 0)
    if leaf_kind == "flat":
        bits = int(leaf.flat.bits_per_value)
        if bits <= 0 or bits % 8 or leaf.flat.HasField("data"):
            raise unsupported(io, f"per-value fixed-size lists of {bits}-bit items")
        item_bytes = bits // 8 * total
    elif leaf_kind == "constant":
        item_bytes = 0
    else:
        raise unsupported(io, f"per-value fixed-size lists of {leaf_kind} items")
    row = sum(bitmap_sizes) + item_bytes
    if n < 0:
        n = len(data) // row if row else 0
    if len(data) < n * row:
        raise io.corrupt(f"{len(data)} bytes cannot hold {n} fixed-size lists of {row} bytes")
    table = np.frombuffer(data, np.uint8, n * row).reshape(n, row)
    valids: list[np.ndarray | None] = []
    at = 0
    per_value = 1
    for (dim, _), size in zip(levels, bitmap_sizes):
        per_value *= dim
        if not size:
            valids.append(None)
            continue
        bits_of = np.unpackbits(table[:, at : at + size], axis=1, bitorder="little")[:, :per_value]
        valids.append(bits_of.reshape(-1).astype(bool))
        at += size
    values: Values = decode_values(leaf, [table[:, at:].tobytes()], n * total, io)
    count = n * total
    for (dim, _), valid in zip(reversed(levels), reversed(valids)):
        count //= dim
        values = FixedList(values, dim, count, valid)
    return values


def _packed_struct(enc: Any, buffers: list[bytes | memoryview], n: int, io: PageIO) -> Struct:
    """Rows of all fields back to back (``bits_per_value`` per field), split into one child each."""
    widths = [int(w) for w in enc.bits_per_value]
    if not widths or any(w <= 0 or w % 8 for w in widths):
        raise io.corrupt(f"packed struct field widths {widths} are not whole bytes")
    _need_count(n, "a packed struct", io)
    rows = decode_values(enc.values, buffers, n, io)
    if not isinstance(rows, Fixed) or rows.bits != sum(widths):
        raise io.corrupt(f"packed struct rows are not {sum(widths)}-bit values")
    row = sum(widths) // 8
    if len(rows.data) < n * row:
        raise io.corrupt(f"{len(rows.data)} bytes cannot hold {n} packed rows of {row} bytes")
    table = np.frombuffer(rows.data, np.uint8, n * row).reshape(n, row)
    children: list[Values] = []
    at = 0
    for w in widths:
        children.append(Fixed(table[:, at : at + w // 8].tobytes(), w))
        at += w // 8
    return Struct(children)


def _range(enc: Any, n: int, io: PageIO) -> Fixed:
    """``start + i * step`` (unsigned); nothing is stored."""
    bits = int(enc.bits_per_value)
    dtype = _UINT.get(bits)
    if dtype is None:
        raise io.corrupt(f"a range of {bits}-bit values")
    _need_count(n, "a range", io)
    start, step = int(enc.start), int(enc.step)
    if n and start + step * (n - 1) >= 1 << bits:
        raise io.corrupt(f"a range of {n} values from {start} by {step} overflows {bits} bits")
    values = np.uint64(start) + np.arange(n, dtype=np.uint64) * np.uint64(step)
    return Fixed(values.astype(dtype).tobytes(), bits)


def _delta(enc: Any, buffers: list[bytes | memoryview], n: int, io: PageIO) -> Fixed:
    """``base`` followed by the running sums of the n - 1 stored differences (unsigned)."""
    bits = int(enc.bits_per_value)
    dtype = _UINT.get(bits)
    if dtype is None:
        raise io.corrupt(f"a delta sequence of {bits}-bit values")
    base = int(enc.base)
    if base >= 1 << bits:
        raise io.corrupt(f"delta base {base} does not fit {bits} bits")
    if n == 0:
        return Fixed(b"", bits)
    deltas = decode_values(enc.deltas, buffers, n - 1 if n > 0 else -1, io)
    if not isinstance(deltas, Fixed) or deltas.bits != bits:
        raise io.corrupt(f"delta differences are not {bits}-bit values")
    if n < 0:
        n = len(deltas.data) * 8 // bits + 1
    if len(deltas.data) < (n - 1) * bits // 8:
        raise io.corrupt(f"{len(deltas.data)} bytes cannot hold {n - 1} differences")
    steps = np.frombuffer(deltas.data, dtype, n - 1).astype(np.uint64)
    sums = np.cumsum(steps, dtype=np.uint64)
    if sums.size and (bool(np.any(sums[1:] < sums[:-1])) or base + int(sums[-1]) >= 1 << bits):
        raise io.corrupt(f"delta sequence overflows {bits} bits")
    values = np.concatenate([np.zeros(1, np.uint64), sums]) + np.uint64(base)
    return Fixed(values.astype(dtype).tobytes(), bits)


def decode_block(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Values:
    """The whole-buffer ("block") form used for dictionaries."""
    kind = _kind(enc, io)
    if kind == "general":
        return decode_block(enc.general.values, _general(enc.general.compression, data, io), n, io)
    if kind == "variable":
        if len(data) < 8:
            raise io.corrupt("dictionary block without its header")
        (bits,) = struct.unpack_from("<I", data, 0)
        if bits == 32:
            (start,) = struct.unpack_from("<I", data, 4)
            head = 8
        elif bits == 64:
            if len(data) < 16:
                raise io.corrupt("dictionary block without its header")
            (start,) = struct.unpack_from("<Q", data, 8)
            head = 16
        else:
            raise io.corrupt(f"dictionary offsets of {bits} bits")
        if n < 0 or head + (n + 1) * bits // 8 > len(data) or start > len(data):
            raise io.corrupt("dictionary offsets run past the block")
        offsets = np.frombuffer(data, _UINT[bits], n + 1, head).astype(np.int64)
        body = memoryview(data)[start:]
        if offsets.size and (offsets[-1] > len(body) or np.any(np.diff(offsets) < 0)):
            raise io.corrupt("dictionary offsets are out of order or past the buffer")
        return Var(body, offsets)
    return decode_values(enc, [data], n, io)


# -- per-value (full-zip) values -----------------------------------------------------------------


def _le(u8: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned integers of ``width`` (4 or 8) bytes at byte positions ``pos``."""
    grid = u8[pos[:, None] + np.arange(width)]
    return np.ascontiguousarray(grid).view("<u4" if width == 4 else "<u8").reshape(-1).astype(np.int64)


def _gather(u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The byte ranges ``[starts, starts + lengths)`` of ``u8``, concatenated."""
    total = int(lengths.sum())
    out_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if lengths.size else lengths
    idx = np.arange(total, dtype=np.int64) + np.repeat(starts - out_starts, lengths)
    return u8[idx]


def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def decode_per_value(enc: Any, values: Var, io: PageIO) -> Values:
    """Variable-width values of a full-zip page (one compressed value each) -> their contents.

    ``values`` are the page's values with their length prefixes removed. Handles plain variable
    values, FSST (left compressed; :func:`to_arrow` expands it), per-value general compression and
    variable packed structs.
    """
    kind = _kind(enc, io)
    if kind == "variable":
        return values
    if kind == "fsst":
        if _kind(enc.fsst.values, io) != "variable":
            raise unsupported(io, "per-value FSST over a non-variable encoding")
        return Var(values.data, values.offsets, bytes(enc.fsst.symbol_table))
    if kind == "general":
        return _per_value_general(enc.general, values, io)
    if kind == "variable_packed_struct":
        return _variable_packed_struct(enc.variable_packed_struct, values, io)
    raise unsupported(io, f"per-value compression {kind!r}")


def _per_value_general(enc: Any, values: Var, io: PageIO) -> Values:
    """Each value compressed on its own: ZSTD values are ``[u64 length][frame]``.

    The frames are joined and decompressed in one call (zstd decodes concatenated frames).
    """
    scheme = _SCHEMES.get(enc.compression.scheme)
    if scheme != "zstd":
        raise unsupported(io, f"per-value {scheme or enc.compression.scheme} compression")
    if _kind(enc.values, io) != "variable":
        raise unsupported(io, "per-value general compression of non-variable values")
    u8 = np.frombuffer(values.data, np.uint8)
    starts = values.offsets[:-1]
    sizes = np.diff(values.offsets)
    if starts.size and int(starts[0]) < 0:
        raise io.corrupt("compressed values start before their buffer")
    if sizes.size and int(sizes.min()) < 8:
        raise io.corrupt("a compressed value is shorter than its length header")
    if values.offsets.size and int(values.offsets[-1]) > u8.size:
        raise io.corrupt("compressed values run past their buffer")
    lengths = _le(u8, starts, 8) if sizes.size else np.zeros(0, np.int64)
    if bool(np.any(lengths < 0)):
        raise io.corrupt("a compressed value claims a negative length")
    total = int(lengths.sum())
    frames = _gather(u8, starts + 8, sizes - 8)
    if total > 1024 * max(frames.size, 64) + (1 << 20):
        raise io.corrupt(f"{frames.size} compressed bytes claim {total} bytes of values")
    if total == 0:
        return Var(b"", _offsets(lengths))
    try:
        out = pa.Codec("zstd").decompress(frames.tobytes(), decompressed_size=total)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise io.corrupt(f"compressed values do not decompress ({exc})") from exc
    return Var(memoryview(out), _offsets(lengths))


def _variable_packed_struct(enc: Any, values: Var, io: PageIO) -> Struct:
    """Each row is its fields back to back: fixed-width fields as ``bits_per_value / 8`` bytes,
    variable-width ones as ``[length][bytes]``; each field is then decoded on its own."""
    u8 = np.frombuffer(values.data, np.uint8)
    offsets = values.offsets
    if offsets.size < 1 or int(offsets[-1]) > u8.size or bool(np.any(np.diff(offsets) < 0)):
        raise io.corrupt("packed struct rows do not fit their buffer")
    present = np.diff(offsets) > 0
    cursor = offsets[:-1][present]
    ends = offsets[1:][present]
    n = int(cursor.size)
    children: list[Values] = []
    for i, field in enumerate(enc.fields):
        layout = field.WhichOneof("layout")
        if layout == "bits_per_value":
            bits = int(field.bits_per_value)
            if bits <= 0 or bits % 8:
                raise unsupported(io, f"packed struct field {i} of {bits} bits")
            width = bits // 8
            if n and bool(np.any(cursor + width > ends)):
                raise io.corrupt(f"packed struct field {i} runs past its row")
            data = _gather(u8, cursor, np.full(n, width, np.int64)).tobytes()
            cursor = cursor + width
            children.append(decode_values(field.value, [data], n, io))
        elif layout == "bits_per_length":
            prefix = int(field.bits_per_length) // 8
            if prefix not in (4, 8):
                raise io.corrupt(f"packed struct field {i} has {prefix * 8}-bit lengths")
            if n and bool(np.any(cursor + prefix > ends)):
                raise io.corrupt(f"packed struct field {i} length runs past its row")
            lengths = _le(u8, cursor, prefix) if n else np.zeros(0, np.int64)
            starts = cursor + prefix
            if bool(np.any(lengths < 0)) or (n and bool(np.any(starts + lengths > ends))):
                raise io.corrupt(f"packed struct field {i} runs past its row")
            data = _gather(u8, starts, lengths).tobytes()
            cursor = starts + lengths
            children.append(decode_per_value(field.value, Var(data, _offsets(lengths)), io))
        else:
            raise io.corrupt(f"packed struct field {i} has neither a width nor a length size")
    if n and bool(np.any(cursor != ends)):
        raise io.corrupt("packed struct rows hold bytes past their last field")
    return Struct(children, None if present.all() else present)


# -- Arrow ---------------------------------------------------------------------------------------


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
        values = expand(values, io)
        if values.offsets.size < n + 1:
            raise io.corrupt(f"{values.offsets.size - 1} values cannot fill {n} rows")
        valid = np.ones(n, bool)
        lengths = np.diff(values.offsets[: n + 1])
        lo = int(values.offsets[0])
        return build_binary(dtype, valid, lengths, pa.py_buffer(values.data), lo, io)
    if n == 0 and not values.data:
        return pa.array([], type=dtype)
    if pa.types.is_boolean(dtype):
        if values.bits == 1:
            if len(values.data) * 8 < n:
                raise io.corrupt(f"{len(values.data)} bytes cannot hold {n} booleans")
            return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(values.data)])
        if values.bits not in fastlanes.DTYPES:
            raise io.corrupt(f"{values.bits}-bit values cannot be read as booleans")
        flags = np.frombuffer(values.data, fastlanes.DTYPES[values.bits])[:n] != 0
        return pa.array(flags, pa.bool_())
    if pa.types.is_fixed_size_list(dtype):
        items = to_arrow(values, dtype.value_type, n * dtype.list_size, io)
        return pa.FixedSizeListArray.from_arrays(items, type=dtype)
    width = _byte_width(dtype)
    if not width:
        raise io.corrupt(f"{values.bits}-bit values cannot be read as {dtype}")
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


def _byte_width(dtype: pa.DataType) -> int:
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
    return rows.take(pa.array(where, mask=~present)) if m else pa.nulls(n, dtype)


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
    """The values of several chunks of one page, joined (all pieces have the same form)."""
    first = pieces[0]
    if isinstance(first, Fixed):
        if any(not isinstance(p, Fixed) or p.bits != first.bits for p in pieces):
            raise io.corrupt("the chunks of a page decode to different value widths")
        return Fixed(b"".join(bytes(p.data) for p in pieces if isinstance(p, Fixed)), first.bits)
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
        datas.append(bytes(p.data[lo:hi]))
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


def decode_levels(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> np.ndarray:
    values = decode_values(enc, [data], n, io)
    if not isinstance(values, Fixed) or values.bits not in (1, *fastlanes.DTYPES):
        raise io.corrupt("repetition/definition levels are not fixed-width integers")
    if values.bits == 1:
        return np.unpackbits(np.frombuffer(values.data, np.uint8), bitorder="little")[:n].astype(np.uint16)
    return np.frombuffer(values.data, fastlanes.DTYPES[values.bits])[:n].astype(np.uint16)
