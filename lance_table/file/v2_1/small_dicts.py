"""Dictionaries of the files of a batch (see :mod:`small_many`): the values that the dictionary
indices of a column of many small 2.1/2.2 files stand for, every file's dictionary decoded (the
strings of all of them at once, in a few numpy calls) and joined, and every index moved to its
file's part of the join."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.file.arrow_take import take
from lance_table.file.compression import bitpacking, general
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.byteranges import exclusive_cumsum, spans
from lance_table.file.v2_1.compress import SCHEMES, decode_block
from lance_table.file.v2_1.values import Fixed, Var, is_binary, to_arrow

#: variable-width bytes of one column of a batch above which the files are read one by one
#: (32-bit Arrow offsets)
MAX_VAR_BYTES = 2**31 - 1


def le_uints(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned integers of ``width`` bytes at byte positions ``at`` of ``u8``."""
    out = u8[at].astype(np.int64)
    for k in range(1, width):
        out |= u8[at + k].astype(np.int64) << (8 * k)
    return out


def looked_up(
    indices: Fixed | Var,
    cols: list[Any],
    rows: np.ndarray,
    data: memoryview,
    bases: np.ndarray,
    dtype: pa.DataType,
    valid: np.ndarray | None,
    io: PageIO,
    pick: np.ndarray | None = None,
    picked: bool = False,
) -> pa.Array | None:
    """The values that the files' dictionary indices (``rows`` of each file, one after another) stand
    for (see :func:`look_up`); only those at ``pick`` (sorted positions among them, checked to
    lie below their count; ``valid``: theirs) when given (``picked``: ``indices`` are already
    just those)."""
    if not isinstance(indices, Fixed) or indices.bits not in bitpacking.DTYPES:
        return None
    if pick is None:
        idx = np.frombuffer(indices.data, bitpacking.DTYPES[indices.bits], int(rows.sum()))
        return look_up(idx, cols, rows, rows, data, bases, dtype, valid, io)
    counts = np.diff(np.searchsorted(pick, np.cumsum(rows)), prepend=0)
    if picked:
        idx = np.frombuffer(indices.data, bitpacking.DTYPES[indices.bits], pick.size)
    else:
        idx = np.frombuffer(indices.data, bitpacking.DTYPES[indices.bits], int(rows.sum()))[pick]
    return look_up(idx, cols, counts, rows, data, bases, dtype, valid, io)


def look_up(
    idx: np.ndarray,
    cols: list[Any],
    counts: np.ndarray,
    rows: np.ndarray,
    data: memoryview,
    bases: np.ndarray,
    dtype: pa.DataType,
    valid: np.ndarray | None,
    io: PageIO,
) -> pa.Array | None:
    """The values that dictionary indices ``idx`` (``counts`` of each file, one after another;
    the files' pages hold ``rows`` rows) stand for: each file's dictionary decoded, all joined,
    and every index moved to its file's part of the join (None where anything does not check
    out). ``valid``: the validity of the indices (an index of a null row may be past its
    dictionary)."""
    idx = idx.astype(np.int64)
    items = np.fromiter((c.dict_items for c in cols), np.int64, len(cols))
    limit = np.repeat(items, counts)
    past = idx >= limit
    if bool(past.any()):  # only null rows may hold any index
        if valid is None or bool(np.any(past & valid)):
            return None
        idx[past] = 0
    if bool(np.any((items == 0) & (counts > 0))) and (valid is None or bool(valid.any())):
        return None
    for c, n in zip(cols, rows.tolist()):
        if c.dict_items > max(n + 1, 8 * (c.dict_size + c.data_size)):
            return None  # more items than the page can hold (the general decoder says so)
    found = _joined_dictionaries(cols, data, bases, dtype, io)
    if found is None:
        found = _each_dictionary(cols, data, bases, dtype, io)
    joined_items, first_item = found
    idx += np.repeat(first_item, counts)
    return take(joined_items, pa.array(idx))


def _each_dictionary(
    cols: list[Any], data: memoryview, bases: np.ndarray, dtype: pa.DataType, io: PageIO
) -> tuple[pa.Array, np.ndarray]:
    """The files' dictionaries decoded one by one and joined, and where each file's items start
    in the join."""
    # files whose dictionaries are the same bytes (of one compression) share one decoded copy:
    # the appends of a living table mostly repeat theirs
    pieces = []
    seen: dict[tuple[Any, ...], int] = {}
    first_item = np.zeros(len(cols), np.int64)  # where each file's items start in the join
    held = 0
    for k, (c, base) in enumerate(zip(cols, bases.tolist())):
        at = base + c.dict_at
        raw = data[at : at + c.dict_size]
        key = (id(c.dict_encoding), c.dict_items, raw.tobytes())
        found = seen.get(key)
        if found is None:
            got = decode_block(c.dict_encoding, raw, c.dict_items, io)
            pieces.append(to_arrow(got, dtype, c.dict_items, io))
            found = seen[key] = held
            held += c.dict_items
        first_item[k] = found
    # (the encodings are kept by the layouts while this runs: their ids stay theirs)
    return pa.concat_arrays(pieces), first_item  # (past 32-bit offsets: an ArrowInvalid, read one by one)


