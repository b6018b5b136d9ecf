"""Arithmetic of byte ranges, shared by every byte source: merging ranges that lie close together
into one read, the spans that hold scattered ranges, and picking ranges out of the spans read.

No I/O here: the sources (:mod:`lance_table.storage.sources` and the remote ones) do the reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from lance_table._buffers import empty
from lance_table._numpy import sorted_unique

# Ranges whose gap is smaller than this are fetched with one read.
DEFAULT_COALESCE_GAP = 64 * 1024


def coalesce(
    ranges: Sequence[tuple[int, int]] | np.ndarray, gap: int = DEFAULT_COALESCE_GAP
) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """Merge ranges that overlap or lie less than ``gap`` bytes apart.

    Returns the merged ``(offset, length)`` reads and, for every input range, the index of the merged
    read that holds it and its offset inside that read.
    """
    n = len(ranges)
    if n == 0:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64)
    arr = np.asarray(ranges, dtype=np.int64).reshape(n, 2)
    order = np.argsort(arr[:, 0], kind="stable")
    starts = arr[order, 0]
    ends = np.maximum.accumulate(starts + arr[order, 1])
    merged_starts, merged_ends, owner = merge_sorted(starts, ends, gap)
    merged = list(zip(merged_starts.tolist(), (merged_ends - merged_starts).tolist()))
    which = np.empty(n, np.int64)
    inner = np.empty(n, np.int64)
    which[order] = owner
    inner[order] = starts - merged_starts[owner]
    return merged, which, inner


def merge_sorted(starts: np.ndarray, ends: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ranges ``[starts, ends)`` sorted by start (``ends`` never falling) merged where they overlap
    or lie at most ``gap`` bytes apart: the merged ranges' starts and ends, and for every range
    the index of the merged range that holds it."""
    n = starts.size
    new_read = np.ones(n, bool)
    new_read[1:] = starts[1:] > ends[:-1] + gap
    owner = np.cumsum(new_read) - 1
    first = np.flatnonzero(new_read)
    return starts[first], ends[np.append(first[1:], n) - 1], owner


def apart(ranges: np.ndarray, gap: int) -> bool:
    """Whether no two of ``ranges`` (``(offset, length)`` rows) would be merged into one read
    (see :func:`coalesce`): each is then a request of its own, which a remote source can receive
    straight into its place in a joined buffer (a take's spans); ranges that merge (a take's
    values, a few bytes each) are joined better by one copy of them all."""
    if ranges.shape[0] < 2:
        return True
    starts = np.sort(ranges[:, 0])
    ends = np.maximum.accumulate((ranges[:, 0] + ranges[:, 1])[np.argsort(ranges[:, 0], kind="stable")])
    return bool(np.all(starts[1:] > ends[:-1] + gap))


def spans_of(ranges: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray]:
    """The spans that hold ``ranges`` (``(offset, length)`` rows, in any order): ranges at most
    ``gap`` bytes apart share a span (a source with that coalescing gap would read them with one
    request anyway), so the spans, ``(offset, length)`` rows in file order, lie more than ``gap``
    apart (:func:`apart`); and where each range starts in the spans read one after another
    (see :func:`gather`). A remote source receives each span straight into its place in one
    buffer, and the ranges are gathered from it by numpy, not sliced and joined one by one."""
    order = np.argsort(ranges[:, 0], kind="stable")
    starts = ranges[order, 0]
    lo, hi, owner = merge_sorted(starts, np.maximum.accumulate(starts + ranges[order, 1]), gap)
    at = np.zeros(lo.size, np.int64)
    np.cumsum((hi - lo)[:-1], out=at[1:])
    inside = np.empty(order.size, np.int64)
    inside[order] = starts - lo[owner] + at[owner]
    return np.stack([lo, hi - lo], axis=1), inside


#: ranges of at most this many bytes on average are gathered from their merged spans by numpy.
SMALL_RANGE = 256
#: the most bytes :func:`gather` picks with one index (of 8 bytes a byte): bounds its scratch memory
GATHER_BLOCK = 1 << 20


def gather(spans: memoryview, inside: np.ndarray, lengths: np.ndarray) -> memoryview:
    """Ranges ``[inside, inside + lengths)`` of ``spans``, one after another in one buffer: a slice
    where they follow one another there, else small ranges (a take's values, a few bytes each)
    picked by numpy takes over blocks of their bytes (no Python step per range), larger ones
    copied one by one."""
    n = lengths.size
    if n == 0:
        return memoryview(b"")
    total = int(lengths.sum())
    if n == 1 or bool(np.all(inside[1:] == inside[:-1] + lengths[:-1])):
        first = int(inside[0])
        return spans[first : first + total]
    src = np.frombuffer(spans, np.uint8)
    out = empty(total, np.uint8)
    at = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=at[1:])
    if total > SMALL_RANGE * n or int(lengths.max()) > GATHER_BLOCK:
        view = memoryview(out)  # type: ignore[arg-type]
        for s, a, b in zip(inside.tolist(), at.tolist(), at[1:].tolist()):
            view[a:b] = spans[s : s + b - a]
        return view
    # blocks of whole ranges of about GATHER_BLOCK bytes (at most twice that): the ranges from
    # the one holding a block's first byte to the one before the next block's
    shift = inside - at[:-1]
    firsts = sorted_unique(np.searchsorted(at, np.arange(0, total, GATHER_BLOCK), side="right") - 1)
    bounds = [*firsts.tolist(), n]
    for g0, g1 in pairwise(bounds):
        a, b = int(at[g0]), int(at[g1])
        picks = np.arange(a, b, dtype=np.int64) + np.repeat(shift[g0:g1], lengths[g0:g1])
        np.take(src, picks, out=out[a:b], mode="clip")  # (valid picks: no checks)
    return memoryview(out)  # type: ignore[arg-type]


def places_in(lengths: Sequence[int]) -> tuple[memoryview, list[memoryview]]:
    """One buffer for ``lengths`` bytes one after another (a negative length counts as none: the
    read reports it), and the place of each in it."""
    out = memoryview(empty(sum(max(n, 0) for n in lengths), np.uint8))  # type: ignore[arg-type]
    places = []
    at = 0
    for n in lengths:
        n = max(n, 0)
        places.append(out[at : at + n])
        at += n
    return out, places


def range_pairs(arr: np.ndarray) -> list[tuple[int, int]]:
    """``(offset, length)`` rows of an array as a list of int pairs (what ``read_ranges`` takes)."""
    return list(zip(arr[:, 0].tolist(), arr[:, 1].tolist()))
