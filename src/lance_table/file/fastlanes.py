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


@functools.lru_cache(maxsize=256)
def _plan(t: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray]:
    """Per field r of a lane: its first word, right shift, and (when it spills into the next word)
    that word and the left shift; plus where each unpacked field goes in the block."""
    dtype = DTYPES[t]
    start = np.arange(t) * w  # bit offset of field r in its lane's stream
    first = start // t
    shift = (start % t).astype(dtype)
    spills = (start % t) + w > t
    second = up = None
    if spills.any():
        second = np.flatnonzero(spills)
        up = (t - start[second] % t).astype(dtype)
    order = np.argsort(_positions(t).ravel())  # block position -> (field, lane) slot
    return first, shift[None, :, None], second, up, order


def unpack(words: np.ndarray, t: int, w: int, blocks: int) -> np.ndarray:
    """Unpack ``blocks`` blocks of W-bit values from T-bit ``words``; returns ``blocks * 1024`` values."""
    dtype = DTYPES[t]
    if blocks == 0:
        return np.zeros(0, dtype)
    if w == 0:
        return np.zeros(blocks * BLOCK, dtype)
    lanes = BLOCK // t
    packed = words[: blocks * w * lanes].reshape(blocks, w, lanes)
    first, shift, second, up, order = _plan(t, w)
    # shifts stay in the T-bit type: bits pushed past the top fall off, as they should
    fields = packed[:, first, :] >> shift
    if second is not None and up is not None:
        fields[:, second, :] |= packed[:, first[second] + 1, :] << up[None, :, None]
    if w < t:
        fields &= dtype((1 << w) - 1)
    return fields.reshape(blocks, BLOCK)[:, order].reshape(-1)
