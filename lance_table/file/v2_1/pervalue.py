"""Per-value decompression of the variable-width values of Lance 2.1/2.2 full-zip pages.

A full-zip page stores each value on its own, so each is compressed on its own: plain variable
values, FSST (left compressed until :func:`values21.to_arrow`), per-value general compression
(``[u64 length][zstd frame]`` each; an empty value is a null row) and variable packed structs
(each row its fields back to back).
Mini-block chunks, dictionaries and fixed-width full-zip values go through :mod:`compress21`.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._numpy import sorted_unique
from lance_table.file.compression.general import codec, most_from, zstd_content_sizes
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.batch import join, spans
from lance_table.file.v2_1.compress import SCHEMES, compression_kind, decode_values, unsupported
from lance_table.file.v2_1.values import Struct, Values, Var, offsets_of


def _le(u8: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned integers of ``width`` (4 or 8) bytes at byte positions ``pos``."""
    grid = u8[pos[:, None] + np.arange(width)]
    return np.ascontiguousarray(grid).view("<u4" if width == 4 else "<u8").reshape(-1).astype(np.int64)


def decode_per_value(enc: Any, values: Var, io: PageIO) -> Values:
    """Variable-width values of a full-zip page (one compressed value each) -> their contents.

    ``values`` are the page's values with their length prefixes removed. Handles plain variable
    values, FSST (left compressed; :func:`values21.to_arrow` expands it), per-value general
    compression and variable packed structs.
    """
    kind = compression_kind(enc, io)
    if kind == "variable":
        return values
    if kind == "fsst":
        if compression_kind(enc.fsst.values, io) != "variable":
            raise unsupported(io, "per-value FSST over a non-variable encoding")
        return Var(values.data, values.offsets, bytes(enc.fsst.symbol_table))
    if kind == "general":
        return _per_value_general(enc.general, values, io)
    if kind == "variable_packed_struct":
        return _variable_packed_struct(enc.variable_packed_struct, values, io)
    raise unsupported(io, f"per-value compression {kind!r}")


def _per_value_general(enc: Any, values: Var, io: PageIO) -> Values:
    """Each value compressed on its own: ZSTD values are ``[u64 length][frame]``.

    An empty value is a row without data (a null row of the page, whose validity comes from the
    levels): it decodes to an empty value, as in :func:`_variable_packed_struct`. Each other value's
    length must match the content size its frame header states, so damage cannot move the point
    where one value ends and the next starts. Frames that state their size are joined and
    decompressed in one call (zstd decodes concatenated frames and checks each against its header);
    a frame that states none is decompressed on its own, against its value's length.
    """
    scheme = SCHEMES.get(enc.compression.scheme)
    if scheme != "zstd":
        raise unsupported(io, f"per-value {scheme or enc.compression.scheme} compression")
    if compression_kind(enc.values, io) != "variable":
        raise unsupported(io, "per-value general compression of non-variable values")
    u8 = np.frombuffer(values.data, np.uint8)
    offsets = values.offsets
    sizes = np.diff(offsets)
    if offsets.size and int(offsets[0]) < 0:
        raise io.corrupt("compressed values start before their buffer")
    if bool(np.any(sizes < 0)):
        raise io.corrupt("compressed value offsets go backwards")
    if bool(np.any((sizes > 0) & (sizes < 8))):
        raise io.corrupt("a compressed value is shorter than its length header")
    if offsets.size and int(offsets[-1]) > u8.size:
        raise io.corrupt("compressed values run past their buffer")
    # the values with data; error messages name values by their index among all of them
    index = np.flatnonzero(sizes > 0)
    starts = offsets[:-1][index]
    present = sizes[index]
    lengths = _le(u8, starts, 8) if index.size else np.zeros(0, np.int64)
    if bool(np.any(lengths < 0)):
        raise io.corrupt("a compressed value claims a negative length")
    total = int(lengths.sum())
    frame_sizes = present - 8
    frames = _frames(u8, starts + 8, frame_sizes)
    if total > most_from(frames.size):
        raise io.corrupt(f"{frames.size} compressed bytes claim {total} bytes of values")
    stated, known = zstd_content_sizes(u8, starts + 8, frame_sizes)
    wrong = np.flatnonzero(known & (stated != lengths.astype(np.uint64)))
    if wrong.size:
        i = int(wrong[0])
        more = f" ({wrong.size} values disagree with their frames)" if wrong.size > 1 else ""
        raise io.corrupt(
            f"compressed value {int(index[i])} claims {int(lengths[i])} bytes but its zstd frame header "
            f"says {int(stated[i])}{more}"
        )
    out_at = offsets_of(lengths)
    in_at = offsets_of(frame_sizes)
    # Runs of frames that state their sizes go in one call; a frame that states none goes alone.
    alone = np.flatnonzero(~known)
    cuts = sorted_unique(np.concatenate([[0, lengths.size], alone, alone + 1])).tolist()
    parts = []
    for a, b in pairwise(cuts):
        size = int(out_at[b] - out_at[a])
        if not size and known[a]:
            continue  # headers say the values are empty: nothing to decompress
        try:
            raw = frames[int(in_at[a]) : int(in_at[b])].data
            parts.append(codec("zstd").decompress(raw, decompressed_size=size))
        except (pa.ArrowException, OSError, ValueError) as exc:
            first, last = int(index[a]), int(index[b - 1])
            what = (
                f"compressed value {first} does" if b - a == 1 else f"compressed values {first} to {last} do"
            )
            raise io.corrupt(f"{what} not decompress ({exc})") from exc
    if index.size < sizes.size:  # rows without data: empty values
        all_lengths = np.zeros(sizes.size, np.int64)
        all_lengths[index] = lengths
        out_at = offsets_of(all_lengths)
    if len(parts) == 1:
        return Var(memoryview(parts[0]), out_at)
    return Var(b"".join(parts), out_at)