def _joined_dictionaries(
    cols: list[Any], data: memoryview, bases: np.ndarray, dtype: pa.DataType, io: PageIO
) -> tuple[pa.Array, np.ndarray] | None:
    """:func:`_each_dictionary` for dictionaries of variable-width values (strings) with 32-bit
    offsets, maybe in a general compression: each decompressed (one call each, or one for all
    zstd frames), then every file's offsets read and checked and all items gathered into one
    array with a few numpy calls, not a decode and an array per file (a take of a few rows of
    each of hundreds of small files decodes a dictionary per file). None when they are of
    another form (the caller decodes them one by one), or one does not check out."""
    enc = cols[0].dict_encoding  # (all alike: the dictionary's encoding is part of the key)
    kind = enc.WhichOneof("compression")
    scheme = None
    if kind == "general":
        scheme = SCHEMES.get(enc.general.compression.scheme)
        if scheme is None:
            return None
        kind = enc.general.values.WhichOneof("compression")
    if kind != "variable" or not is_binary(dtype):
        return None
    # files whose dictionaries are the same bytes share one decoded copy: the appends of a
    # living table mostly repeat theirs
    distinct: dict[tuple[int, bytes], int] = {}
    which = np.fromiter(
        (
            distinct.setdefault(
                (c.dict_items, data[b + c.dict_at : b + c.dict_at + c.dict_size].tobytes()), len(distinct)
            )
            for c, b in zip(cols, bases.tolist())
        ),
        np.int64,
        len(cols),
    )
    first_of = np.full(len(distinct), len(cols), np.int64)
    np.minimum.at(first_of, which, np.arange(len(cols)))
    found = _decoded_dictionaries(
        [cols[k] for k in first_of.tolist()], data, bases[first_of], dtype, scheme, io
    )
    if found is None:
        return None
    return found[0], found[1][which]


def _decoded_dictionaries(
    cols: list[Any], data: memoryview, bases: np.ndarray, dtype: pa.DataType, scheme: str | None, io: PageIO
) -> tuple[pa.Array, np.ndarray] | None:
    """The dictionaries of :func:`_joined_dictionaries` (one per file), decoded and joined, and
    where each one's items start in the join."""
    n = len(cols)
    at = bases + np.fromiter((c.dict_at for c in cols), np.int64, n)
    sizes = np.fromiter((c.dict_size for c in cols), np.int64, n)
    items = np.fromiter((c.dict_items for c in cols), np.int64, n)
    if scheme is None:
        blocks: list[memoryview] = [data[a : a + s] for a, s in zip(at.tolist(), sizes.tolist())]
    else:
        blocks = general.decompress_many(data, at, sizes, scheme, io)
    lengths = np.fromiter((len(b) for b in blocks), np.int64, n)
    if bool(np.any(lengths < 8)):
        return None
    u8 = np.frombuffer(b"".join(blocks), np.uint8)
    block_at = exclusive_cumsum(lengths)
    # each block: u32 offset width (32), u32 where the values start, n + 1 u32 offsets, values
    if bool(np.any(le_uints(u8, block_at, 4) != 32)) or bool(np.any(8 + (items + 1) * 4 > lengths)):
        return None
    start = le_uints(u8, block_at + 4, 4)
    if bool(np.any(start > lengths)):
        return None
    count = items + 1
    first = exclusive_cumsum(count)
    file_of = np.repeat(np.arange(n), count)
    ordinal = np.arange(file_of.size, dtype=np.int64) - first[file_of]
    offsets = le_uints(u8, block_at[file_of] + 8 + 4 * ordinal, 4)
    step = np.diff(offsets)
    step[first[1:] - 1] = 0  # (between one file's last offset and the next file's first)
    last = offsets[first + items]
    if bool(np.any(step < 0)) or bool(np.any(last > lengths - start)):
        return None
    # the items' bytes: each file's from its values' start, gathered one after another
    item_of = np.delete(np.arange(file_of.size), first + items)
    item_file = file_of[item_of]
    item_start = block_at[item_file] + start[item_file] + offsets[item_of]
    item_size = offsets[item_of + 1] - offsets[item_of]
    total = int(item_size.sum())
    if total > MAX_VAR_BYTES:
        return None
    out_offsets = np.zeros(item_of.size + 1, np.int64)
    np.cumsum(item_size, out=out_offsets[1:])
    body = u8[spans(item_start, item_size)].tobytes() if total else b""
    return to_arrow(Var(body, out_offsets), dtype, item_of.size, io), exclusive_cumsum(items)
