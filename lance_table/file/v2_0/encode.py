"""Encoding of Arrow arrays into Lance 2.0 pages (``lance.encodings.ArrayEncoding`` + page buffers).

The encodings are the ones pylance's 2.0 writer produces for the same data: ``nullable`` around
``flat`` values, ``binary`` (u64 end offsets + bytes) for strings, ``fixed_size_list``,
``dictionary`` for Arrow dictionaries, ``packed_struct`` and the offsets pages of lists.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from lance_table._proto import encodings_v2_0_pb2 as pb
from lance_table.errors import SchemaError
from lance_table.file.compression import general
from lance_table.schema import is_binary_like

Buffer: TypeAlias = "bytes | memoryview | pa.Buffer"


class PageBuffers:
    """The buffers of the page being encoded; encodings refer to them by index."""

    def __init__(self) -> None:
        self.items: list[Buffer] = []

    def add(self, data: Buffer) -> int:
        self.items.append(data)
        return len(self.items) - 1


def _flat(bits: int, data: Buffer, bufs: PageBuffers) -> Any:
    enc = pb.ArrayEncoding()
    enc.flat.bits_per_value = bits
    enc.flat.buffer.buffer_index = bufs.add(data)
    return enc


def validity_bitmap(arr: pa.Array) -> Buffer:
    """LSB-first validity bits of ``arr`` (1 = valid), starting at bit 0."""
    buf = arr.buffers()[0]
    n = len(arr)
    if buf is not None and arr.offset % 8 == 0:
        start = arr.offset // 8
        return buf.slice(start, (n + 7) // 8)
    return pa.py_buffer(np.packbits(np.asarray(arr.is_valid()), bitorder="little"))


def bool_bits(arr: pa.Array) -> Buffer:
    """LSB-first value bits of a boolean array, starting at bit 0."""
    n = len(arr)
    buf = arr.buffers()[1]
    if arr.offset % 8 == 0:
        return buf.slice(arr.offset // 8, (n + 7) // 8)
    bits = np.unpackbits(np.frombuffer(buf, np.uint8), bitorder="little")[arr.offset : arr.offset + n]
    return pa.py_buffer(np.packbits(bits, bitorder="little"))


def fixed_bytes(arr: pa.Array, width: int) -> Buffer:
    """The value bytes of a fixed-width array (null slots keep whatever they hold)."""
    return arr.buffers()[1].slice(arr.offset * width, len(arr) * width)


def byte_width(t: pa.DataType) -> int:
    if pa.types.is_fixed_size_binary(t):
        return int(t.byte_width)
    return int(t.bit_width) // 8


def _nullable(arr: pa.Array, values: Any, bufs: PageBuffers) -> Any:
    """Wrap ``values(arr)`` in the ``nullable`` encoding that matches ``arr``'s nulls."""
    enc = pb.ArrayEncoding()
    n = len(arr)
    nulls = arr.null_count
    if nulls == n:  # also for empty pages, as pylance writes them
        enc.nullable.all_nulls.SetInParent()
    elif nulls:
        enc.nullable.some_nulls.validity.CopyFrom(_flat(1, validity_bitmap(arr), bufs))
        enc.nullable.some_nulls.values.CopyFrom(values(arr, bufs))
    else:
        enc.nullable.no_nulls.values.CopyFrom(values(arr, bufs))
    return enc


def _values(arr: pa.Array, bufs: PageBuffers) -> Any:
    """The value encoding (no validity) of a fixed-width, boolean or fixed-size-list array."""
    t = arr.type
    if pa.types.is_boolean(t):
        return _flat(1, bool_bits(arr), bufs)
    if pa.types.is_fixed_size_list(t):
        d = t.list_size
        # The items keep their own validity, whatever the validity of their rows (as pylance does).
        items = arr.values.slice(arr.offset * d, len(arr) * d)
        enc = pb.ArrayEncoding()
        enc.fixed_size_list.dimension = d
        enc.fixed_size_list.items.CopyFrom(_nullable(items, _values, bufs))
        return enc
    return _flat(byte_width(t) * 8, fixed_bytes(arr, byte_width(t)), bufs)


