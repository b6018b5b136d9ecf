"""General-purpose buffer compression as Lance frames it: zstd (u64 length + frame), lz4 (u32 + block)."""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import overload

import numpy as np
import pyarrow as pa

from lance_table._numpy import sorted_unique
from lance_table._parallel import map_parts
from lance_table.errors import UnsupportedFormatError
from lance_table.file.compression import Where
from lance_table.file.compression.entries import join_entries, le_table

# The schemes by their CompressionAlgorithm numbers in Lance 2.1+ encodings.
SCHEMES_BY_NUMBER = {1: "lz4", 2: "zstd"}


@overload
def most_from(compressed: int) -> int: ...


@overload
def most_from(compressed: np.ndarray) -> np.ndarray: ...


def most_from(compressed: int | np.ndarray) -> int | np.ndarray:
    """The most bytes ``compressed`` bytes (a size, or an array of them) may claim to decompress
    to; larger claims are refused as sizes the input cannot explain. The densest form either
    codec has is zstd's run-length block, 128 KiB of one byte in 4 bytes (a frame of 40 MB of
    one letter takes about 1.3 KB), hence a ratio of 32768 (LZ4 stays under 256)."""
    if isinstance(compressed, np.ndarray):
        return _MOST_RATIO * np.maximum(compressed, 64) + (1 << 20)
    return _MOST_RATIO * max(compressed, 64) + (1 << 20)


_MOST_RATIO = 1 << 15


def codec(name: str, level: int | None = None) -> pa.Codec:
    """The Arrow codec ``name`` (``zstd``, ``lz4_raw``) at compression ``level``, made once per
    setting and shared by all threads: making one costs about as much as compressing a small
    buffer (a page's dictionary, a level block) with it. Arrow's one-shot ``compress`` and
    ``decompress`` keep no state in the codec (each call sets up its own zstd or LZ4 stream and
    releases the GIL), so threads may share it and it writes the bytes a fresh codec would."""
    got = _CODECS.get((name, level))
    if got is None:
        got = _CODECS[(name, level)] = pa.Codec(name, compression_level=level)
    return got


#: the codecs by name and level (see :func:`codec`): a few settings at most
_CODECS: dict[tuple[str, int | None], pa.Codec] = {}


def decompress(raw: memoryview | bytes, scheme: str, expected: int | None, where: Where) -> memoryview:
    """Undo Lance's buffer compression: zstd = u64 length + frame, lz4 = u32 length + block."""
    if scheme == "zstd":
        header, name = 8, "zstd"
    elif scheme == "lz4":
        header, name = 4, "lz4_raw"
    else:
        raise UnsupportedFormatError(f"{where.what}: unknown buffer compression {scheme!r}", path=where.path)
    if len(raw) < header:
        raise where.corrupt(f"{scheme} buffer of {len(raw)} bytes has no length header")
    (length,) = struct.unpack_from("<Q" if header == 8 else "<I", raw, 0)
    if expected is not None and length != expected:
        raise where.corrupt(f"{scheme} buffer claims {length} bytes after decompression, expected {expected}")
    if length > most_from(len(raw)):
        raise where.corrupt(f"{scheme} buffer of {len(raw)} bytes claims {length} bytes after decompression")
    body = memoryview(raw)[header:]
    try:
        out = codec(name).decompress(body, decompressed_size=length)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise where.corrupt(f"{scheme} buffer does not decompress ({exc})") from exc
    if name == "lz4_raw" and length and _short(body, length):
        # Arrow's LZ4 does not say how many bytes a block decoded to: the bytes past them are
        # left as the allocator had them (another buffer's, or freed memory). A block that
        # fits in one byte less decodes to fewer bytes than the header claims.
        raise where.corrupt(f"lz4 buffer decompresses to fewer than the {length} bytes it claims")
    return memoryview(out)


# Blocks up to this many bytes are measured by walking their sequences (a few for the small
# dictionaries and levels that LZ4 mostly holds); a failed decode raises inside Arrow, which costs
# some 20 us a call on the threads of a scan.
_WALKED_LZ4 = 1024


def _short(block: memoryview, size: int) -> bool:
    """Whether the raw LZ4 ``block``, which decoded into ``size`` bytes, holds fewer than that."""
    if len(block) <= _WALKED_LZ4:
        return _lz4_size(bytes(block)) != size
    return _fits(block, size - 1)


