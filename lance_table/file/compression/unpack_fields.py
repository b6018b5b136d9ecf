"""FastLanes unpacking of many blocks a field at a time (the layout: :mod:`.bitpacking`).

:func:`.bitpacking.unpack` works block by block: each step runs over whole blocks, but its word
gather copies rows of one lane group (16 values of a 64-bit type), and its shifts differ from row
to row. Here the words of a group of blocks are first laid out word by word (word ``k`` of every
block and lane in one row); then the fields that share a shift (fields ``j, j + P, j + 2P, ...``
for ``P = T / gcd(W, T)``) are one right shift by a constant, over every block at once, and those
that run on into the next word take one left shift and an OR more. The fields come out field by
field; one strided copy puts them where the block order wants them.

That is fewer, longer numpy calls per value, at the price of two transposing copies and a
temporary as large as the output: a gain for 8- and 16-bit types (0.4-0.8 of the time), for
32-bit ones (0.8-0.95) and for 64-bit ones packed at 28 bits or more (0.8-0.9), on runs of
hundreds of blocks; :func:`worth` tells when.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from lance_table._buffers import empty

BLOCK = 1024
#: blocks unpacked at a time: each call covers a group's blocks (its temporaries are about
#: 2 times the group's output)
GROUP = 1024


def worth(t: int, w: int, blocks: int) -> bool:
    """Whether :func:`unpack` beats the block-by-block kernel on ``blocks`` blocks of T-bit values
    packed at W bits (measured on runs of 128 to 1024 blocks: the calls here are fewer per value
    but each costs the same, so short runs lose)."""
    if t <= 16:
        return blocks >= 128
    if t == 32:
        return blocks >= 256
    return 28 <= w < t and blocks >= 512


@functools.lru_cache(maxsize=256)
def _classes(t: int, w: int) -> tuple[tuple[tuple[int, int, int, bool], ...], int, int]:
    """The fields of a lane grouped by shift: per class ``j`` (of ``P``), the word its first field
    starts in, the shift, and whether its fields run on into the next word; the class size ``g``
    and the step ``W / g`` between the words of consecutive fields of a class."""
    g = math.gcd(w, t)
    classes = tuple((j * w // t, j * w % t, j * w % t + w > t) for j in range(t // g))
    return classes, g, w // g


def unpack(packed: np.ndarray, t: int, w: int, out: np.ndarray) -> np.ndarray:
    """Unpack the blocks of ``packed`` (a view of shape ``(blocks, W, 1024 / T)``: each block's
    words) into ``out`` (``blocks * 1024`` contiguous T-bit values), and return ``out``.

    Field ``r = 8 * hi + lo`` of lane ``l`` lands at row ``lo * T / 8 + reverse(hi)`` (``hi``'s
    ``log2(T / 8)`` bits reversed: that is what ``ORDER`` does), so the fields laid out as
    ``(hi bits..., lo, block, lane)`` are the blocks with their axes transposed."""
    dtype = packed.dtype
    blocks, _, lanes = packed.shape
    classes, g, step = _classes(t, w)
    period = t // g
    mask = dtype.type((1 << w) - 1)
    bits = (t // 8).bit_length() - 1  # of hi
    order = (bits + 1, bits, *range(bits - 1, -1, -1), bits + 2)
    size = min(GROUP, blocks)
    words = empty((w + 1) * size * lanes, dtype).reshape(w + 1, size, lanes)
    fields = empty(t * size * lanes, dtype).reshape(t, size, lanes)
    spill = np.empty((g, size, lanes), dtype)
    for lo in range(0, blocks, size):
        hi = min(lo + size, blocks)
        n = hi - lo
        by_word, by_field, extra = words[:, :n], fields[:, :n], spill[:, :n]
        np.copyto(by_word[:w], packed[lo:hi].transpose(1, 0, 2))
        by_word[w] = 0  # (never read as a field's next word: every such word exists)
        for j, (first, shift, runs_on) in enumerate(classes):
            # the class's g fields start in words first, first + step, ...: a strided view
            target = by_field[j::period]
            np.right_shift(by_word[first : first + (g - 1) * step + 1 : step], dtype.type(shift), out=target)
            if runs_on:
                nxt = by_word[first + 1 : first + (g - 1) * step + 2 : step]
                np.left_shift(nxt, dtype.type(t - shift), out=extra)
                target |= extra
        if w < t:
            by_field &= mask
        rows = out[lo * BLOCK : hi * BLOCK].reshape((n, 8, *(2,) * bits, lanes))
        np.copyto(rows, by_field.reshape(((2,) * bits + (8, n, lanes))).transpose(order))
    return out
