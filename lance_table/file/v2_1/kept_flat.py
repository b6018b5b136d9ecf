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
the mask marks, a run of them at a time, into an array from Arrow's pool a block of chunks at a
time (or, for megabytes of huge pages, into numpy's own result); the last chunk's kept rows are
appended. Chunks laid out otherwise (the pages of many files) are joined, then
selected.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
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


#: the most bytes of kept rows one numpy selection gives at once (see :func:`_selected`): a
#: selection small enough for the allocator to hand the same block out again and for the cache
#: to hold it while it is copied to its place
BLOCK_BYTES = 1 << 17
#: numpy maps arrays of at least this many bytes in huge pages (``madvise``)
HUGE_BYTES = 1 << 22


def _selected(
    data: memoryview, at: np.ndarray, counts: np.ndarray, width: int, mask: np.ndarray
) -> np.ndarray:
    """The ``width``-byte rows of the chunks (their values at ``at`` in ``data``, ``counts`` each,
    checked to lie in it) that ``mask`` marks, as one owned array of ``V{width}`` items.

    A selection of less than :data:`HUGE_BYTES` is put in an array from Arrow's pool
    (:func:`~lance_table._buffers.empty`), as the joined values of a clean page are, a block of
    chunks at a time: numpy's selection allocates its result itself, and a result of megabytes
    was mapped fresh on most scans and faulted in 4 KiB at a time as it was written (a 1M-row
    scan of floats after every tenth row was deleted took 11.3 ms against 6.1 clean, 1850 page
    faults; 9 ms in blocks). A larger one is left to numpy: it maps it in huge pages, whose few
    faults cost less than copying each block to its place did (16-float vectors: 33 against 41 ms)."""
    row = np.dtype(f"V{width}")
    n = counts.size
    body = n - 1  # the chunks seen as one 2-D array: all but the last
    per = int(counts[0]) if n else 0
    step = int(at[1] - at[0]) if n > 2 else per * width
    kept = int(np.count_nonzero(mask))
    whole = kept * width >= HUGE_BYTES
    out = np.zeros(0, row) if whole else empty(kept, row)
    if body and (
        step < per * width
        or bool(np.any(counts[:-1] != per))
        or bool(np.any(at[:-1] != at[0] + step * np.arange(body, dtype=at.dtype)))
    ):
        # chunks of other layouts: their values joined, then selected
        joined = np.frombuffer(join(data, at, counts * width), row, int(counts.sum()))
        if whole:
            return joined[mask]
        _select_into(out, joined, mask, max(1, BLOCK_BYTES // width))
        return out
    k = 0
    if body:
        first = np.frombuffer(data, row, 1, int(at[0]))
        grid = np.lib.stride_tricks.as_strided(
            first, shape=(body, per), strides=(step, width), writeable=False
        )
        marks = mask[: body * per].reshape(body, per)
        if whole:
            out = grid[marks]
            k = out.size
        else:
            k = _select_into(out, grid, marks, max(1, BLOCK_BYTES // (per * width)))
    last = np.frombuffer(data, row, int(counts[-1]), int(at[-1]))[mask[body * per :]] if n else out[:0]
    if last.size:
        if whole:
            # grown in place: the allocator remaps a large block rather than copy it (a fresh
            # array of the selection owns its memory; nothing else refers to it yet)
            out.resize(k + last.size, refcheck=False)
        out.view(np.uint8)[k * width :] = last.view(np.uint8)
    return out


def _select_into(out: np.ndarray, rows: np.ndarray, marks: np.ndarray, block: int) -> int:
    """Copy the items of ``rows`` that ``marks`` (of its shape) marks to the start of ``out``,
    ``block`` items of the first axis at a time; returns how many were copied."""
    flat, width, k = out.view(np.uint8), out.dtype.itemsize, 0
    for a in range(0, len(rows), block):
        got = rows[a : a + block][marks[a : a + block]]
        flat[k * width : (k + got.size) * width] = got.view(np.uint8)  # (bytes: one memcpy)
        k += got.size
    return k
