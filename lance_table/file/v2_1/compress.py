"""Value compressions of Lance 2.1/2.2 pages (``lance.encodings21.CompressiveEncoding``).

Decodes the buffers of one mini-block chunk, a dictionary, a fixed-width full-zip page or a level
block into :data:`values21.Values`. Supported: flat, constant, inline and out-of-line FastLanes
bitpacking, variable, FSST, dictionary blocks, RLE, byte-stream split, general LZ4/ZSTD (per
chunk), fixed-size lists with or without item validity (mini-block and per-value forms), packed
structs, and the metadata-only range and delta sequences (which pylance 14 writes only to 2.3
files). The variable-width values of full-zip pages (one compressed value each, including variable
packed structs) are decoded by :mod:`pervalue21`; :mod:`values21` turns values into Arrow arrays.

Everything is vectorized: a chunk's values are decoded with numpy whatever their count; the Python
loops below run over encoding layers, struct fields or inline-bitpacking blocks, never over values.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from lance_table.errors import UnsupportedFormatError
from lance_table.file.compression import bitpacking, general, rle
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.values import MAX_LIST_SIZE, Fixed, FixedList, Nulls, Struct, Values, Var

SCHEMES = general.SCHEMES_BY_NUMBER
_UINT = {32: np.uint32, 64: np.uint64}


def unsupported(io: PageIO, what: str) -> UnsupportedFormatError:
    return UnsupportedFormatError(
        f"{io.what}: {what} is not supported yet in Lance 2.1/2.2 files", path=io.path
    )


def compression_kind(enc: Any, io: PageIO) -> str:
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
    scheme = SCHEMES.get(comp.scheme)
    if scheme is None:
        raise unsupported(io, f"buffer compression {comp.scheme}")
    return general.decompress(data, scheme, None, io)


def _words(data: bytes | memoryview, bits: int, io: PageIO) -> np.ndarray:
    dtype = bitpacking.DTYPES.get(bits)
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
    kind = compression_kind(enc, io)
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
    for _ in range(-(-n // bitpacking.BLOCK)):  # each block starts with one word holding its bit width
        if at >= words.size:
            raise io.corrupt("inline bitpacking runs out of words")
        w = int(words[at])
        if w > t:
            raise io.corrupt(f"bit width {w} exceeds {t}")
        size = w * bitpacking.BLOCK // t
        if at + 1 + size > words.size:
            raise io.corrupt("inline bitpacking block runs past its buffer")
        out.append(bitpacking.unpack(words[at + 1 : at + 1 + size], t, w, 1))
        at += 1 + size
    values = np.concatenate(out)[:n] if out else np.zeros(0, bitpacking.DTYPES[t])
    return Fixed(values.tobytes(), t)


def _out_of_line_bitpacking(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Fixed:
    t = int(enc.uncompressed_bits_per_value)
    if compression_kind(enc.values, io) != "flat":
        raise unsupported(io, "out-of-line bitpacking over a non-flat encoding")
    w = int(enc.values.flat.bits_per_value)
    words = _words(data, t, io)
    if w > t:
        raise io.corrupt(f"bit width {w} exceeds {t}")
    if n < 0:
        raise io.corrupt("out-of-line bitpacking needs a value count")
    full, tail = divmod(n, bitpacking.BLOCK)
    per_block = w * bitpacking.BLOCK // t
    if words.size < full * per_block + (tail and min(tail, per_block)):
        raise io.corrupt("out-of-line bitpacking runs out of words")
    values = bitpacking.unpack(words, t, w, full)
    if tail:
        rest = words[full * per_block :]
        if rest.size == tail:  # a short tail may be stored unpacked
            values = np.concatenate([values, rest])
        else:
            if rest.size < per_block:
                raise io.corrupt("out-of-line bitpacking tail is cut short")
            values = np.concatenate([values, bitpacking.unpack(rest, t, w, 1)[:tail]])
    return Fixed(values.tobytes(), t)


def _variable(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Var:
    """Mini-block variable values: n + 1 offsets counted from the buffer start, then the bytes."""
    if compression_kind(enc.offsets, io) != "flat":
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
        or run_values.bits not in bitpacking.DTYPES
        or run_lengths.bits not in bitpacking.DTYPES
    ):
        raise io.corrupt("RLE runs are not fixed-width integers")
    raw = np.frombuffer(run_lengths.data, bitpacking.DTYPES[run_lengths.bits])
    vals = np.frombuffer(run_values.data, bitpacking.DTYPES[run_values.bits])
    return Fixed(rle.expand(vals, raw, n, io).tobytes(), run_values.bits)


def _byte_stream_split(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> Fixed:
    """Byte ``j`` of value ``i`` is stored at ``j * n + i`` (one stream per byte position)."""
    if compression_kind(enc.values, io) != "flat":
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
    while compression_kind(enc, io) == "fixed_size_list":
        dim = int(enc.fixed_size_list.items_per_value)
        if not 0 < dim <= MAX_LIST_SIZE:
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
    if not 0 < dim <= MAX_LIST_SIZE:
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
    leaf_kind = compression_kind(leaf, io)
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
    kind = compression_kind(enc, io)
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


def decode_levels(enc: Any, data: bytes | memoryview, n: int, io: PageIO) -> np.ndarray:
    values = decode_values(enc, [data], n, io)
    if not isinstance(values, Fixed) or values.bits not in (1, *bitpacking.DTYPES):
        raise io.corrupt("repetition/definition levels are not fixed-width integers")
    if values.bits == 1:
        return np.unpackbits(np.frombuffer(values.data, np.uint8), bitorder="little")[:n].astype(np.uint16)
    return np.frombuffer(values.data, bitpacking.DTYPES[values.bits])[:n].astype(np.uint16)
