"""The plain kinds of mini-block values of the Lance 2.1/2.2 writer, and what they build on.

:class:`MiniBlockValues` is the interface the chunk planner drives (sizes of any range of values,
then that range's buffers); here are its uncompressed and bitpacked kinds: :class:`FixedValues`
(flat fixed widths, bools as bitmaps, fixed-size lists with item validity, packed structs),
:class:`VariableValues` (offsets and bytes) and :class:`BitpackedValues` (FastLanes blocks).
The compressions that wrap or replace them are chosen in :mod:`values_encode`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.errors import UnsupportedFormatError
from lance_table.file.compression import bitpacking
from lance_table.file.v2_1.batch import spans

PAD_BYTE = 0x48


def flat(bits: int) -> Any:
    enc = pb.CompressiveEncoding()
    enc.flat.bits_per_value = bits
    return enc


def fixed_bits(t: pa.DataType) -> int | None:
    """Bits per value of a fixed-width Arrow type (None for variable-width or nested types)."""
    if pa.types.is_fixed_size_list(t):
        inner = fixed_bits(t.value_type)
        return None if inner is None else inner * t.list_size
    if pa.types.is_struct(t) or pa.types.is_dictionary(t) or pa.types.is_null(t):
        return None
    try:
        return int(t.bit_width)
    except ValueError:
        return None


def validity_of(arr: pa.Array) -> np.ndarray | None:
    if not arr.null_count:
        return None
    return np.asarray(arr.is_valid(), dtype=bool)


def bit_values(arr: pa.Array) -> np.ndarray:
    """The values of a boolean array as a bool array."""
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or not n:
        return np.zeros(n, bool)
    raw = np.frombuffer(buf, np.uint8)
    return np.unpackbits(raw, bitorder="little")[arr.offset : arr.offset + n].astype(bool)


def byte_values(arr: pa.Array, width: int) -> np.ndarray:
    """The values of a byte-aligned fixed-width array, ``width`` bytes each, as a (n, width) table."""
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or not n:
        return np.zeros((n, width), np.uint8)
    return np.frombuffer(buf, np.uint8, n * width, arr.offset * width).reshape(n, width)


@dataclass
class Leaf:
    """Fixed-width leaf items: bools (``bits`` 1) or a byte table."""

    bits: int
    flags: np.ndarray | None = None  # bools
    table: np.ndarray | None = None  # (items, bytes)

    def chunk(self, start: int, stop: int) -> bytes:
        if self.flags is not None:
            return np.packbits(self.flags[start:stop], bitorder="little").tobytes()
        assert self.table is not None
        return self.table[start:stop].tobytes()

    def size(self, count: int) -> int:
        return (count * self.bits + 7) // 8


def leaf_of(arr: pa.Array, what: str) -> Leaf:
    t = arr.type
    if pa.types.is_struct(t):  # packed struct: fields side by side
        parts = [leaf_of(arr.field(i), what) for i in range(t.num_fields)]
        if any(p.table is None for p in parts):
            raise UnsupportedFormatError(f"{what}: packed structs of booleans are not written")
        table = np.hstack([p.table for p in parts if p.table is not None])
        return Leaf(table.shape[1] * 8, table=table)
    bits = fixed_bits(t)
    if bits is None:
        raise UnsupportedFormatError(f"{what}: values of type {t} are not written in Lance 2.1/2.2 files")
    if bits == 1:
        return Leaf(1, flags=bit_values(arr))
    if bits % 8:
        raise UnsupportedFormatError(f"{what}: {bits}-bit values are not written")
    return Leaf(bits, table=byte_values(arr, bits // 8))


@dataclass
class MiniBlockValues:
    """Values cut into mini-block chunks: ``sizes`` and ``chunk`` take a value range."""

    encoding: Any
    num_buffers: int
    max_value_bytes: int  # the widest value (decides mini-block against full-zip)
    max_chunk_values: ClassVar[int] = 4096  # pylance's readers accept no more per chunk
    aim_bytes: ClassVar[int | None] = 4096  # a chunk's values aim at this size (None: whole blocks decide)
    # the values are indices into this dictionary: (its encoding, its page buffer, its item count)
    dictionary: tuple[Any, bytes, int] | None = field(default=None, kw_only=True)
    #: whether :meth:`sizes` depends on the number of values alone (and :meth:`fits` is always true)
    count_sized: ClassVar[bool] = False

    def chunk_values_limit(self) -> int:
        """The most values one chunk may hold."""
        return self.max_chunk_values

    def chunk_aim(self) -> int | None:
        """The size a chunk's values aim at (None: only the limits decide)."""
        return self.aim_bytes

    def fits(self, start: int, stop: int) -> bool:
        """Whether the values may share a chunk (besides the planner's size limits)."""
        return True

    def sizes(self, start: int, stop: int) -> list[int]:  # pragma: no cover - interface
        raise NotImplementedError

    def size_bounds(self, start: int, stop: int) -> list[int] | None:
        """Upper bounds of :meth:`sizes` that are cheaper to know (None: only the sizes)."""
        return None

    def many_sizes(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray | None:
        """The size of each range's one buffer, for many ranges at once (None: values that have
        more buffers or size ranges one by one). Values that answer put no other limit on which
        values share a chunk (:meth:`fits`, :meth:`chunk_aim`)."""
        return None

    def prepare(self, ranges: list[tuple[int, int]]) -> None:
        """The page's chunks are these value ranges: a chance to build them all at once."""

    def chunk(self, start: int, stop: int) -> list[bytes]:  # pragma: no cover - interface
        raise NotImplementedError

    def compressed_variable(self) -> tuple[VariableValues, int] | None:
        """For values whose one chunk buffer is a chunk of plain variable values compressed whole:
        those values and the most raw bytes a chunk of them takes (None: other values)."""
        return None

    def compress(self, raws: list[memoryview]) -> list[bytes]:  # pragma: no cover - interface
        """Raw chunk buffers compressed (values with :meth:`compressed_variable` only)."""
        raise NotImplementedError


@dataclass
class FixedValues(MiniBlockValues):
    """``flat`` values, or fixed-size lists of them: item validity bitmaps first, then the items."""

    leaf: Leaf = field(default_factory=lambda: Leaf(8))
    # per fixed-size-list level with validity: (items per value at that level, item validity)
    bitmaps: list[tuple[int, np.ndarray]] = field(default_factory=list)
    per_value: int = 1  # leaf items per value
    count_sized: ClassVar[bool] = True

    def sizes(self, start: int, stop: int) -> list[int]:
        n = stop - start
        out = [(n * m + 7) // 8 for m, _ in self.bitmaps]
        out.append(self.leaf.size(n * self.per_value))
        return out

    def chunk(self, start: int, stop: int) -> list[bytes]:
        out = [np.packbits(v[start * m : stop * m], bitorder="little").tobytes() for m, v in self.bitmaps]
        out.append(self.leaf.chunk(start * self.per_value, stop * self.per_value))
        return out


@dataclass
class VariableValues(MiniBlockValues):
    """``variable``: each chunk holds n + 1 offsets counted from its start, then the bytes."""

    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    data: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    width: int = 4

    def sizes(self, start: int, stop: int) -> list[int]:
        raw = (stop - start + 1) * self.width + int(self.offsets[stop] - self.offsets[start])
        return [-(-raw // self.width) * self.width]

    def chunk(self, start: int, stop: int) -> list[bytes]:
        head = (stop - start + 1) * self.width
        offs = self.offsets[start : stop + 1] - self.offsets[start] + head
        dtype = np.uint32 if self.width == 4 else np.uint64
        body = self.data[int(self.offsets[start]) : int(self.offsets[stop])]
        pad = -(head + body.size) % self.width
        return [offs.astype(dtype).tobytes() + body.tobytes() + bytes([PAD_BYTE]) * pad]


@dataclass
class BitpackedValues(MiniBlockValues):
    """``inline_bitpacking``: each chunk is FastLanes blocks of 1024 values, each block led by one
    word holding its bit width (:func:`bitpacking.pack_inline`)."""

    words: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    max_chunk_values: ClassVar[int] = 1024  # pylance reads one bitpacked block per chunk
    aim_bytes: ClassVar[int | None] = None

    _built: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def sizes(self, start: int, stop: int) -> list[int]:
        t = self.words.dtype.itemsize * 8
        if 0 < stop - start <= bitpacking.BLOCK:  # one block: its width is that of the OR
            w = int(np.bitwise_or.reduce(self.words[start:stop])).bit_length()
            return [(1 + w * (bitpacking.BLOCK // t)) * t // 8]
        widths = bitpacking.block_bit_widths(self.words[start:stop])
        return [int((widths.size + int(widths.sum()) * (bitpacking.BLOCK // t)) * t // 8)]

    def many_sizes(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray | None:
        """:meth:`sizes` of ranges of one block or less each: a width word and the block."""
        lengths = stops - starts
        if not starts.size or int(lengths.max()) > bitpacking.BLOCK or int(lengths.min()) < 1:
            return None
        t = self.words.dtype.itemsize * 8
        widths = bitpacking.bit_lengths(np.bitwise_or.reduceat(self.words, starts), t)
        return (1 + widths * (bitpacking.BLOCK // t)) * t // 8

    def prepare(self, ranges: list[tuple[int, int]]) -> None:
        """Pack every chunk (each one block) of the page in one pass per bit width."""
        self._built = {}
        if not ranges:
            return
        if len(ranges) == 1:  # one chunk (a small page): packed when asked for, by :meth:`chunk`
            return
        bounds = np.array(ranges, np.int64).reshape(-1, 2)
        lengths = bounds[:, 1] - bounds[:, 0]
        if int(lengths.max()) > bitpacking.BLOCK or int(lengths.min()) < 1:
            return
        n = bounds.shape[0]
        rows = np.zeros(n * bitpacking.BLOCK, self.words.dtype)
        back_to_back = int(bounds[0, 0]) == 0 and bool(np.all(bounds[1:, 0] == bounds[:-1, 1]))
        if back_to_back and bool(np.all(lengths[:-1] == bitpacking.BLOCK)):
            # whole blocks back to back (the last one short): the values are the rows already
            rows[: int(bounds[-1, 1])] = self.words[: int(bounds[-1, 1])]
        else:
            into = np.arange(n, dtype=np.int64) * bitpacking.BLOCK
            rows[spans(into, lengths)] = self.words[spans(bounds[:, 0], lengths)]
        words, starts = bitpacking.pack_inline_blocks(rows.reshape(n, bitpacking.BLOCK))
        raw = words.tobytes()
        width = words.dtype.itemsize
        ends = np.append(starts[1:], words.size) * width
        for key, lo, hi in zip(ranges, (starts * width).tolist(), ends.tolist()):
            self._built[key] = raw[lo:hi]

    def chunk(self, start: int, stop: int) -> list[bytes]:
        got = self._built.get((start, stop))
        if got is not None:
            return [got]
        return [bitpacking.pack_inline(self.words[start:stop]).tobytes()]


# Bitpacking must save at least 1/PACK_MIN_SAVING of the bits to earn its decoding cost (random
# doubles save 2 of 64 bits and decode several times slower than flat values).
PACK_MIN_SAVING = 8


def bitpacked(values: pa.Array) -> BitpackedValues | None:
    """Integers (or floats, by their bits, as pylance does) that FastLanes bitpacking makes
    clearly smaller (see :data:`PACK_MIN_SAVING`), or None."""
    t = values.type
    if not (pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)) or not len(values):
        return None
    bits = t.bit_width
    words = byte_values(values, bits // 8).reshape(-1).view(bitpacking.DTYPES[bits])
    width = bitpacking.bit_width(words)
    if width > bits - bits // PACK_MIN_SAVING:
        return None
    # Blocks hold 1024 values (the last one padded) after a width word: a short page (a small
    # append's) packs into more bytes than its plain values, as pylance finds too.
    n = words.size
    packed = -(-n // bitpacking.BLOCK) * (bits + width * bitpacking.BLOCK)
    if packed > n * bits - n * bits // PACK_MIN_SAVING:
        return None
    enc = pb.CompressiveEncoding()
    enc.inline_bitpacking.uncompressed_bits_per_value = bits
    return BitpackedValues(enc, 1, bits // 8, words)


def variable_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The n + 1 offsets (from 0) and the bytes of a binary or string array (read-only arrays).

    The answers for the last two arrays asked about are kept (for as long as those live): a
    page's writer asks up to three times of its values (constant or not, the widest value, the
    plain encoding) and twice of its dictionary's items."""
    for ref, parts in _last_parts:
        if ref() is arr:
            return parts
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    n = len(arr)
    bufs = arr.buffers()
    if bufs[1] is None or not n:
        offsets, data = np.zeros(n + 1, np.int64), np.zeros(0, np.uint8)
    else:
        dtype = np.int64 if large else np.int32
        offs = np.frombuffer(bufs[1], dtype, n + 1, arr.offset * np.dtype(dtype).itemsize).astype(np.int64)
        whole = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        offsets, data = offs - offs[0], whole[int(offs[0]) : int(offs[-1])]
    offsets.flags.writeable = False  # (shared by every caller asking about the array)
    data.flags.writeable = False
    _last_parts[:] = [(weakref.ref(arr), (offsets, data)), *_last_parts[:1]]
    return offsets, data


#: the last two arrays :func:`variable_parts` answered for (weakly) and its answers, newest first
_last_parts: list[tuple[weakref.ref[pa.Array], tuple[np.ndarray, np.ndarray]]] = []


def fsl_levels(arr: pa.Array) -> tuple[list[tuple[int, np.ndarray | None]], pa.Array]:
    """The fixed-size-list levels of an array (outermost first: items per value so far, item
    validity) and its leaf items."""
    levels: list[tuple[int, np.ndarray | None]] = []
    per_value = 1
    while pa.types.is_fixed_size_list(arr.type):
        dim = arr.type.list_size
        arr = arr.values.slice(arr.offset * dim, len(arr) * dim)
        per_value *= dim
        levels.append((per_value, validity_of(arr)))
    return levels, arr


def fsl_encoding(levels: list[tuple[int, np.ndarray | None]], leaf_enc: Any) -> Any:
    enc = leaf_enc
    prev = 1
    dims = []
    for per_value, _ in levels:
        dims.append(per_value // prev)
        prev = per_value
    for (_, valid), dim in zip(reversed(levels), reversed(dims)):
        outer = pb.CompressiveEncoding()
        outer.fixed_size_list.items_per_value = dim
        outer.fixed_size_list.values.CopyFrom(enc)
        outer.fixed_size_list.has_validity = valid is not None
        enc = outer
    return enc


def leaf_encoding(leaf_arr: pa.Array, leaf: Leaf) -> Any:
    t = leaf_arr.type
    if pa.types.is_struct(t):
        enc = pb.CompressiveEncoding()
        for i in range(t.num_fields):
            enc.packed_struct.bits_per_value.append(int(fixed_bits(t.field(i).type) or 0))
        enc.packed_struct.values.CopyFrom(flat(leaf.bits))
        return enc
    return flat(leaf.bits)
