"""The kept rows of mini-block pages of values of one width, copied once, straight from the chunks.

A fragment with rows deleted here and there is scanned as the span of its live rows, each page's
kept rows selected as it is decoded (a mask, ``keep``); small fragments read as a batch
(:mod:`small_many`) select the kept rows of all their files the same way. Values stored flat
(numbers, and the vectors of fixed-size lists of them) decode by a copy of the chunks' value bytes,
joined; selecting the kept rows of those copied them once more. A 1M-row scan of a 16-float vector
column after 10% of its rows were deleted took 2.0-2.4 times its clean scan, Arrow's filter as
long as the join. Here only the kept rows are copied: all the chunks but the last hold as many
values and lie at even steps (the writers fill chunks of one power of two of values), seen without
a copy as a 2-D array of (chunk, row in chunk); numpy's boolean selection of it copies the rows
the mask marks, a run of them at a time; the last chunk's kept rows are appended to the same
buffer (grown in place). Chunks laid out otherwise (the pages of many files) are joined, then
selected.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.file.arrow import with_validity
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.byteranges import as_bytes, join
from lance_table.file.v2_1.chunk_headers import ChunksRead
from lance_table.file.v2_1.values import MAX_LIST_SIZE, Fixed, to_arrow


def flat_bits(enc: Any) -> tuple[int, int] | None:
    """For values stored flat, of a whole number of bytes, the bits of one stored value and how many
    make a row (a fixed-size list's items per value); None for any other encoding."""
    per = 1
    if enc.WhichOneof("compression") == "fixed_size_list" and not enc.fixed_size_list.has_validity:
        per = int(enc.fixed_size_list.items_per_value)
        if not 0 < per <= MAX_LIST_SIZE:
            return None  # (the general path reports it)
        enc = enc.fixed_size_list.values
    if enc.WhichOneof("compression") != "flat" or enc.flat.HasField("data"):
        return None
    bits = int(enc.flat.bits_per_value)
    return (bits, per) if bits and bits % 8 == 0 else None


def applies(layout: Any) -> bool:
    """Whether a mini-block page's kept rows are copied once by :func:`kept`: values stored flat
    (of whole bytes), no dictionary, no repetition. (Even 1-byte values: numpy's selection, a run
    of rows at a time, was as fast as Arrow's filter of the values joined, not counting the join;
    8-byte values took 1.6 ms against 2.5 for 500k rows.)"""
    return (
        flat_bits(layout.value_compression) is not None
        and not layout.HasField("dictionary")
        and int(layout.num_buffers) == 1
        and not layout.HasField("rep_compression")
    )


def kept(
    read: ChunksRead,
    enc: Any,
    start: int,
    keep: pa.BooleanArray | np.ndarray,
    dtype: pa.DataType,
    io: PageIO,
) -> pa.Array:
    """The rows that ``keep`` (Arrow or numpy bools) marks, from the ``start``-th value on, of
    the chunks ``read`` (read whole; without repetition levels; one value buffer each) of a
    mini-block page, or of the pages of many files, whose values ``enc`` are stored flat (see
    :func:`flat_bits`), as an Arrow array of ``dtype``.

    Raises:
        CorruptFileError: a chunk's buffer is shorter than its values, or the chunks hold fewer
            values than the mask covers.
    """
    data, at, sizes, counts, defs = read.data, read.buf_at[0], read.sizes[0], read.counts, read.defs
    got = flat_bits(enc)
    assert got is not None
    bits, per = got
    width = bits // 8 * per
    need = counts * width
    if bool(np.any(need > sizes)) or (at.size and (int(at.min()) < 0 or int((at + need).max()) > len(data))):
        raise io.corrupt("a chunk's value buffer is shorter than its values")
    n = len(keep)
    total = int(counts.sum())
    if start < 0 or start + n > total:
        raise io.corrupt(f"chunks of {total} values, {start + n} needed")
    mask = np.zeros(total, np.bool_)
    mask[start : start + n] = marks(keep) if isinstance(keep, pa.Array) else keep
    rows = _selected(data, at, counts, width, mask)
    count = rows.size
    arr = to_arrow(Fixed(as_bytes(rows), bits), dtype, count, io)
    if defs is not None:
        if defs.size != total:
            raise io.corrupt(f"{defs.size} definition levels for {total} values")
        valid = defs[mask] == 0
        if not valid.all():
            arr = with_validity(arr, valid)
    return arr


def marks(keep: pa.BooleanArray) -> np.ndarray:
    """A mask without nulls as numpy booleans (its bits unpacked: a fifteenth of Arrow's
    conversion's time)."""
    if not len(keep):
        return np.zeros(0, np.bool_)
    bits = np.frombuffer(keep.buffers()[1], np.uint8)
    return np.unpackbits(bits, count=keep.offset + len(keep), bitorder="little")[keep.offset :].view(np.bool_)


def _selected(
    data: memoryview, at: np.ndarray, counts: np.ndarray, width: int, mask: np.ndarray
) -> np.ndarray:
    """The ``width``-byte rows of the chunks (their values at ``at`` in ``data``, ``counts`` each,
    checked to lie in it) that ``mask`` marks, as one owned array of ``V{width}`` items."""
    row = np.dtype(f"V{width}")
    n = counts.size
    body = n - 1  # the chunks seen as one 2-D array: all but the last
    per = int(counts[0]) if n else 0
    step = int(at[1] - at[0]) if n > 2 else per * width
    if body and (
        step < per * width
        or bool(np.any(counts[:-1] != per))
        or bool(np.any(at[:-1] != at[0] + step * np.arange(body, dtype=at.dtype)))
    ):
        # chunks of other layouts: their values joined, then selected
        joined = np.frombuffer(join(data, at, counts * width), row, int(counts.sum()))
        return joined[mask]
    if body:
        first = np.frombuffer(data, row, 1, int(at[0]))
        grid = np.lib.stride_tricks.as_strided(
            first, shape=(body, per), strides=(step, width), writeable=False
        )
        out = grid[mask[: body * per].reshape(body, per)]
    else:
        out = np.zeros(0, row)
    last = np.frombuffer(data, row, int(counts[-1]), int(at[-1]))[mask[body * per :]] if n else out[:0]
    if last.size:
        k = out.size
        # grown in place: the allocator remaps a large block rather than copy it (a fresh array
        # of the selection owns its memory; nothing else refers to it yet)
        out.resize(k + last.size, refcheck=False)
        out[k:] = last
    return out
