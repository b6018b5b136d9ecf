"""Mini-block chunks of one shape (all but the last hold as many values and blocks, as writers
make them) decoded as the rows of a 2-D view: one broadcast or one slice copy instead of index
arrays built per value. Used by :mod:`batch`, which falls back to its general forms."""

from __future__ import annotations

import numpy as np

from lance_table._buffers import empty
from lance_table.file.compression import bitpacking
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.byteranges import exclusive_cumsum


def joined_offsets(
    words: np.ndarray, counts: np.ndarray, sizes: np.ndarray, width: int, io: PageIO
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`batch._joined_offsets` of chunks that all hold as many values but the last (what a
    writer makes of a page): the offsets of those chunks are the rows of a 2-D view, shifted
    row by row, with no index arrays."""
    c, k = int(counts[0]), counts.size - 1
    if words.dtype == np.uint64:  # (a value past 2^63 reads negative: out of order, reported)
        words = words.view(np.int64)
    grid = words[: k * (c + 1)].reshape(k, c + 1)
    tail = words[k * (c + 1) :]
    lo = np.append(grid[:, 0], tail[:1]).astype(np.int64)
    hi = np.append(grid[:, c], tail[-1:]).astype(np.int64)
    n1 = counts + 1
    if (
        tail.size != int(counts[-1]) + 1
        or bool(np.any(lo < n1 * width) or np.any(lo > hi) or np.any(hi > sizes))
        or bool(np.any(grid[:, 1:] < grid[:, :-1]))
        or bool(np.any(tail[1:] < tail[:-1]))
    ):
        raise io.corrupt("variable offsets are out of order or past the buffer")
    shift = exclusive_cumsum(hi - lo) - lo
    offsets = np.empty(k * c + tail.size, np.int64)
    np.add(grid[:, :c], shift[:k, None], out=offsets[: k * c].reshape(k, c))
    np.add(tail, shift[k], out=offsets[k * c :])
    return lo, hi, offsets


def segmented_offsets(
    words: np.ndarray, counts: np.ndarray, sizes: np.ndarray, width: int, io: PageIO
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`joined_offsets` of chunks that hold ``counts[0]`` values each but a few (the chunks
    of several pages one after another, each page's last chunk shorter): the checks for all chunks
    at once, then each run of even chunks shifted as the rows of a 2-D view and each other chunk
    as one slice."""
    c = int(counts[0])
    n1 = counts + 1
    first = exclusive_cumsum(n1)  # each chunk's first offset among the words
    last = first + counts
    if words.dtype == np.uint64:  # (a value past 2^63 reads negative: out of order, reported)
        words = words.view(np.int64)
    lo, hi = words[first].astype(np.int64), words[last].astype(np.int64)
    # offsets fall only where a chunk's offsets end and the next chunk's begin
    falls = np.flatnonzero(words[1:] < words[:-1])
    if bool(np.any(lo < n1 * width) or np.any(lo > hi) or np.any(hi > sizes)) or not bool(
        np.isin(falls, last[:-1], assume_unique=True).all()
    ):
        raise io.corrupt("variable offsets are out of order or past the buffer")
    shift = exclusive_cumsum(hi - lo) - lo
    into = exclusive_cumsum(counts)  # where each chunk's values land
    offsets = empty(int(counts.sum()) + 1, np.int64)
    odd = np.flatnonzero(counts != c).tolist()
    a = 0
    for b in [*odd, counts.size]:
        if b > a:  # chunks a..b-1 hold c values each: rows of c + 1 words
            k = b - a
            grid = words[int(first[a]) : int(first[a]) + k * (c + 1)].reshape(k, c + 1)
            np.add(
                grid[:, :c], shift[a:b, None], out=offsets[int(into[a]) : int(into[a]) + k * c].reshape(k, c)
            )
        if b < counts.size:
            m = int(counts[b])
            np.add(
                words[int(first[b]) : int(first[b]) + m],
                shift[b],
                out=offsets[int(into[b]) : int(into[b]) + m],
            )
        a = b + 1
    offsets[-1] = hi[-1] + shift[-1]
    return lo, hi, offsets


def runs(unpacked: np.ndarray, blocks: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """The values of chunks that all have as many blocks and values but the last (pylance's
    chunks of levels: a padded block each), cut from the unpacked blocks as the rows of a 2-D
    view in one copy; None for other layouts."""
    b, c = int(blocks[0]), int(counts[0])
    if bool(np.any(blocks[:-1] != b)) or bool(np.any(counts[:-1] != c)):
        return None
    k = blocks.size - 1
    run = b * bitpacking.BLOCK
    last = int(counts[-1])
    if c > run or last > int(blocks[-1]) * bitpacking.BLOCK:
        return None
    out = np.empty(k * c + last, unpacked.dtype)
    out[: k * c].reshape(k, c)[:] = unpacked[: k * run].reshape(k, run)[:, :c]
    out[k * c :] = unpacked[k * run : k * run + last]
    return out
