"""General-purpose buffer compression as Lance frames it: zstd (u64 length + frame), lz4 (u32 + block)."""

from __future__ import annotations

import struct
from typing import overload

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file.compression import Where

# The schemes by their CompressionAlgorithm numbers in Lance 2.1+ encodings.
SCHEMES_BY_NUMBER = {1: "lz4", 2: "zstd"}


@overload
def most_from(compressed: int) -> int: ...


@overload
def most_from(compressed: np.ndarray) -> np.ndarray: ...


def most_from(compressed: int | np.ndarray) -> int | np.ndarray:
    """The most bytes ``compressed`` bytes (a size, or an array of them) may claim to decompress
    to: ratios beyond ~1000x do not occur in practice, so larger claims are refused as sizes the
    input cannot explain."""
    if isinstance(compressed, np.ndarray):
        return 1024 * np.maximum(compressed, 64) + (1 << 20)
    return 1024 * max(compressed, 64) + (1 << 20)


def decompress(raw: memoryview | bytes, scheme: str, expected: int | None, where: Where) -> memoryview:
    """Undo Lance's buffer compression: zstd = u64 length + frame, lz4 = u32 length + block."""
    if scheme == "zstd":
        header, codec = 8, "zstd"
    elif scheme == "lz4":
        header, codec = 4, "lz4_raw"
    else:
        raise UnsupportedFormatError(f"{where.what}: unknown buffer compression {scheme!r}", path=where.path)
    if len(raw) < header:
        raise where.corrupt(f"{scheme} buffer of {len(raw)} bytes has no length header")
    (length,) = struct.unpack_from("<Q" if header == 8 else "<I", raw, 0)
    if expected is not None and length != expected:
        raise where.corrupt(f"{scheme} buffer claims {length} bytes after decompression, expected {expected}")
    if length > most_from(len(raw)):
        raise where.corrupt(f"{scheme} buffer of {len(raw)} bytes claims {length} bytes after decompression")
    try:
        out = pa.Codec(codec).decompress(memoryview(raw)[header:], decompressed_size=length)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise where.corrupt(f"{scheme} buffer does not decompress ({exc})") from exc
    return memoryview(out)


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
        codec = pa.Codec("zstd", compression_level=level)
    elif scheme == "lz4":
        if raw.nbytes >= 1 << 32:
            raise ValueError(f"lz4 frames hold less than 4 GiB, not {raw.nbytes} bytes")
        head = struct.pack("<I", raw.nbytes)
        codec = pa.Codec("lz4_raw", compression_level=level)
    else:
        raise ValueError(f"unknown buffer compression {scheme!r} (expected 'zstd' or 'lz4')")
    return head + codec.compress(raw, asbytes=True)


def compressed_bound(size: int, scheme: str) -> int:
    """The most bytes :func:`compress` can make of ``size`` bytes (the codecs' own worst cases,
    plus the length header)."""
    if scheme == "zstd":
        small = ((128 << 10) - size) >> 11 if size < 128 << 10 else 0
        return 8 + size + (size >> 8) + small
    return 4 + size + size // 255 + 16


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_HEADER = 8  # Lance's u64 length before each zstd frame
_FCS_BYTES = np.array([0, 2, 4, 8], np.int64)  # by Frame_Content_Size_flag (0: 1 byte if single-segment)
_DICT_ID_BYTES = np.array([0, 1, 2, 4], np.int64)  # by Dictionary_ID_flag


def zstd_content_sizes(u8: np.ndarray, at: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The content size the zstd frame header at each ``at`` (frames of ``size`` bytes) states, and
    whether it states one (a frame may leave it out; a damaged one may not be a frame at all)."""
    n = at.size
    if not n:
        return np.zeros(0, np.uint64), np.zeros(0, bool)
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
        out = memoryview(pa.Codec("zstd").decompress(frames, decompressed_size=int(lengths.sum())))
    except (pa.ArrowException, OSError, ValueError):
        return None
    return out, lengths