def encode_binary(arr: pa.Array, bufs: PageBuffers, compression: str | None = None) -> Any:
    """Strings and binaries: u64 end offsets (nulls store ``end + total + 1``) and the value bytes
    (compressed with ``compression``, the field's ``lance-encoding:compression``, as pylance does)."""
    return _binary_chunks([arr], bufs, compression)


def _binary_data(arr: pa.Array, large: bool) -> Buffer:
    n = len(arr)
    if not n:
        return b""
    offs = np.frombuffer(
        arr.buffers()[1], np.int64 if large else np.int32, n + 1, arr.offset * (8 if large else 4)
    )
    return arr.buffers()[2].slice(int(offs[0]), int(offs[-1] - offs[0]))


def encode_dictionary(arr: pa.DictionaryArray, bufs: PageBuffers) -> Any:
    """Arrow dictionaries: indices as stored, then the dictionary items.

    Like pylance, null indices are not stored as nulls: a null item is appended to the dictionary
    and null rows point at it.
    """
    enc = pb.ArrayEncoding()
    indices, items = arr.indices, arr.dictionary
    if indices.null_count:
        items = pa.concat_arrays([items, pa.nulls(1, items.type)])
        indices = indices.fill_null(len(items) - 1)
    enc.dictionary.indices.CopyFrom(_nullable(indices, _values, bufs))
    enc.dictionary.items.CopyFrom(encode_leaf(items, bufs))
    enc.dictionary.num_dictionary_items = len(items)
    return enc


def encode_packed_struct(arr: pa.StructArray, bufs: PageBuffers) -> Any:
    """A struct of fixed-width children stored row-major: each row is its children's bytes in order."""
    if arr.null_count:
        raise SchemaError("a packed struct cannot hold null rows in Lance 2.0")
    n = len(arr)
    enc = pb.ArrayEncoding()
    parts = []
    for i, f in enumerate(arr.type):
        child = arr.field(i)
        if child.null_count or not _is_fixed_width(f.type):
            raise SchemaError(
                f"packed struct child {f.name!r} must be fixed-width without nulls, is {f.type}"
            )
        w = byte_width(f.type)
        parts.append(np.frombuffer(fixed_bytes(child, w), np.uint8).reshape(n, w))
        inner = enc.packed_struct.inner.add()
        inner.nullable.no_nulls.values.flat.bits_per_value = w * 8
        inner.nullable.no_nulls.values.flat.buffer.SetInParent()
    rows = np.concatenate(parts, axis=1) if parts else np.zeros((n, 0), np.uint8)
    enc.packed_struct.buffer.buffer_index = bufs.add(pa.py_buffer(np.ascontiguousarray(rows)))
    return enc


def _is_fixed_width(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_temporal(t)
        or pa.types.is_decimal(t)
        or pa.types.is_fixed_size_binary(t)
    )


def encode_leaf(arr: pa.Array, bufs: PageBuffers, compression: str | None = None) -> Any:
    """The 2.0 encoding of one page of a leaf column (``compression``: of string/binary bytes)."""
    t = arr.type
    if is_binary_like(t):
        return encode_binary(arr, bufs, compression)
    if pa.types.is_dictionary(t):
        return encode_dictionary(arr, bufs)
    if pa.types.is_null(t):
        enc = pb.ArrayEncoding()
        enc.nullable.all_nulls.SetInParent()
        return enc
    if pa.types.is_boolean(t) or pa.types.is_fixed_size_list(t) or _is_fixed_width(t):
        return _nullable(arr, _values, bufs)
    raise SchemaError(f"type {t} cannot be stored in a Lance 2.0 leaf column")


def encode_leaf_chunks(chunks: list[pa.Array], bufs: PageBuffers, compression: str | None = None) -> Any:
    """The encoding of one page made of several arrays, writing their buffers piece by piece.

    Gives the same bytes as encoding the concatenated array, without the copy; types whose
    pieces cannot simply follow one another are concatenated first.
    """
    chunks = [c for c in chunks if len(c)] or chunks[:1]
    if len(chunks) == 1:
        return encode_leaf(chunks[0], bufs, compression)
    t = chunks[0].type
    if _is_fixed_width(t):
        width = byte_width(t)
        return _nullable_chunks(
            chunks, lambda: _flat(width * 8, [fixed_bytes(c, width) for c in chunks], bufs), bufs
        )
    if is_binary_like(t):
        return _binary_chunks(chunks, bufs, compression)
    return encode_leaf(pa.concat_arrays(chunks), bufs, compression)