def _lz4_size(block: bytes) -> int:
    """The number of bytes a raw LZ4 block decodes to (-1 where its sequences run off its end):
    each sequence is a token, its literals' length (4 bits, then bytes while 255), the literals,
    and then, except in the last, a 2-byte offset and the match length (4 bits + 4, then bytes)."""
    n, at, out = len(block), 0, 0
    while at < n:
        token = block[at]
        at += 1
        literals = token >> 4
        if literals == 15:
            literals, at = _lz4_more(block, at, literals)
        at += literals
        out += literals
        if at >= n:
            return out if at == n else -1
        at += 2  # the match offset
        match = (token & 15) + 4
        if match == 19:
            match, at = _lz4_more(block, at, match)
        if at > n:
            return -1
        out += match
    return -1  # a block ends with literals: one that ends with a match is cut short


def _lz4_more(block: bytes, at: int, length: int) -> tuple[int, int]:
    """A length whose 4 bits in the token are all set, plus the bytes after ``at`` that extend it
    (each 255 but the last), and where they end."""
    n = len(block)
    while at < n:
        extra = block[at]
        at += 1
        length += extra
        if extra != 255:
            break
    return length, at


def _fits(block: memoryview, size: int) -> bool:
    """Whether the raw LZ4 ``block`` decodes into ``size`` bytes."""
    try:
        codec("lz4_raw").decompress(block, decompressed_size=size)
    except (pa.ArrowException, OSError, ValueError):
        return False
    return True


def compress(data: bytes | memoryview | np.ndarray, scheme: str, *, level: int | None = None) -> bytes:
    """Compress a buffer the way Lance frames it (what :func:`decompress` reads): zstd is the
    uncompressed length as u64 then one zstd frame, lz4 the length as u32 then one raw lz4 block.

    Raises:
        ValueError: an unknown scheme, or more than 4 GiB for lz4's 32-bit length.
    """
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data).view(np.uint8).reshape(-1).data
    raw = memoryview(data)
    raw = raw.cast("B") if raw.format != "B" or raw.ndim != 1 else raw
    if scheme == "zstd":
        head = struct.pack("<Q", raw.nbytes)
        made = codec("zstd", level)
    elif scheme == "lz4":
        if raw.nbytes >= 1 << 32:
            raise ValueError(f"lz4 frames hold less than 4 GiB, not {raw.nbytes} bytes")
        head = struct.pack("<I", raw.nbytes)
        made = codec("lz4_raw", level)
    else:
        raise ValueError(f"unknown buffer compression {scheme!r} (expected 'zstd' or 'lz4')")
    return head + made.compress(raw, asbytes=True)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_HEADER = 8  # Lance's u64 length before each zstd frame
# zstd_each: values shorter than this become frames of one raw block, made with numpy (zstd gains
# little on so few bytes, and a call per value would cost more than compressing it); longer ones
# are compressed, a group of them per task on the pool.
RAW_FRAME_BELOW = 128
_EACH_GROUP = 64


