"""General-purpose buffer compression as Lance frames it: zstd (u64 length + frame), lz4 (u32 + block)."""

from __future__ import annotations

import struct

import pyarrow as pa

from lance_table.errors import UnsupportedFormatError
from lance_table.file.compression import Where


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
