"""FastLanes unpacking of many blocks a field at a time (the layout: :mod:`.bitpacking`).

:func:`.bitpacking.unpack` works block by block: each step runs over whole blocks, but its word
gather copies rows of one lane group (16 values of a 64-bit type), and its shifts differ from row
to row. Here the words of a group of blocks are first laid out word by word (word ``k`` of every
block and lane in one row), in units of C bits, the narrowest of 16, 32 or T bits that holds W;
then the fields that share a shift (fields ``j, j + P, j + 2P, ...`` for ``P = C / gcd(W, C)``)
are one right shift by a constant over every block at once, and those that run on into the next
unit one left shift and an OR more. The fields come out field by field; one strided copy puts
them where the block order wants them (and widens them to T bits).

That is fewer, longer numpy calls per value, at the price of two transposing copies and a
temporary as large as the output. A/B against the block-by-block kernel on 512-block runs (led by
a width word each, as in pylance's mini-block chunks): 8- and 16-bit types 0.5-0.8 of the time,
32-bit ones 0.85-1.0, 64-bit ones packed at up to 32 bits 0.75-0.9; wider than T / 2 bits
(32- and 64-bit types), the block kernel is faster.
:func:`worth` tells when it pays.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from lance_table._buffers import empty

BLOCK = 1024
#: blocks unpacked at a time: each call covers a group's blocks. Its temporaries are up to 2 times
#: the group's output (8 MiB for a 64-bit type); 1024 blocks were a little faster, 256 slower, and
#: bench_memory's peak RSS of a 2M-row scan stayed 10 MiB above main's at 512, 26 MiB at 1024
GROUP = 512
#: the narrowest unit the fields are worked out in: narrower ones move fewer bytes, but cost
#: a transposing copy of small elements first
NARROWEST = 16


#: per layout of the blocks (back to back, led by a word each, gathered), the widest W of a 32-
#: and of a 64-bit type unpacked here (measured A/B on 1024-block runs: above it, the block kernel
#: is as fast or faster; above T / 2 bits it takes each field's next word from the next field
#: it already gathered, and is 0.6-0.9 of the time here)
_WIDEST = {"back": (16, 32), "led": (16, 32), "gather": (10, 32)}


def worth(t: int, w: int, blocks: int, layout: str) -> bool:
    """Whether :func:`unpack` beats the block-by-block kernel on ``blocks`` blocks of T-bit values
    packed at W bits, laid out as ``layout`` (``"back"``: back to back, ``"led"``: each led by a
    width word, ``"gather"``: here and there). Its calls are fewer per value but each costs the
    same, so short runs lose (8- and 16-bit types win from 128 blocks, 32- and 64-bit ones from
    192); widths that divide the type from 16 bits on have no field running on into the next
    word, which the block kernel does best."""
    if w >= t or (w >= 16 and t % w == 0):
        return False
    if blocks < (128 if t <= 16 else 192):
        return False
    return t <= 16 or w <= _WIDEST[layout][t == 64]


@functools.lru_cache(maxsize=256)
def _classes(t: int, c: int, w: int) -> tuple[tuple[tuple[int, int, bool], ...], int, int]:
    """The T fields of a lane, its bit stream read as C-bit units, grouped by shift: per class
    ``j`` (of ``P = C / gcd(W, C)``), the unit its first field starts in, the shift, and whether
    its fields run on into the next unit; the class size ``g = T / P`` and the step between the
    units of consecutive fields of a class."""
    period = c // math.gcd(w, c)
    classes = tuple((j * w // c, j * w % c, j * w % c + w > c) for j in range(period))
    return classes, t // period, w * period // c


def unpack(packed: np.ndarray, t: int, w: int, out: np.ndarray) -> np.ndarray:
    """Unpack the blocks of ``packed`` (a view of shape ``(blocks, W, 1024 / T)``: each block's
    words) into ``out`` (``blocks * 1024`` contiguous T-bit values), and return ``out``.

    The fields are worked out in the narrowest unsigned type of at least W bits (C bits: a 64-bit
    word is two 32-bit units of its lane's bit stream, low one first), which halves the bytes each
    step moves for a 64-bit type packed at 32 bits or less. Field ``r = 8 * hi + lo`` of lane
    ``l`` lands at row ``lo * T / 8 + reverse(hi)`` (``hi``'s ``log2(T / 8)`` bits reversed: that
    is what ``ORDER`` does), so the fields laid out as ``(hi bits..., lo, block, lane)`` are the
    blocks with their axes transposed."""
    lanes = packed.shape[2]
    for lo, hi, by_field in _field_groups(packed, t, w):
        _to_blocks(by_field, t, out[lo * BLOCK : hi * BLOCK].reshape(hi - lo, BLOCK // lanes, lanes))
    return out


def unit_bits(t: int, w: int) -> int:
    """C: the bits of the unsigned units that :func:`unpack` works the fields of T-bit values
    packed at W bits out in."""
    return next(b for b in (8, 16, 32, 64) if b >= w and b >= min(t, NARROWEST))


def _to_blocks(by_field: np.ndarray, t: int, rows: np.ndarray) -> None:
    """Copy fields laid out as ``(T, blocks, lanes)`` into ``rows`` (``(blocks, T, lanes)``, in
    block order; any type the fields' values fit)."""
    _, n, lanes = by_field.shape
    bits = (t // 8).bit_length() - 1  # of hi
    order = (bits + 1, bits, *range(bits - 1, -1, -1), bits + 2)
    target = rows.reshape((n, 8, *(2,) * bits, lanes))
    np.copyto(target, by_field.reshape((2,) * bits + (8, n, lanes)).transpose(order))


def _field_groups(packed: np.ndarray, t: int, w: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """The fields of the blocks of ``packed`` (as :func:`unpack` takes it), a group of at most
    GROUP blocks at a time: blocks ``[lo, hi)`` and their fields as C-bit values laid out as
    ``(T, hi - lo, lanes)`` (field, block, lane). The array is reused by the next group."""
    blocks, _, lanes = packed.shape
    c = unit_bits(t, w)
    units = t // c  # C-bit units per word
    dtype = np.dtype(f"<u{c // 8}")
    classes, g, step = _classes(t, c, w)
    period = len(classes)
    mask = dtype.type((1 << w) - 1)
    size = min(GROUP, blocks)
    count = w * units  # units per lane
    words = empty((count + 1) * size * lanes, dtype).reshape(count + 1, size, lanes)
    fields = empty(t * size * lanes, dtype).reshape(t, size, lanes)
    spill = np.empty((g, size, lanes), dtype)
    for lo in range(0, blocks, size):
        hi = min(lo + size, blocks)
        n = hi - lo
        by_unit, by_field, extra = words[:, :n], fields[:, :n], spill[:, :n]
        source = packed[lo:hi]
        if units > 1:  # (n, W, lanes, units) -> (W, units, n, lanes): unit u of word k is unit k * units + u
            source = source.view(dtype).reshape(n, w, lanes, units).transpose(1, 3, 0, 2)
            np.copyto(by_unit[:count].reshape(w, units, n, lanes), source)
        else:
            np.copyto(by_unit[:count], source.transpose(1, 0, 2))
        by_unit[count] = 0  # (never read as a field's next unit: every such unit exists)
        for j, (first, shift, runs_on) in enumerate(classes):
            # the class's g fields start in units first, first + step, ...: a strided view
            target = by_field[j::period]
            np.right_shift(by_unit[first : first + (g - 1) * step + 1 : step], dtype.type(shift), out=target)
            if runs_on:
                nxt = by_unit[first + 1 : first + (g - 1) * step + 2 : step]
                np.left_shift(nxt, dtype.type(c - shift), out=extra)
                target |= extra
        if w < c:
            by_field &= mask
        yield lo, hi, by_field


def match(packed: np.ndarray, t: int, w: int, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    """The positions (sorted, counted from the first block's first value) of the values of the
    blocks of ``packed`` (as :func:`unpack` takes it) that lie in one of ``ranges`` (closed
    intervals, ``0 <= low <= high < 2 ** W``), without laying the values out in block order: each
    group's fields are compared where they are, and only the answers (a byte each) are put in
    order, and only for a group with a match."""
    lanes = packed.shape[2]
    c = unit_bits(t, w)
    kind = np.dtype(f"<u{c // 8}").type
    size = min(GROUP, packed.shape[0])
    hits = np.empty(t * size * lanes, bool)
    part = np.empty(t * size * lanes, bool) if len(ranges) > 1 else hits
    ordered = np.empty(size * BLOCK, bool)
    found = []
    for lo, hi, by_field in _field_groups(packed, t, w):
        n = hi - lo
        flags = hits[: t * n * lanes].reshape(t, n, lanes)
        for k, (low, high) in enumerate(ranges):
            out = flags if k == 0 else part[: t * n * lanes].reshape(t, n, lanes)
            if low == high:
                np.equal(by_field, kind(low), out=out)
            elif k == len(ranges) - 1:  # v - low wraps past high - low when v < low: one compare
                np.subtract(by_field, kind(low), out=by_field)
                np.less_equal(by_field, kind(high - low), out=out)
            else:
                np.greater_equal(by_field, kind(low), out=out)
                out &= by_field <= kind(high)
            if k:
                flags |= out
        if not flags.any():
            continue
        rows = ordered[: n * BLOCK]
        _to_blocks(flags, t, rows.reshape(n, BLOCK // lanes, lanes))
        found.append(np.flatnonzero(rows) + lo * BLOCK)
    if not found:
        return np.zeros(0, np.int64)
    return np.concatenate(found) if len(found) > 1 else found[0]
