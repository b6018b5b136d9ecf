"""Byte ranges of page data joined into one buffer: slice by slice, in one strided copy when
the ranges are laid out evenly, in one pyarrow pass when they are many and in order, or by a
numpy gather of their bytes. Shared by the mini-block and full-zip decoders; and the rows of
many files decoded group by group put back in file order (:func:`in_file_order`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence

import numpy as np
import pyarrow as pa

from lance_table._buffers import empty
from lance_table.file.compression import bitpacking


def exclusive_cumsum(x: np.ndarray) -> np.ndarray:
    """The sums of the elements before each element of ``x`` (0 first), as int64."""
    out = np.zeros(x.size, np.int64)
    np.cumsum(x[:-1], out=out[1:])
    return out


def as_bytes(values: np.ndarray) -> memoryview:
    """The bytes of a contiguous array, without a copy."""
    return np.ascontiguousarray(values).reshape(-1).view(np.uint8).data


def join(data: bytes | memoryview, starts: np.ndarray, lengths: np.ndarray) -> bytes | memoryview:
    """The byte ranges ``[starts, starts + lengths)`` of ``data``, concatenated."""
    if starts.size > _STRIDED_JOIN:
        strided = _strided_join(data, starts, lengths)
        if strided is not None:
            return strided
    if starts.size > _ARROW_JOIN:
        joined = _arrow_join(data, starts, lengths)
        if joined is not None:
            return joined
    view = memoryview(data)  # slices of a view, not copies of bytes
    return b"".join([view[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist())])


# ranges above which :func:`join` looks for an even layout, and for ranges in order
_STRIDED_JOIN = 16
_ARROW_JOIN = 256


def _arrow_join(data: bytes | memoryview, starts: np.ndarray, lengths: np.ndarray) -> memoryview | None:
    """:func:`join` of ranges in order that do not overlap (the values of a full-zip page, each
    after its header), in one pass in C++: the bytes are read as a binary array whose entries are
    the ranges and the gaps between them, and the ranges are taken. None for other layouts."""
    ends = starts + lengths
    if (
        int(starts[0]) < 0
        or int(ends[-1]) > len(data)
        or bool(np.any(lengths < 0))
        or bool(np.any(starts[1:] < ends[:-1]))
    ):
        return None  # the slow path reports nothing either: slices clip, the caller checks sizes
    n = starts.size
    large = int(ends[-1]) >= 2**31
    bounds = np.empty(2 * n + 1, np.int64 if large else np.int32)
    bounds[0:-1:2] = starts
    bounds[1::2] = ends
    bounds[-1] = bounds[-2]
    entries = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(), 2 * n, [None, pa.py_buffer(bounds), pa.py_buffer(data)]
    )
    got = entries.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    offsets = np.frombuffer(got.buffers()[1], bounds.dtype, n + 1, got.offset)
    out = got.buffers()[2]
    return memoryview(out)[int(offsets[0]) : int(offsets[-1])] if out is not None else memoryview(b"")


def alternate(
    a: memoryview,
    a_starts: np.ndarray,
    a_lengths: np.ndarray,
    b: memoryview,
    b_starts: np.ndarray,
    b_lengths: np.ndarray,
) -> memoryview:
    """Ranges of two buffers taken in turn, ``a[a_starts[0]:...]``, ``b[b_starts[0]:...]``,
    ``a[a_starts[1]:...]``, and so on (each buffer's ranges in order, without overlaps: the
    unpacked blocks and raw tails of bitpacked chunks).

    Many ranges go in one Arrow take over both buffers joined; a few are sliced one by one."""
    n = a_starts.size
    base = len(a)
    large = base + len(b) >= 2**31
    bounds = np.empty(4 * n + 1, np.int64 if large else np.int32)
    if n >= _ARROW_JOIN // 2:
        bounds[0 : 2 * n : 2] = a_starts
        bounds[1 : 2 * n : 2] = a_starts + a_lengths
        bounds[2 * n : -1 : 2] = b_starts + base
        bounds[2 * n + 1 :: 2] = b_starts + b_lengths + base
        bounds[-1] = bounds[-2]
    if (
        n < _ARROW_JOIN // 2
        or bounds[0] < 0
        or bounds[-1] > base + len(b)
        or bool(np.any(bounds[1:] < bounds[:-1]))
    ):
        va, vb = memoryview(a), memoryview(b)
        pieces = []
        for s, k, t, m in zip(a_starts.tolist(), a_lengths.tolist(), b_starts.tolist(), b_lengths.tolist()):
            pieces.append(va[s : s + k])
            if m:
                pieces.append(vb[t : t + m])
        return memoryview(b"".join(pieces))
    entries = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(),
        4 * n,
        [None, pa.py_buffer(bounds), pa.py_buffer(b"".join([a, b]))],
    )
    order = np.empty(2 * n, np.int64)
    order[0::2] = np.arange(0, 2 * n, 2)
    order[1::2] = order[0::2] + 2 * n
    got = entries.take(pa.array(order))
    offsets = np.frombuffer(got.buffers()[1], bounds.dtype, 2 * n + 1, got.offset)
    out = got.buffers()[2]
    return memoryview(out)[int(offsets[0]) : int(offsets[-1])] if out is not None else memoryview(b"")


def _even(data: bytes | memoryview, starts: np.ndarray, lengths: np.ndarray) -> tuple[int, int, int] | None:
    """``(first start, step, length)`` where every range but the last has one length and the
    ranges start at even steps, all of them within ``data`` (chunks of a page full of equal
    values); None for any other layout."""
    n = starts.size
    step, length = int(starts[1] - starts[0]), int(lengths[0])
    if (
        step < length
        or length <= 0
        or bool(np.any(lengths[:-1] != length))
        or bool(np.any(starts[:-1] != starts[0] + step * np.arange(n - 1, dtype=starts.dtype)))
    ):
        return None
    last_at, last_len = int(starts[-1]), int(lengths[-1])
    first, size = int(starts[0]), memoryview(data).nbytes
    if first < 0 or first + step * (n - 2) + length > size or last_at < 0 or last_at + last_len > size:
        return None  # the slow path reports nothing either: slices clip, the caller checks sizes
    return first, step, length


def even(data: bytes | memoryview, starts: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether ``starts.size`` (at least 2) ranges are laid out evenly (see :func:`_even`)."""
    return _even(data, starts, lengths) is not None