def _frames(u8: np.ndarray, at: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The zstd frames ``u8[at : at + size]`` back to back: a view for one frame, else joined by
    :func:`byteranges.join` (in order, one pass in C++ for many; an index per byte, as a numpy
    gather would need, costs more than the frames themselves)."""
    if sizes.size == 1:
        return u8[int(at[0]) : int(at[0] + sizes[0])]
    return np.frombuffer(join(u8.data, at, sizes), np.uint8)


def _variable_packed_struct(enc: Any, values: Var, io: PageIO) -> Struct:
    """Each row is its fields back to back: fixed-width fields as ``bits_per_value / 8`` bytes,
    variable-width ones as ``[length][bytes]``; each field is then decoded on its own."""
    u8 = np.frombuffer(values.data, np.uint8)
    offsets = values.offsets
    if offsets.size < 1 or int(offsets[-1]) > u8.size or bool(np.any(np.diff(offsets) < 0)):
        raise io.corrupt("packed struct rows do not fit their buffer")
    present = np.diff(offsets) > 0
    cursor = offsets[:-1][present]
    ends = offsets[1:][present]
    n = int(cursor.size)
    children: list[Values] = []
    for i, field in enumerate(enc.fields):
        layout = field.WhichOneof("layout")
        if layout == "bits_per_value":
            bits = int(field.bits_per_value)
            if bits <= 0 or bits % 8:
                raise unsupported(io, f"packed struct field {i} of {bits} bits")
            width = bits // 8
            if n and bool(np.any(cursor + width > ends)):
                raise io.corrupt(f"packed struct field {i} runs past its row")
            data = u8[spans(cursor, np.full(n, width, np.int64))].tobytes()
            cursor = cursor + width
            children.append(decode_values(field.value, [data], n, io))
        elif layout == "bits_per_length":
            prefix = int(field.bits_per_length) // 8
            if prefix not in (4, 8):
                raise io.corrupt(f"packed struct field {i} has {prefix * 8}-bit lengths")
            if n and bool(np.any(cursor + prefix > ends)):
                raise io.corrupt(f"packed struct field {i} length runs past its row")
            lengths = _le(u8, cursor, prefix) if n else np.zeros(0, np.int64)
            starts = cursor + prefix
            if bool(np.any(lengths < 0)) or (n and bool(np.any(starts + lengths > ends))):
                raise io.corrupt(f"packed struct field {i} runs past its row")
            data = u8[spans(starts, lengths)].tobytes()
            cursor = starts + lengths
            children.append(decode_per_value(field.value, Var(data, offsets_of(lengths)), io))
        else:
            raise io.corrupt(f"packed struct field {i} has neither a width nor a length size")
    if n and bool(np.any(cursor != ends)):
        raise io.corrupt("packed struct rows hold bytes past their last field")
    return Struct(children, None if present.all() else present)
