"""FastLanes bit-unpacking (the "1024-value transposed" layout of Lance 2.1+ bitpacking), in numpy.

A block holds 1024 values of an unsigned T-bit type packed at W bits, as W * (1024 / T) words of
T bits. Lane ``l`` (of ``1024 / T``) is a bit stream made of words ``packed[k * lanes + l]``; its
``r``-th W-bit field is the value at position ``ORDER[r // 8] * 16 + (r % 8) * 128 + l``.
"""

from __future__ import annotations

import functools

import numpy as np

ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])
DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
BLOCK = 1024


@functools.lru_cache(maxsize=256)
def _plan(t: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For a T-bit type packed at W bits: the fields of a lane in the order their values appear in
    the block, each as (word it starts in, the next word, right shift, left shift of the next word).

    Field ``r = 8 * hi + lo`` lands at ``lo * 128 + ORDER[hi] * 16 + lane``, so listing fields by
    ``lo`` and then by ``ORDER[hi]`` makes the (field, lane) array the block itself.
    """
    dtype = DTYPES[t]
    by_order = np.argsort(ORDER[: t // 8])
    r = (by_order[None, :] * 8 + np.arange(8)[:, None]).ravel()
    start = r * w  # bit offset of field r in its lane's stream
    first = start // t
    shift = start % t
    # A field that fits its first word takes bits from the next one only above bit W, which the
    # mask clears; the last word has no next one, so it stands in for itself there.
    second = np.minimum(first + 1, w - 1)
    return first, second, shift.astype(dtype)[None, :, None], (t - shift).astype(dtype)[None, :, None]


def unpack(words: np.ndarray, t: int, w: int, blocks: int) -> np.ndarray:
    """Unpack ``blocks`` blocks of W-bit values from T-bit ``words``; returns ``blocks * 1024`` values."""
    dtype = DTYPES[t]
    if blocks == 0:
        return np.zeros(0, dtype)
    if w == 0:
        return np.zeros(blocks * BLOCK, dtype)
    lanes = BLOCK // t
    packed = words[: blocks * w * lanes].reshape(blocks, w, lanes)
    first, second, right, left = _plan(t, w)
    # Shifts stay in the T-bit type: bits pushed past the top fall off, and a shift by T gives 0.
    out = np.take(packed, first, axis=1)
    out >>= right
    spill = np.take(packed, second, axis=1)
    spill <<= left
    out |= spill
    if w < t:
        out &= dtype((1 << w) - 1)
    return out.reshape(-1)
