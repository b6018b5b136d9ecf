"""One-chunk mini-block pages of small appends, written without the general machinery.

A small append (a hundred rows) writes one page per column, and most of a page's cost is fixed:
the general path (:func:`values_encode.compress_values`, :func:`miniblock_encode.encode_mini_block`)
builds value objects, a chunk planner and a fresh ``PageLayout`` for a page of a few hundred
bytes. The pages handled here are the commonest of those, without repetition and in one chunk:
integers, floats, temporal values and booleans stored flat (neither bitpacking nor run-length
encoding chosen for them), and strings or binary values stored plain or as flat indices into a
page dictionary (neither FSST nor zstd chunks tried). Their chunk is joined from the Arrow
buffers at once and their layout is copied from one kept per shape.

Every decision is the general path's, made on the same numbers (the bitpacking and RLE sizes of
:func:`value_kinds.bitpacked` and :func:`values_encode._rle`, the dictionary of
:func:`values_encode.small_dictionary`, the level codec of :func:`level_compress.choose`): where
the general path would choose otherwise, or the page takes more than one chunk, :func:`page`
answers None and the general path writes the page. The bytes are the same
(``tests/file/test_tiny_pages.py`` compares both over many shapes).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._lru import LRU
from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.compression import bitpacking, dictionary, fsst_encode
from lance_table.file.v2_1.level_compress import BLOCK, LevelCodec, choose, compress_one
from lance_table.file.v2_1.miniblock_fast import FILL, pad8
from lance_table.file.v2_1.value_kinds import PACK_MIN_SAVING, PAD_BYTE, MiniBlockValues, flat, variable_parts
from lance_table.file.v2_1.values_encode import (
    FSST_MIN_AVG,
    SET_COUNT_MAX,
    dictionary_block,
    small_dictionary,
    widest_value,
)

#: whether :func:`page` may answer (tests turn it off to compare with the general path)
ENABLED = True

_PAD = bytes([PAD_BYTE])  # pads variable values up to their offset width
#: values of this many bytes or more go full-zip (pylance's MINIBLOCK_MAX_BYTE_LENGTH_PER_VALUE)
FULL_ZIP_BYTES = 256
#: a chunk's values aim at this many bytes: pages of more take several chunks (general path)
_AIM = MiniBlockValues.aim_bytes or 0
_MAX_VALUES = MiniBlockValues.max_chunk_values


def page(
    values: pa.Array, defs: np.ndarray | None, kinds: list[int], large: bool
) -> tuple[Any, list[Any]] | None:
    """The layout and buffers of a one-chunk mini-block page of ``values`` (a page without
    repetition levels or hidden entries, no compression scheme of its field, not constant), with
    its definition levels ``defs`` (one per value, or None) under the layers ``kinds``; None when
    the general path must write it (other types, several chunks, other compressions)."""
    if not ENABLED:
        return None
    t = values.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return _binary_page(values, defs, kinds, large)
    return _fixed_page(values, defs, kinds, large)


def _fixed_page(
    values: pa.Array, defs: np.ndarray | None, kinds: list[int], large: bool
) -> tuple[Any, list[Any]] | None:
    """Numbers, temporal values and booleans stored flat (see :func:`page`)."""
    t = values.type
    n = len(values)
    if pa.types.is_boolean(t):
        if not 1 <= n <= _MAX_VALUES:
            return None
        return _page(_bool_bytes(values, n), ("flat", 1), n, defs, kinds, large)
    if pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t):
        packable = True
    elif pa.types.is_floating(t) or pa.types.is_temporal(t):
        packable = False
    else:
        return None
    bits = t.bit_width
    dtype = bitpacking.DTYPES.get(bits)
    width = bits // 8
    if dtype is None or n < 2 or n * width > _AIM:
        return None
    buf = values.buffers()[1]
    if buf is None:
        return None
    raw = np.frombuffer(buf, np.uint8, n * width, values.offset * width)
    if not _stays_flat(raw.view(dtype), bits, packable):
        return None
    return _page(raw.tobytes(), ("flat", bits), n, defs, kinds, large)


def _stays_flat(words: np.ndarray, bits: int, packable: bool) -> bool:
    """Whether the general path stores these values (``bits`` each, unsigned words, at least two)
    flat: neither bitpacked (:func:`value_kinds.bitpacked`, for ``packable`` types) nor, as far as
    a cheap count tells, run-length encoded (:func:`values_encode._rle` weighs runs of 4 values or
    more on average)."""
    n = words.size
    if packable:
        w = int(np.bitwise_or.reduce(words)).bit_length()
        packed = -(-n // bitpacking.BLOCK) * (bits + w * bitpacking.BLOCK)
        if w <= bits - bits // PACK_MIN_SAVING and packed <= n * bits - n * bits // PACK_MIN_SAVING:
            return False
    return (int(np.count_nonzero(words[1:] != words[:-1])) + 1) * 4 > n


def _binary_page(
    values: pa.Array, defs: np.ndarray | None, kinds: list[int], large: bool
) -> tuple[Any, list[Any]] | None:
    """Strings or binary values (32-bit offsets) stored plain or as indices into a page dictionary,
    as :func:`values_encode._base_values` chooses when neither FSST nor zstd chunks are tried
    (pages under 32 KiB, or of 5 bytes a value or fewer), in one chunk (see :func:`page`)."""
    n = len(values)
    if not 1 <= n <= SET_COUNT_MAX:
        return None
    offsets, data = variable_parts(values)
    if widest_value(values) >= FULL_ZIP_BYTES:
        return None
    if data.size >= fsst_encode.MIN_INPUT and data.size > FSST_MIN_AVG * n:
        return None
    plain = -(-((n + 1) * 4 + data.size) // 4) * 4  # VariableValues.sizes
    small = small_dictionary(values) if n >= dictionary.MIN_VALUES else None
    if small is not None:
        items, indices = small
        enc, block = dictionary_block(items, large)
        if not _stays_flat(indices, 32, True):
            return None
        if len(block) + 4 * n < plain:
            return _page(indices.tobytes(), ("flat", 32), n, defs, kinds, large, (enc, block, len(items)))
    if n > 2 and plain > _AIM:
        return None
    head = (n + 1) * 4
    rebased = offsets if int(offsets[0]) == 0 else offsets - offsets[0]
    chunk = [(rebased + head).astype(np.uint32).tobytes(), data.tobytes(), _PAD * (plain - head - data.size)]
    return _page(b"".join(chunk), ("variable", 32), n, defs, kinds, large)


def _bool_bytes(values: pa.Array, n: int) -> bytes:
    """The values of a boolean array as a bitmap from bit 0 (the bits past the last value zero)."""
    buf = values.buffers()[1]
    if buf is None:
        return bytes((n + 7) // 8)
    raw = np.frombuffer(buf, np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[values.offset : values.offset + n]
    return np.packbits(bits, bitorder="little").tobytes()


def _page(
    data: bytes,
    encoding: tuple[str, int],
    n: int,
    defs: np.ndarray | None,
    kinds: list[int],
    large: bool,
    dictionary: tuple[Any, bytes, int] | None = None,
) -> tuple[Any, list[Any]] | None:
    """The page of one chunk of ``n`` values (their buffer ``data``, encoded ``flat`` or
    ``variable`` at ``encoding``'s bits) and their levels, as :func:`miniblock_fast._assemble_few`
    joins it, then a page ``dictionary`` (encoding, buffer, items) if any; None when the chunk
    passes the limit."""
    size = len(data)
    size_code = "I" if large else "H"
    codec: LevelCodec | None = None
    if defs is None:
        head = struct.pack(f"<H{size_code}", 0, size)
        parts = [head, FILL * (pad8(len(head)) - len(head))]
    else:
        codec, level_bytes = _levels(defs, large)
        length = len(level_bytes)
        head = struct.pack(f"<2H{size_code}", n & 0xFFFF, length & 0xFFFF, size)
        parts = [head, FILL * (pad8(len(head)) - len(head)), level_bytes, FILL * (-length % 8)]
    parts += [data, FILL * (-size % 8)]
    chunk = b"".join(parts)
    if len(chunk) > ((1 << 18) if large else (1 << 15)):
        return None  # (levels that RLE makes larger than the limit: the general path stores them flat)
    word = struct.pack(f"<{size_code}", (len(chunk) // 8 - 1) << 4)
    layout = pb.PageLayout()
    layout.CopyFrom(_template(encoding, codec, tuple(kinds), large))
    mini = layout.mini_block_layout
    mini.num_items = n
    if dictionary is None:
        return layout, [word, chunk]
    mini.dictionary.CopyFrom(dictionary[0])
    mini.num_dictionary_items = dictionary[2]
    return layout, [word, chunk, dictionary[1]]


def _levels(defs: np.ndarray, large: bool) -> tuple[LevelCodec, bytes]:
    """The codec :func:`level_compress.choose` picks for a page's definition levels and their one
    chunk as :func:`level_compress.compress_chunks` makes it: levels that are all 0 (a nullable
    field without nulls) are inline bitpacking's one width word without a look at their codec."""
    if defs.size <= BLOCK and not defs.any():
        return _INLINE, b"\x00\x00"
    codec = choose(defs, large)
    return codec, compress_one(defs, codec)


_INLINE = LevelCodec("inline")


def _template(
    encoding: tuple[str, int], codec: LevelCodec | None, kinds: tuple[int, ...], large: bool
) -> Any:
    """The layout of such pages but for their value count, made once per shape (copy it)."""
    key = (encoding, None if codec is None else (codec.kind, codec.width), kinds, large)
    got = _TEMPLATES.get(key)
    if got is None:
        got = pb.PageLayout()
        mini = got.mini_block_layout
        if codec is not None:
            mini.def_compression.CopyFrom(codec.encoding())
        if encoding[0] == "flat":
            mini.value_compression.CopyFrom(flat(encoding[1]))
        else:
            mini.value_compression.variable.offsets.CopyFrom(flat(encoding[1]))
        mini.layers.extend(kinds)
        mini.num_buffers = 1
        mini.has_large_chunk = large
        _TEMPLATES.put(key, got)
    return got


_TEMPLATES: LRU[tuple[Any, ...], Any] = LRU(256)
