"""One-chunk mini-block pages of plain fixed-width values, written without the general machinery.

A small append (a hundred rows) writes one page per column, and most of a page's cost is fixed:
the general path (:func:`values_encode.compress_values`, :func:`miniblock_encode.encode_mini_block`)
builds value objects, a chunk planner and a fresh ``PageLayout`` for a page of a few hundred
bytes. The pages handled here are the commonest of those: integers, floats, temporal values and
booleans, without repetition, one chunk whose values stay within the chunk aim (4 KiB), and
neither bitpacking nor run-length encoding chosen for them. Their chunk is joined from the
Arrow buffer at once and their layout is copied from one kept per shape.

Every decision is the general path's, made on the same numbers (the bitpacking and RLE sizes of
:func:`value_kinds.bitpacked` and :func:`values_encode._rle`, the level codec of
:func:`level_compress.choose`): where the general path would choose otherwise, or the page takes
more than one chunk, :func:`fixed_page` answers None and the general path writes the page. The
bytes are the same (``tests/file/test_tiny_pages.py`` compares both over many shapes).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._lru import LRU
from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.compression import bitpacking
from lance_table.file.v2_1.level_compress import LevelCodec, choose, compress_chunks
from lance_table.file.v2_1.value_kinds import PACK_MIN_SAVING, MiniBlockValues, flat

#: whether :func:`fixed_page` may answer (tests turn it off to compare with the general path)
ENABLED = True

FILL_BYTE = 0xFE  # pylance pads inside chunks with 0xFE
_FILL = bytes([FILL_BYTE])
#: a chunk's values aim at this many bytes: pages of more take several chunks (general path)
_AIM = MiniBlockValues.aim_bytes or 0
_MAX_VALUES = MiniBlockValues.max_chunk_values


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def fixed_page(
    values: pa.Array, defs: np.ndarray | None, kinds: list[int], large: bool
) -> tuple[Any, list[bytes]] | None:
    """The layout and buffers of a one-chunk mini-block page of ``values`` (a page without
    repetition levels or hidden entries, no compression scheme of its field, not constant), with
    its definition levels ``defs`` (one per value, or None) under the layers ``kinds``; None when
    the general path must write it (other types, several chunks, bitpacked or RLE values)."""
    if not ENABLED:
        return None
    t = values.type
    n = len(values)
    if pa.types.is_boolean(t):
        if not 1 <= n <= _MAX_VALUES:
            return None
        return _page(_bool_bytes(values, n), 1, n, defs, kinds, large)
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
    words = raw.view(dtype)
    plain = n * bits - n * bits // PACK_MIN_SAVING
    if packable:  # as value_kinds.bitpacked: the general path packs these
        w = int(np.bitwise_or.reduce(words)).bit_length()
        packed = -(-n // bitpacking.BLOCK) * (bits + w * bitpacking.BLOCK)
        if w <= bits - bits // PACK_MIN_SAVING and packed <= plain:
            return None
    # as values_encode._rle: runs of 4 values or more on average may pay (the general path weighs them)
    if (int(np.count_nonzero(words[1:] != words[:-1])) + 1) * 4 <= n:
        return None
    return _page(raw.tobytes(), bits, n, defs, kinds, large)


def _bool_bytes(values: pa.Array, n: int) -> bytes:
    """The values of a boolean array as a bitmap from bit 0 (the bits past the last value zero)."""
    buf = values.buffers()[1]
    if buf is None:
        return bytes((n + 7) // 8)
    raw = np.frombuffer(buf, np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[values.offset : values.offset + n]
    return np.packbits(bits, bitorder="little").tobytes()


def _page(
    data: bytes, bits: int, n: int, defs: np.ndarray | None, kinds: list[int], large: bool
) -> tuple[Any, list[bytes]] | None:
    """The page of one chunk of ``n`` values (``data``, ``bits`` each) and their levels: as
    :func:`miniblock_fast._assemble_few` joins it, or None when the chunk passes the limit."""
    size = len(data)
    size_code = "I" if large else "H"
    codec: LevelCodec | None = None
    if defs is None:
        head = struct.pack(f"<H{size_code}", 0, size)
        parts = [head, _FILL * (_pad8(len(head)) - len(head))]
    else:
        codec = choose(defs, large)
        levels = compress_chunks(defs, np.array([0, n], np.int64), codec)
        at, length = int(levels.starts[0]), int(levels.lengths[0])
        head = struct.pack(f"<2H{size_code}", n & 0xFFFF, length & 0xFFFF, size)
        level_bytes = levels.data[at : at + length].tobytes()
        parts = [head, _FILL * (_pad8(len(head)) - len(head)), level_bytes, _FILL * (-length % 8)]
    parts += [data, _FILL * (-size % 8)]
    chunk = b"".join(parts)
    if len(chunk) > ((1 << 18) if large else (1 << 15)):
        return None  # (levels that RLE makes larger than the limit: the general path stores them flat)
    word = struct.pack(f"<{size_code}", (len(chunk) // 8 - 1) << 4)
    layout = pb.PageLayout()
    layout.CopyFrom(_template(bits, codec, tuple(kinds), large))
    layout.mini_block_layout.num_items = n
    return layout, [word, chunk]


def _template(bits: int, codec: LevelCodec | None, kinds: tuple[int, ...], large: bool) -> Any:
    """The layout of such pages but for their value count, made once per shape (copy it)."""
    key = (bits, None if codec is None else (codec.kind, codec.width), kinds, large)
    got = _TEMPLATES.get(key)
    if got is None:
        got = pb.PageLayout()
        mini = got.mini_block_layout
        if codec is not None:
            mini.def_compression.CopyFrom(codec.encoding())
        mini.value_compression.CopyFrom(flat(bits))
        mini.layers.extend(kinds)
        mini.num_buffers = 1
        mini.has_large_chunk = large
        _TEMPLATES.put(key, got)
    return got


_TEMPLATES: LRU[tuple[Any, ...], Any] = LRU(256)