def zstd_each(
    data: np.ndarray, offsets: np.ndarray, keep: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each value ``data[offsets[i]:offsets[i+1]]`` compressed on its own as :func:`compress`
    frames zstd (``[u64 length][frame]``): the values back to back and their ``int64`` offsets
    (from 0). Every value gets a frame, the empty ones included, as pylance writes them, except
    those ``keep`` (a boolean mask) leaves out, which must be empty: they take no bytes."""
    data = data.reshape(-1)
    offsets = np.asarray(offsets, np.int64)
    lengths = np.diff(offsets)
    n = int(lengths.size)
    if not n:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64)
    if keep is not None and bool(np.any(lengths[~keep])):
        raise ValueError("values left out must be empty")
    big = np.flatnonzero(lengths >= RAW_FRAME_BELOW)

    def compress_group(group: list[tuple[int, int]]) -> list[bytes]:
        zstd = codec("zstd")
        return [struct.pack("<Q", b - a) + zstd.compress(data[a:b], asbytes=True) for a, b in group]

    spans = list(zip(offsets[big].tolist(), offsets[big + 1].tolist(), strict=True))
    groups = [spans[i : i + _EACH_GROUP] for i in range(0, len(spans), _EACH_GROUP)]
    frames = [frame for part in map_parts(compress_group, groups) for frame in part]
    sizes = lengths + (_ZSTD_HEADER + _RAW_FRAME_HEAD)
    sizes[big] = np.array([len(f) for f in frames], np.int64)
    head_len = np.full(n, _ZSTD_HEADER + _RAW_FRAME_HEAD)
    if keep is not None:
        sizes[~keep] = 0
        head_len[~keep] = 0
    out_at = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=out_at[1:])
    if big.size == n:  # every value compressed: their frames back to back
        return np.frombuffer(b"".join(frames), np.uint8), out_at
    # runs of small values in one go each, between the compressed values
    pieces: list[bytes | memoryview] = []
    edges = sorted_unique(np.concatenate([[0, n], big, big + 1])).tolist()
    at_frame = 0
    for a, b in pairwise(edges):
        if b - a == 1 and lengths[a] >= RAW_FRAME_BELOW:
            pieces.append(frames[at_frame])
            at_frame += 1
            continue
        joined = join_entries(
            _raw_heads(lengths[a:b]), head_len[a:b], data[offsets[a] : offsets[b]], lengths[a:b]
        )
        pieces.extend(piece.data for piece in joined)
    out = np.frombuffer(b"".join(pieces), np.uint8)
    if out.size != out_at[-1]:
        raise AssertionError("zstd_each: the frames do not add up to their offsets")
    return out, out_at


_RAW_FRAME_HEAD = 9  # magic, descriptor (single segment), 1-byte content size, 3-byte block header


def _raw_heads(lengths: np.ndarray) -> np.ndarray:
    """``[u64 length]`` and the header of a zstd frame holding the value as one raw block (values
    under 256 bytes)."""
    heads = np.empty((lengths.size, 8 + _RAW_FRAME_HEAD), np.uint8)
    heads[:, :8] = le_table(lengths, 8)
    heads[:, 8:12] = np.frombuffer(struct.pack("<I", _ZSTD_MAGIC), np.uint8)
    heads[:, 12] = 0x20  # single segment, content size in one byte
    heads[:, 13] = lengths
    heads[:, 14:17] = le_table(lengths << 3 | 1, 3)  # last block, raw, its size
    return heads


def compressed_bound(size: int, scheme: str) -> int:
    """The most bytes :func:`compress` can make of ``size`` bytes (the codecs' own worst cases,
    plus the length header)."""
    if scheme == "zstd":
        small = ((128 << 10) - size) >> 11 if size < 128 << 10 else 0
        return 8 + size + (size >> 8) + small
    return 4 + size + size // 255 + 16


_FCS_BYTES = np.array([0, 2, 4, 8], np.int64)  # by Frame_Content_Size_flag (0: 1 byte if single-segment)
_DICT_ID_BYTES = np.array([0, 1, 2, 4], np.int64)  # by Dictionary_ID_flag


def zstd_content_sizes(u8: np.ndarray, at: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The content size the zstd frame header at each ``at`` (frames of ``size`` bytes) states, and
    whether it states one (a frame may leave it out; a damaged one may not be a frame at all)."""
    n = at.size
    if not n:
        return np.zeros(0, np.uint64), np.zeros(0, bool)
    if int(at.max()) + 18 <= u8.size:
        alike = _alike_sizes(u8, at, size)
        if alike is not None:
            return alike
    # A header is at most 18 bytes: magic, descriptor, window, dictionary id, content size.
    head = u8[np.minimum(at[:, None] + np.arange(18), u8.size - 1)]
    magic = np.ascontiguousarray(head[:, :4]).view("<u4").reshape(-1)
    desc = head[:, 4].astype(np.int64)
    single = (desc >> 5) & 1
    flag = desc >> 6
    fcs_bytes = np.where((flag == 0) & (single == 1), 1, _FCS_BYTES[flag])
    fcs_at = 5 + (1 - single) + _DICT_ID_BYTES[desc & 3]
    known = (magic == _ZSTD_MAGIC) & ((desc & 8) == 0) & (fcs_bytes > 0) & (fcs_at + fcs_bytes <= size)
    k = np.arange(8)
    raw = np.take_along_axis(head, np.minimum(fcs_at[:, None] + k, 17), axis=1).astype(np.uint64)
    raw[k >= fcs_bytes[:, None]] = 0
    stated = np.bitwise_or.reduce(raw << (8 * k).astype(np.uint64), axis=1)
    stated[fcs_bytes == 2] += np.uint64(256)  # the 2-byte form is stored minus 256
    return stated, known


def _alike_sizes(u8: np.ndarray, at: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`zstd_content_sizes` of frames whose headers share one descriptor byte (those of one
    writer: the content size at one place, of one width) in a few calls; None for others. Every
    frame's 18 header bytes lie in ``u8``."""
    desc = u8[at + 4]
    d = int(desc[0])
    if bool(np.any(desc != d)):
        return None
    single, flag = (d >> 5) & 1, d >> 6
    fcs_bytes = 1 if flag == 0 and single else int(_FCS_BYTES[flag])
    fcs_at = 5 + (1 - single) + int(_DICT_ID_BYTES[d & 3])
    if not fcs_bytes or d & 8:
        return None
    head = u8[at[:, None] + np.arange(fcs_at + fcs_bytes)]
    magic = np.ascontiguousarray(head[:, :4]).view("<u4").reshape(-1)
    wide = np.zeros((at.size, 8), np.uint8)
    wide[:, :fcs_bytes] = head[:, fcs_at:]
    stated = wide.view("<u8").reshape(-1)
    if fcs_bytes == 2:  # (the 2-byte form is stored minus 256)
        stated = stated + np.uint64(256)
    return stated, (magic == _ZSTD_MAGIC) & (fcs_at + fcs_bytes <= size)


def decompress_many(
    data: memoryview, at: np.ndarray, sizes: np.ndarray, scheme: str, where: Where
) -> list[memoryview]:
    """Each buffer ``data[at : at + size]`` as :func:`decompress` undoes it: decoded together
    where :func:`decompress_joined` can, else each on its own, so that errors name what is wrong."""
    got = decompress_joined(data, at, sizes, scheme)
    if got is None:
        return decompress_each(data, at, sizes, scheme, where)
    out, lengths = got
    ends = np.cumsum(lengths).tolist()
    return [out[e - n : e] for e, n in zip(ends, lengths.tolist())]


def decompress_each(
    data: memoryview, at: np.ndarray, sizes: np.ndarray, scheme: str, where: Where
) -> list[memoryview]:
    """Each buffer ``data[at : at + size]`` decompressed on its own (:func:`decompress`)."""
    return [decompress(data[a : a + n], scheme, None, where) for a, n in zip(at.tolist(), sizes.tolist())]


def decompress_joined(
    data: memoryview, at: np.ndarray, sizes: np.ndarray, scheme: str
) -> tuple[memoryview, np.ndarray] | None:
    """The buffers ``data[at : at + size]`` decompressed back to back into one buffer, and the
    length of each; None when they cannot be decoded together (the caller then decodes each on
    its own with :func:`decompress`, which names what is wrong).

    zstd frames whose headers state the length their Lance header gives are decoded in one call
    (zstd decodes concatenated frames, checking each against its header): the fixed cost of a
    call is paid once, not per buffer. Any other scheme, a frame that states no length or another
    one, or a joint decode that fails gives None.
    """
    if scheme != "zstd" or at.size < 2:
        return None
    u8 = np.frombuffer(data, np.uint8)
    if bool(np.any((sizes < _ZSTD_HEADER + 4) | (at < 0) | (at + sizes > u8.size))):
        return None
    head = np.ascontiguousarray(u8[at[:, None] + np.arange(_ZSTD_HEADER)]).view("<u8").reshape(-1)
    frame_at, frame_sizes = at + _ZSTD_HEADER, sizes - _ZSTD_HEADER
    stated, known = zstd_content_sizes(u8, frame_at, frame_sizes)
    if not bool(np.all(known & (stated == head) & (head <= most_from(sizes).astype(np.uint64)))):
        return None
    lengths = head.astype(np.int64)
    frames = b"".join([data[a : a + n] for a, n in zip(frame_at.tolist(), frame_sizes.tolist())])
    try:
        out = memoryview(codec("zstd").decompress(frames, decompressed_size=int(lengths.sum())))
    except (pa.ArrowException, OSError, ValueError):
        return None
    return out, lengths
