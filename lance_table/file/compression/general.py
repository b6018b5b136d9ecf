"""General-purpose buffer compression as Lance frames it: zstd (u64 length + frame), lz4 (u32 + block)."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file.compression import Where

# The schemes by their CompressionAlgorithm numbers in Lance 2.1+ encodings.
SCHEMES_BY_NUMBER = {1: "lz4", 2: "zstd"}


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
    # Compression ratios beyond ~1000x do not occur in practice; refuse sizes the input cannot explain.
    if length > 1024 * max(len(raw), 64) + (1 << 20):
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