def _strided_join(data: bytes | memoryview, starts: np.ndarray, lengths: np.ndarray) -> memoryview | None:
    """:func:`join` in one numpy copy when the ranges are laid out evenly (see :func:`_even`);
    None for any other layout."""
    even = _even(data, starts, lengths)
    if even is None:
        return None
    first, step, length = even
    n = starts.size
    u8 = np.frombuffer(data, np.uint8)
    last_at, last_len = int(starts[-1]), max(int(lengths[-1]), 0)
    rows = np.lib.stride_tricks.as_strided(u8[first:], shape=(n - 1, length), strides=(step, 1))
    out = empty((n - 1) * length + last_len, np.uint8)
    out[: (n - 1) * length].reshape(n - 1, length)[:] = rows
    out[(n - 1) * length :] = u8[last_at : last_at + last_len]
    return memoryview(out)  # type: ignore[arg-type]


#: the bytes of ranges :func:`join_in_place` moves at once (through a scratch block of this size)
IN_PLACE_BLOCK = 1 << 18


def join_in_place(data: memoryview, starts: np.ndarray, lengths: np.ndarray) -> memoryview | None:
    """:func:`join` of evenly laid out ranges (see :func:`_even`) by moving them towards the
    first one within ``data`` itself (which must be writable, and is overwritten): the joined
    bytes are a view of ``data``, and no buffer of their size is allocated (a fresh one faults
    its pages in: a page of 19 MB of vectors read from object storage cost as much to join as to
    receive). None for any other layout (``data`` is then untouched).

    Ranges move block by block through a small scratch buffer: each range only moves towards
    the start, so a block's destination never reaches the ranges after it."""
    if data.readonly or starts.size < 2:
        return None
    even = _even(data, starts, lengths)
    n = starts.size
    if even is None:
        return None
    first, step, length = even
    last_at, last_len = int(starts[-1]), max(int(lengths[-1]), 0)
    if last_at < first + step * (n - 2) + length:
        return None  # (the last range overlaps the one before: copied by join)
    u8 = np.frombuffer(data, np.uint8)
    out = u8[first : first + (n - 1) * length + last_len]
    if step > length:
        rows = np.lib.stride_tricks.as_strided(u8[first:], shape=(n - 1, length), strides=(step, 1))
        per = max(1, IN_PLACE_BLOCK // length)
        scratch = np.empty((min(per, n - 1), length), np.uint8)
        for k in range(0, n - 1, per):
            m = min(per, n - 1 - k)
            np.copyto(scratch[:m], rows[k : k + m])
            out[k * length : (k + m) * length].reshape(m, length)[:] = scratch[:m]
    # (numpy copies overlapping bytes as memmove would)
    out[(n - 1) * length :] = u8[last_at : last_at + last_len]
    return memoryview(out)  # type: ignore[arg-type]


def gather(data: bytes | memoryview, starts: np.ndarray, lengths: np.ndarray) -> memoryview:
    """Like :func:`join`, in one numpy gather (for many short ranges). Long ranges (a column's
    values in each of many files) are joined instead: a gather indexes every byte with 8 bytes."""
    if starts.size < 8:
        return memoryview(join(memoryview(data), starts, lengths))
    width = int(lengths[0])
    if (
        0 < width <= _WINDOW_BYTES
        and bool(np.all(lengths == width))
        and int(starts.min()) >= 0
        and int(starts.max()) + width <= len(data)
    ):
        # ranges of one length (strings of one width, pairs of offsets): one gather of rows
        return rows_at(data, starts, width)
    total = int(lengths.sum())
    if (
        total >= _GATHER_RANGE_BYTES * starts.size
        and int(starts.min()) >= 0
        and int(lengths.min()) >= 0
        and int((starts + lengths).max()) <= len(data)
    ):
        return memoryview(join(memoryview(data), starts, lengths))
    return as_bytes(np.frombuffer(data, np.uint8)[spans(starts, lengths)])


# ranges of at least this many bytes on average are joined by :func:`gather`, not gathered
_GATHER_RANGE_BYTES = 64
# ranges all of one length up to this many bytes are gathered as rows of that width (100k
# strings of 20 bytes: 5 ms against 20 ms for a gather of every byte)
_WINDOW_BYTES = 256


def rows_at(data: bytes | memoryview, starts: np.ndarray, width: int) -> memoryview:
    """The ``width``-byte rows of ``data`` that start at byte positions ``starts``, back to back."""
    u8 = np.frombuffer(data, np.uint8)
    if not starts.size:
        return memoryview(b"")
    typed = bitpacking.DTYPES.get(width * 8)
    if typed is not None and not bool(np.any(starts % width)):
        # aligned values of a machine width: one typed gather (the caller checked the bounds)
        return as_bytes(u8[: u8.size - u8.size % width].view(typed)[starts // width])
    return as_bytes(runs_of(u8, starts, width))


def runs_of(values: np.ndarray, starts: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` items of the contiguous 1-D array ``values`` from each of ``starts`` (checked by
    the caller to lie at or above 0), back to back: one gather of rows of ``k`` items, seen as
    starting at every item (a gather of a 2-D window view copies them item by item, 2.6 times
    as long for rows of 64 bytes)."""
    if k < 1 or values.size < k:
        if starts.size and k > 0:
            raise IndexError(f"rows of {k} items from an array of {values.size}")
        return values[:0]
    row = np.dtype((np.void, k * values.itemsize))
    rows = np.ndarray((values.size - k + 1,), row, values, 0, (values.itemsize,))
    return rows[starts].view(values.dtype)


def spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices ``starts[k] + j`` for ``j < lengths[k]``, chunk after chunk."""
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) + np.repeat(starts - exclusive_cumsum(lengths), lengths)


def _ascending(groups: Iterable[list[int]]) -> bool:
    """Whether each group (of ascending indices) starts after the one before ends."""
    last = -1
    for g in groups:
        if g[0] <= last:
            return False
        last = g[-1]
    return True


def in_file_order(
    keys: Sequence[Hashable], counts: np.ndarray, decode: Callable[[np.ndarray], pa.Array | None]
) -> pa.Array | None:
    """The rows of many files (``counts[k]`` rows in file ``k``), one file after another, where
    the files of one ``keys`` value are decoded together: ``decode(members)`` gives the rows of
    the files ``members`` (their indices, in order), or None, which this returns."""
    groups: dict[Hashable, list[int]] = {}
    for k, key in enumerate(keys):
        groups.setdefault(key, []).append(k)
    if all(g[-1] - g[0] == len(g) - 1 for g in groups.values()) and _ascending(groups.values()):
        # each group is a run of files and the runs come in file order (a file each, as pylance's
        # files with their own FSST tables): joined as they come, no row index (50 files of 20k
        # rows: 13.5 -> 1.4 ms)
        parts = []
        for members in groups.values():
            got = decode(np.arange(members[0], members[-1] + 1, dtype=np.int64))
            if got is None:
                return None
            parts.append(got)
        return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    starts = exclusive_cumsum(counts)
    parts, order = [], []
    for members in groups.values():
        sel = np.asarray(members, np.int64)
        got = decode(sel)
        if got is None:
            return None
        parts.append(got)
        order.append(spans(starts[sel], counts[sel]))
    if len(parts) == 1:
        return parts[0]
    placed = np.concatenate(order)
    joined = pa.concat_arrays(parts)
    parts.clear()  # each group's rows are in ``joined`` now: not held through the take below
    if bool(np.all(placed[1:] > placed[:-1])):  # the groups came in file order (a file each)
        return joined
    where = np.empty(placed.size, np.int64)
    where[placed] = np.arange(where.size)
    from lance_table.file.arrow_take import take  # (slices of nested fixed-size lists)

    return take(joined, pa.array(where))
