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


@functools.lru_cache(maxsize=8)
def _positions(t: int) -> np.ndarray:
    """For a T-bit type: the output position of field r of lane l, as a (T, lanes) array."""
    lanes = BLOCK // t
    r = np.arange(t)[:, None]
    lane = np.arange(lanes)[None, :]
    return (ORDER[r // 8] * 16 + (r % 8) * 128 + lane).astype(np.int64)


def unpack(words: np.ndarray, t: int, w: int, blocks: int) -> np.ndarray:
    """Unpack ``blocks`` blocks of W-bit values from T-bit ``words``; returns ``blocks * 1024`` values."""
    dtype = DTYPES[t]
    if blocks == 0:
        return np.zeros(0, dtype)
    if w == 0:
        return np.zeros(blocks * BLOCK, dtype)
    lanes = BLOCK // t
    packed = words[: blocks * w * lanes].reshape(blocks, w, lanes).astype(np.uint64)
    start = np.arange(t) * w  # bit offset of field r in its lane's stream
    first = start // t
    shift = (start % t).astype(np.uint64)
    low = packed[:, first, :] >> shift[None, :, None]
    spills = (start % t) + w > t
    high = np.zeros_like(low)
    if spills.any():
        second = np.minimum(first + 1, w - 1)
        up = np.where(spills, t - start % t, 0).astype(np.uint64)
        high = np.where(spills[None, :, None], packed[:, second, :] << up[None, :, None], np.uint64(0))
    mask = np.uint64(0xFFFFFFFFFFFFFFFF) if w >= 64 else np.uint64((1 << w) - 1)
    fields = (low | high) & mask
    out = np.empty((blocks, BLOCK), np.uint64)
    out[:, _positions(t).ravel()] = fields.reshape(blocks, -1)
    return out.reshape(-1).astype(dtype)
