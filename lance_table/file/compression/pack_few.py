"""FastLanes packing of one short block (a small page's levels or dictionary indices) by bit places.

:func:`bitpacking.pack` shifts and ORs a (T, lanes) grid of the block's fields: about ten numpy
calls whatever the count of values, 40 us for the 150 values of a small page. Here each bit of
a value goes straight to its place in the packed words: the values' bits (``unpackbits``) are
scattered into a zeroed bit array of the block's W * 1024 bits at places computed once per
(T, W), then packed (``packbits``). The work grows with the values, not the block, so it pays
below :data:`FEW_VALUES` values (measured: 150 to 250 values at 1 or 2 bits, 41 -> 17 us).
"""

from __future__ import annotations

import functools

import numpy as np

#: blocks of at most this many values are packed here (1,024 values at 2 bits: 37 against 35 us)
FEW_VALUES = 512
#: and at most this many bits a value: the bit places of a width take 8 KiB a bit
FEW_BITS = 16
_BLOCK = 1024
_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])


@functools.lru_cache(maxsize=32)
def _bit_places(t: int, w: int) -> np.ndarray:
    """For each of a block's 1024 positions, the places (among the packed words' W * 1024 bits,
    little-endian words) of its value's low ``w`` bits: a (1024, W) array.

    Field ``r`` of lane ``l`` is the value at ``ORDER[r // 8] * 16 + (r % 8) * 128 + l``; its
    bits are bits ``r * W`` to ``r * W + W - 1`` of the lane's stream, whose bit ``s`` is bit
    ``s % T`` of the packed word ``(s // T) * lanes + l``.
    """
    lanes = _BLOCK // t
    r = np.arange(t)
    first = _ORDER[r // 8] * 16 + (r % 8) * 128  # the position of field r of lane 0
    field = np.empty(_BLOCK, np.int64)
    field[(first[:, None] + np.arange(lanes)[None, :]).reshape(-1)] = np.repeat(r, lanes)
    lane = np.arange(_BLOCK) % lanes
    stream = field[:, None] * w + np.arange(w)[None, :]
    places = ((stream // t) * lanes + lane[:, None]) * t + stream % t
    places.flags.writeable = False
    return places.astype(np.intp, copy=False)


def pack_few(values: np.ndarray, w: int) -> np.ndarray:
    """:func:`bitpacking.pack` of at most 1024 unsigned values (of an 8/16/32/64-bit type,
    native byte order) at ``w`` bits, 1 to 64: the block's W * 1024 / T words. Bits of a value
    above ``w`` are dropped."""
    t = values.dtype.itemsize * 8
    n = values.size
    bits = np.unpackbits(np.ascontiguousarray(values).view(np.uint8), bitorder="little")
    placed = np.zeros(w * _BLOCK, np.uint8)
    placed[_bit_places(t, w)[:n]] = bits.reshape(n, t)[:, :w]
    return np.packbits(placed, bitorder="little").view(values.dtype)