def _nullable_chunks(chunks: list[pa.Array], values: Any, bufs: PageBuffers) -> Any:
    enc = pb.ArrayEncoding()
    n = sum(len(c) for c in chunks)
    nulls = sum(c.null_count for c in chunks)
    if nulls == n:
        enc.nullable.all_nulls.SetInParent()
    elif nulls:
        valid = np.concatenate([np.asarray(c.is_valid()) for c in chunks])
        enc.nullable.some_nulls.validity.CopyFrom(
            _flat(1, pa.py_buffer(np.packbits(valid, bitorder="little")), bufs)
        )
        enc.nullable.some_nulls.values.CopyFrom(values())
    else:
        enc.nullable.no_nulls.values.CopyFrom(values())
    return enc


def _binary_chunks(chunks: list[pa.Array], bufs: PageBuffers, compression: str | None = None) -> Any:
    large = pa.types.is_large_string(chunks[0].type) or pa.types.is_large_binary(chunks[0].type)
    lengths: list[np.ndarray] = []
    valids: list[np.ndarray | None] = []
    data: list[Buffer] = []
    for c in chunks:
        n = len(c)
        offs = np.frombuffer(
            c.buffers()[1], np.int64 if large else np.int32, n + 1, c.offset * (8 if large else 4)
        )
        if c.null_count:
            valid = np.asarray(c.is_valid())
            lengths.append(np.where(valid, np.diff(offs), 0).astype(np.uint64))
            valids.append(valid)
            data.append(_binary_data(c.filter(pa.array(valid)), large))
        else:
            lengths.append(np.diff(offs).astype(np.uint64))
            valids.append(None)
            data.append(c.buffers()[2].slice(int(offs[0]), int(offs[-1] - offs[0])))
    ends = np.cumsum(np.concatenate(lengths), dtype=np.uint64)
    total = int(ends[-1]) if ends.size else 0
    adjustment = total + 1 if ends.size else 0  # pylance leaves it 0 on empty pages
    if any(v is not None for v in valids):
        valid = np.concatenate(
            [v if v is not None else np.ones(len(c), bool) for v, c in zip(valids, chunks)]
        )
        ends = np.where(valid, ends, ends + np.uint64(adjustment))
    enc = pb.ArrayEncoding()
    enc.binary.indices.nullable.no_nulls.values.CopyFrom(_flat(64, ends.astype("<u8", copy=False), bufs))
    if compression in ("zstd", "lz4"):
        joined = b"".join(bytes(d) for d in data)
        enc.binary.bytes.CopyFrom(_flat(8, general.compress(joined, compression), bufs))
        enc.binary.bytes.flat.compression.scheme = compression
    else:
        enc.binary.bytes.CopyFrom(_flat(8, data, bufs))
        if compression == "none":  # pylance records the hint
            enc.binary.bytes.flat.compression.scheme = "none"
    enc.binary.null_adjustment = adjustment
    return enc


def encode_list_offsets(lengths: np.ndarray, valid: np.ndarray, bufs: PageBuffers) -> Any:
    """One offsets page of a list column: end offsets relative to the page's first item.

    Null lists store ``end + num_items + 1``.
    """
    ends = np.cumsum(lengths, dtype=np.uint64)
    num_items = int(ends[-1]) if ends.size else 0
    adjustment = num_items + 1
    if not valid.all():
        ends = np.where(valid, ends, ends + np.uint64(adjustment))
    enc = pb.ArrayEncoding()
    enc.list.offsets.nullable.no_nulls.values.CopyFrom(_flat(64, ends.astype("<u8", copy=False), bufs))
    enc.list.null_offset_adjustment = adjustment
    enc.list.num_items = num_items
    return enc


def struct_header() -> Any:
    enc = pb.ArrayEncoding()
    enc.struct.SetInParent()
    return enc
