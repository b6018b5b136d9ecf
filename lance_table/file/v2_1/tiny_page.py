"""One-chunk mini-block pages of small appends, written without the general machinery.

A small append (a hundred rows) writes one page per column, and most of a page's cost is fixed:
the general path (:func:`values_encode.compress_values`, :func:`miniblock_encode.encode_mini_block`)
builds value objects, a chunk planner and a fresh ``PageLayout`` for a page of a few hundred
bytes. The pages handled here are the commonest of those, in one chunk, with or without
repetition levels (lists): integers, floats, temporal values and booleans stored flat or
bitpacked in one block (run-length encoding is left to the general path), and strings or binary
values stored plain or as indices (flat or bitpacked) into a page dictionary (neither FSST nor
zstd chunks tried). Their chunk is joined from the Arrow buffers at once and their layout is
copied from one kept per shape.

Every decision is the general path's, made on the same numbers (the bitpacking and RLE sizes of
:func:`value_kinds.bitpacked` and :func:`values_encode._rle`, the dictionary of
:func:`values_encode.small_dictionary`, the level codec of :func:`level_compress.choose`, the one
chunk of :class:`miniblock_encode._Planner`): where the general path would choose otherwise, or
the page takes more than one chunk, :func:`page` answers None and the general path writes the
page. The bytes are the same (``tests/file/test_tiny_pages.py`` compares both over many shapes).
"""

from __future__ import annotations

import itertools
import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._lru import LRU
from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.compression import bitpacking, dictionary, fsst_encode, rle
from lance_table.file.v2_1.level_compress import (
    BLOCK,
    FLAT,
    MAX_RUN,
    RLE_HEADER,
    LevelCodec,
    choose,
    compress_one,
)
from lance_table.file.v2_1.miniblock_fast import FILL, pad8
from lance_table.file.v2_1.value_kinds import PACK_MIN_SAVING, PAD_BYTE, MiniBlockValues, flat, variable_parts
from lance_table.file.v2_1.values_encode import (
    FSST_MIN_AVG,
    SET_COUNT_MAX,
    widest_value,
    wrap_dictionary_block,
)

#: whether :func:`page` may answer (tests turn it off to compare with the general path)
ENABLED = True

_PAD = bytes([PAD_BYTE])  # pads variable values up to their offset width
#: values of this many bytes or more go full-zip (pylance's MINIBLOCK_MAX_BYTE_LENGTH_PER_VALUE)
FULL_ZIP_BYTES = 256
#: a chunk's values aim at this many bytes: pages of more take several chunks (general path)
_AIM = MiniBlockValues.aim_bytes or 0
_MAX_VALUES = MiniBlockValues.max_chunk_values
#: a chunk holds at most this many levels (their sizes are u16 byte counts)
_MAX_LEVELS = 32767

#: how a page's values are stored: ("flat", bits), ("packed", bits) (inline bitpacking, one
#: block) or ("variable", 32) (offsets and bytes)
Encoding = tuple[str, int]


def page(
    values: pa.Array,
    defs: np.ndarray | None,
    kinds: list[int],
    large: bool,
    rep: np.ndarray | None = None,
    max_rep: int = 0,
) -> tuple[Any, list[Any]] | None:
    """The layout and buffers of a one-chunk mini-block page of ``values`` (the page's visible
    values, no compression scheme of its field, not constant) with its repetition levels ``rep``
    (one per entry, under ``max_rep`` lists, or None) and definition levels ``defs`` (one per
    entry, or None) under the layers ``kinds``; None when the general path must write it (other
    types, several chunks, other compressions)."""
    if not ENABLED:
        return None
    t = values.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        body = _binary_values(values, large)
    else:
        body = _fixed_values(values)
    if body is None:
        return None
    return _page(body[0], body[1], len(values), rep, defs, max_rep, kinds, large, body[2])


def _fixed_values(values: pa.Array) -> tuple[bytes, Encoding, None] | None:
    """Numbers, temporal values and booleans stored flat or bitpacked (see :func:`page`)."""
    t = values.type
    n = len(values)
    if pa.types.is_boolean(t):
        if not 1 <= n <= _MAX_VALUES:
            return None
        return _bool_bytes(values, n), ("flat", 1), None
    if pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t):
        packable = True
    elif pa.types.is_floating(t) or pa.types.is_temporal(t):
        packable = False
    else:
        return None
    bits = t.bit_width
    dtype = bitpacking.DTYPES.get(bits)
    width = bits // 8
    if dtype is None or n < 2:
        return None
    buf = values.buffers()[1]
    if buf is None:
        return None
    raw = np.frombuffer(buf, np.uint8, n * width, values.offset * width)
    return _words(raw.view(dtype), bits, packable)


def _words(words: np.ndarray, bits: int, packable: bool) -> tuple[bytes, Encoding, None] | None:
    """Unsigned words of ``bits`` each (at least two) stored as the general path stores them
    when that is flat or bitpacked in one block; None for anything else (run-length encoding,
    several chunks)."""
    n = words.size
    size = n * bits // 8  # flat (FixedValues.sizes)
    packed = False
    if packable:
        w = int(np.bitwise_or.reduce(words)).bit_length()
        bound = -(-n // bitpacking.BLOCK) * (bits + w * bitpacking.BLOCK)
        if w <= bits - bits // PACK_MIN_SAVING and bound <= n * bits - n * bits // PACK_MIN_SAVING:
            if n > bitpacking.BLOCK:
                return None  # several blocks, several chunks
            packed = True
            size = (1 + w * (bitpacking.BLOCK // bits)) * bits // 8  # BitpackedValues.sizes
    runs = int(np.count_nonzero(words[1:] != words[:-1])) + 1
    # values_encode._rle weighs runs of 4 values or more on average against the size so far
    if runs * 4 <= n and (n > rle.MAX_RUN_U8 or runs * (bits // 8 + 1) < size):
        return None
    if packed:
        return bitpacking.pack_inline(words).tobytes(), ("packed", bits), None
    if size > _AIM:
        return None
    return words.tobytes(), ("flat", bits), None


def _binary_values(
    values: pa.Array, large: bool
) -> tuple[bytes, Encoding, tuple[Any, bytes, int] | None] | None:
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
    small = _small_dictionary(values, large) if n >= dictionary.MIN_VALUES else None
    if small is not None:
        enc, block, items, indices = small
        stored = _words(indices, 32, True)
        if stored is None:
            return None
        idx_bytes, encoding, _ = stored
        idx_size = len(idx_bytes) if encoding[0] == "packed" else 4 * n
        if len(block) + idx_size < plain:
            return idx_bytes, encoding, (enc, block, items)
    if n > 2 and plain > _AIM:
        return None
    head = (n + 1) * 4
    rebased = offsets if int(offsets[0]) == 0 else offsets - offsets[0]
    chunk = [(rebased + head).astype(np.uint32).tobytes(), data.tobytes(), _PAD * (plain - head - data.size)]
    return b"".join(chunk), ("variable", 32), None


def _small_dictionary(values: pa.Array, lz4: bool) -> tuple[Any, bytes, int, np.ndarray] | None:
    """The page dictionary :func:`values_encode.small_dictionary` makes of a small page, as its
    block (:func:`values_encode.dictionary_block`: encoding and bytes), its item count and the
    ``uint32`` indices; None when more than n / 2 values are distinct. The items stay Python
    bytes: the block is packed from them directly."""
    n = len(values)
    listed = values.view(pa.binary()).to_pylist()
    position = dict.fromkeys(listed)  # (a dict keeps its keys in order of first appearance)
    position.pop(None, None)
    items = len(position)
    if items * 2 > n:
        return None
    keys = list(position)
    position = dict(zip(keys, range(items)))
    position[None] = 0
    indices = np.fromiter(map(position.__getitem__, listed), np.uint32, n)
    # bits, the data start, the items + 1 offsets from 0 (u32 words), then the bytes
    raw = struct.pack(f"<{items + 3}I", 32, 4 * (items + 3), 0, *itertools.accumulate(map(len, keys)))
    enc, block = wrap_dictionary_block(raw + b"".join(keys), 32, lz4)
    return enc, block, items, indices


def _bool_bytes(values: pa.Array, n: int) -> bytes:
    """The values of a boolean array as a bitmap from bit 0 (the bits past the last value zero)."""
    buf = values.buffers()[1]
    if buf is None:
        return bytes((n + 7) // 8)
    if not values.offset:  # the bitmap's first bytes, the bits past the last value cleared
        head = np.frombuffer(buf, np.uint8, (n + 7) // 8)
        if not n % 8:
            return head.tobytes()
        out = head.copy()
        out[-1] &= (1 << (n % 8)) - 1
        return out.tobytes()
    raw = np.frombuffer(buf, np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[values.offset : values.offset + n]
    return np.packbits(bits, bitorder="little").tobytes()


def _page(
    data: bytes,
    encoding: Encoding,
    n: int,
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    max_rep: int,
    kinds: list[int],
    large: bool,
    dictionary: tuple[Any, bytes, int] | None = None,
) -> tuple[Any, list[Any]] | None:
    """The page of one chunk of ``n`` values (their buffer ``data``, stored as ``encoding``) and
    their levels, as :func:`miniblock_fast._assemble_few` (no repetition) or
    :func:`miniblock_encode._one_chunk` joins it, then a page ``dictionary`` (encoding, buffer,
    items) if any, then the repetition index; None when the levels and values pass a chunk's
    limit (the general path makes more chunks, or stores the levels flat)."""
    size = len(data)
    size_code = "I" if large else "H"
    limit = (1 << 18) if large else (1 << 15)
    lists = (rep is not None) + (defs is not None)
    levels = rep.size if rep is not None else n if defs is not None else 0
    head_len = 2 + 2 * lists + (4 if large else 2)
    # the chunk planner's bound (levels at their raw 2 bytes each) decides on one chunk
    if levels > _MAX_LEVELS or pad8(head_len) + lists * pad8(2 * levels) + pad8(size) > limit:
        return None
    rep_codec: LevelCodec | None = None
    def_codec: LevelCodec | None = None
    pieces: list[bytes] = []
    if rep is not None:
        rep_codec, rep_bytes = _levels(rep, large)
        pieces.append(rep_bytes)
    if defs is not None:
        def_codec, def_bytes = _levels(defs, large, rep is not None)
        pieces.append(def_bytes)
    head = struct.pack(f"<{1 + len(pieces)}H{size_code}", levels, *map(len, pieces), size)
    parts = [head, FILL * (pad8(head_len) - head_len)]
    for piece in pieces:
        parts += [piece, FILL * (-len(piece) % 8)]
    parts += [data, FILL * (-size % 8)]
    chunk = b"".join(parts)
    if len(chunk) > limit:
        return None  # (levels that RLE makes larger than the limit: the general path stores them flat)
    word = struct.pack(f"<{size_code}", (len(chunk) // 8 - 1) << 4)
    layout = pb.PageLayout()
    layout.CopyFrom(_template(encoding, rep_codec, def_codec, tuple(kinds), large))
    mini = layout.mini_block_layout
    mini.num_items = n
    buffers: list[Any] = [word, chunk]
    if dictionary is not None:
        mini.dictionary.CopyFrom(dictionary[0])
        mini.num_dictionary_items = dictionary[2]
        buffers.append(dictionary[1])
    if rep is not None:  # the repetition index of one chunk: every row ends in it
        buffers.append(struct.pack("<2Q", 1 + int(np.count_nonzero(rep[1:] == max_rep)), 0))
    return layout, buffers


def _levels(levels: np.ndarray, large: bool, repeated: bool = False) -> tuple[LevelCodec, bytes]:
    """The codec :func:`level_compress.choose` picks for a page's levels (of a page with
    repetition levels: ``repeated``) and their one chunk as :func:`level_compress.compress_chunks`
    makes it: levels that are all 0 (a nullable field without nulls) are inline bitpacking's one
    width word without a look at their codec."""
    n = levels.size
    if n > MAX_RUN or not n:
        if n <= BLOCK and not levels.any():
            return _INLINE, b"\x00\x00"
        codec = choose(levels, large, repeated)
        return codec, compress_one(levels, codec)
    # at most MAX_RUN levels (no run is split): choose's sizes and compress_one's runs at once
    w = int(np.bitwise_or.reduce(levels)).bit_length()
    if not w:
        return _INLINE, b"\x00\x00"
    changes = (levels[1:] != levels[:-1]).nonzero()[0]
    packed = 2 * (1 + (BLOCK // 16) * w)  # one inline block at width w
    raw = 2 * n
    runs = changes.size + 1
    if large and RLE_HEADER + 3 * runs <= min(raw - 1, packed):
        bounds = np.empty(runs + 1, np.intp)  # where each run starts, then n
        bounds[0], bounds[-1] = 0, n
        np.add(changes, 1, out=bounds[1:-1])
        lengths = (bounds[1:] - bounds[:-1]).astype(np.uint8)
        head = (2 * runs).to_bytes(RLE_HEADER, "little")
        return _RLE, head + levels[bounds[:-1]].astype("<u2").tobytes() + lengths.tobytes()
    codec = FLAT if BLOCK * w // 8 >= raw else _INLINE
    return codec, compress_one(levels, codec)


_INLINE = LevelCodec("inline")
_RLE = LevelCodec("rle")


def _template(
    encoding: Encoding, rep: LevelCodec | None, defs: LevelCodec | None, kinds: tuple[int, ...], large: bool
) -> Any:
    """The layout of such pages but for their value count and dictionary, made once per shape
    (copy it)."""
    key = (encoding, _codec_key(rep), _codec_key(defs), kinds, large)
    got = _TEMPLATES.get(key)
    if got is None:
        got = pb.PageLayout()
        mini = got.mini_block_layout
        if rep is not None:
            mini.rep_compression.CopyFrom(rep.encoding())
            mini.repetition_index_depth = 1
        if defs is not None:
            mini.def_compression.CopyFrom(defs.encoding())
        kind, bits = encoding
        if kind == "flat":
            mini.value_compression.CopyFrom(flat(bits))
        elif kind == "packed":
            mini.value_compression.inline_bitpacking.uncompressed_bits_per_value = bits
        else:
            mini.value_compression.variable.offsets.CopyFrom(flat(bits))
        mini.layers.extend(kinds)
        mini.num_buffers = 1
        mini.has_large_chunk = large
        _TEMPLATES.put(key, got)
    return got


def _codec_key(codec: LevelCodec | None) -> tuple[str, int] | None:
    return None if codec is None else (codec.kind, codec.width)


_TEMPLATES: LRU[tuple[Any, ...], Any] = LRU(256)
