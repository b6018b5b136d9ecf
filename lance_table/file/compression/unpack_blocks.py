"""FastLanes unpacking of whole blocks, block by block (the layout: :mod:`.bitpacking`).

A group of blocks at a time: each block's first words of its fields gathered in the block's value
order, shifted right, and OR-ed with the next words shifted left. Widths above T / 2 (pylance's
floats: 62 bits of a double in [0, 1), 30 of a float) take a field's next word from the lane's
next field, already gathered 128 values on, and keep their temporaries from call to call (a
reused array is in the cache where a fresh one is not); long runs of narrower widths go to
:mod:`.unpack_fields`.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np

from lance_table._buffers import empty
from lance_table.file.compression import unpack_fields

ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])
DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
BLOCK = 1024
#: blocks unpacked at a time (64K values): a group's temporaries stay in the cache (measured on
#: 512 blocks of 64-bit values at 62 and 48 bits: 32 and 128 blocks 3-20% slower)
GROUP = 64


@functools.lru_cache(maxsize=256)
def field_plan(t: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
    return first, second, shift.astype(dtype), (t - shift).astype(dtype)


@dataclass(frozen=True)
class _UnpackPlan:
    """:func:`field_plan` laid out for unpacking whole blocks: shifts repeated over the lanes, so that
    each shift runs over rows of a block's values rather than over runs of one lane's length."""

    first: np.ndarray
    right: np.ndarray  # (1, 1024)
    #: the fields whose bits run past their first word, and the words and left shifts they take
    cross: np.ndarray
    cross_second: np.ndarray
    cross_left: np.ndarray  # (1, cross * lanes)
    #: every field's next word and left shift (a shift by T for the fields that need none)
    second: np.ndarray
    left: np.ndarray  # (1, 1024)
    #: the rows of ``cross`` in a group of GROUP blocks seen as (blocks * T, lanes) rows
    cross_rows: np.ndarray
    #: per row of the last T / 8 of a block (fields ``8 * hi + 7``), the row of the lane's next
    #: field (``8 * (hi + 1)``, among the first T / 8 rows; the last field: its own row)
    tail_next: np.ndarray


@functools.lru_cache(maxsize=256)
def _unpack_plan(t: int, w: int) -> _UnpackPlan:
    first, second, right, left = field_plan(t, w)
    lanes = BLOCK // t
    cross = np.flatnonzero(right.astype(np.int64) + w > t)
    every_left = np.full(t, t, DTYPES[t])  # numpy shifts an unsigned value by its width to 0
    every_left[cross] = left[cross]
    r = np.arange(t)
    row_of = (r % 8) * (t // 8) + ORDER[r // 8] * 16 // lanes  # field r's row in the block
    last_rows = np.argsort(row_of)[t - t // 8 :]  # the fields of the last rows, in row order
    return _UnpackPlan(
        first=first,
        right=np.repeat(right, lanes)[None, :],
        cross=cross,
        cross_second=second[cross],
        cross_left=np.repeat(left[cross], lanes)[None, :],
        second=second,
        left=np.repeat(every_left, lanes)[None, :],
        cross_rows=(np.arange(GROUP)[:, None] * t + cross[None, :]).reshape(-1),
        tail_next=row_of[np.minimum(last_rows + 1, t - 1)],
    )


@functools.lru_cache(maxsize=8)
def _group_shifts(t: int, w: int, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_unpack_plan`'s right and left shifts repeated over a group of blocks (flat), and the
    left shifts of the last T / 8 rows as ``(group, T / 8, lanes)``: a shift by an
    array of the operand's own shape is one pass, where a broadcast row costs a call per block
    (512 KiB each for a 64-bit type: few are kept)."""
    plan = _unpack_plan(t, w)
    lanes = BLOCK // t
    tail = plan.left.reshape(t, lanes)[t - t // 8 :]
    return (
        np.tile(plan.right.reshape(-1), group),
        np.tile(plan.left.reshape(-1), group),
        np.ascontiguousarray(np.broadcast_to(tail, (group, *tail.shape))),
    )


def unpack(
    words: np.ndarray,
    t: int,
    w: int,
    blocks: int,
    block_at: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Unpack ``blocks`` blocks of W-bit values from T-bit ``words``; returns ``blocks * 1024`` values.

    The blocks lie back to back from the first word, or, given ``block_at``, block ``k`` starts at
    word ``block_at[k]`` (the caller checks that every block lies inside ``words``). ``out`` (a
    contiguous array of ``blocks * 1024`` T-bit values) receives the values, and is returned."""
    dtype = DTYPES[t]
    if out is None:
        out = empty(blocks * BLOCK, dtype)
    if blocks == 0:
        return out
    if w == 0:
        out[...] = 0
        return out
    lanes = BLOCK // t
    packed: np.ndarray | None = None
    if block_at is not None and words.flags.c_contiguous:
        step = int(block_at[1] - block_at[0]) if blocks > 1 else w * lanes
        if step >= w * lanes and (blocks < 3 or bool(np.all(np.diff(block_at) == step))):
            # evenly spaced blocks (the chunks of a page): a strided view, no gather
            size = words.itemsize
            packed = np.ndarray(
                (blocks, w, lanes), dtype, words, int(block_at[0]) * size, (step * size, lanes * size, size)
            )
            block_at = None
    layout = "led" if packed is not None else "back" if block_at is None else "gather"
    if block_at is None:
        if packed is None:
            packed = words[: blocks * w * lanes].reshape(blocks, w, lanes)
    else:  # gathered a group at a time below, while the group is in cache
        packed = np.lib.stride_tricks.sliding_window_view(words, w * lanes)
    if unpack_fields.worth(t, w, blocks, layout):  # long runs: field by field over many blocks
        if block_at is not None:
            packed = packed[block_at].reshape(blocks, w, lanes)
        return unpack_fields.unpack(packed, t, w, out)
    plan = _unpack_plan(t, w)
    grid = out.reshape(blocks, t, lanes)
    few = plan.cross.size * 2 < t  # few fields run on into the next word: only they take bits from it
    if w == t:  # the words are the values, in another order
        for lo in range(0, blocks, GROUP):
            hi = min(lo + GROUP, blocks)
            source = packed[lo:hi] if block_at is None else packed[block_at[lo:hi]].reshape(hi - lo, w, lanes)
            np.take(source, plan.first, axis=1, out=grid[lo:hi], mode="clip")
        return out
    if few:
        _groups(packed, block_at, plan, grid, t, w, None)
        return out
    scratch = _take_scratch(t)
    try:
        _groups(packed, block_at, plan, grid, t, w, scratch)
    finally:
        _give_scratch(t, scratch)
    return out


def _groups(
    packed: np.ndarray,
    block_at: np.ndarray | None,
    plan: _UnpackPlan,
    grid: np.ndarray,
    t: int,
    w: int,
    scratch: tuple[np.ndarray, np.ndarray] | None,
) -> None:
    """Unpack the blocks of ``packed`` into ``grid`` (``(blocks, T, lanes)``) a group at a time;
    ``scratch`` (the temporaries of :func:`_take_scratch`) for widths where most fields run on
    into the next word, None for the others."""
    dtype = DTYPES[t]
    blocks, _, lanes = grid.shape
    mask = dtype((1 << w) - 1)
    few = scratch is None
    if scratch is not None:
        right_all, left_all, tail_left = _group_shifts(t, w, GROUP)
        spill_all, tail_all = scratch
        tail = t // 8
    for lo in range(0, blocks, GROUP):  # a group of blocks at a time, in cache (as in pack)
        hi = min(lo + GROUP, blocks)
        group = grid[lo:hi]
        rows = group.reshape(hi - lo, BLOCK)
        source = packed[lo:hi] if block_at is None else packed[block_at[lo:hi]].reshape(hi - lo, w, lanes)
        np.take(source, plan.first, axis=1, out=group, mode="clip")  # the words are all there
        # Shifts stay in the T-bit type: bits pushed past the top fall off, and a shift by T gives 0.
        if few:
            rows >>= plan.right
            spill = np.take(source, plan.cross_second, axis=1)
            spill_rows = spill.reshape(hi - lo, -1)
            spill_rows <<= plan.cross_left
            # the fields' rows gathered, OR-ed and put back by row (cheaper than ``|=`` through a
            # fancy index on the middle axis)
            lane_rows = group.reshape(-1, lanes)
            at = plan.cross_rows[: (hi - lo) * plan.cross.size]
            if at.size < (hi - lo) * plan.cross.size:  # groups larger than when the plan was made
                at = (np.arange(hi - lo)[:, None] * t + plan.cross[None, :]).reshape(-1)
            fields = np.take(lane_rows, at, axis=0)
            fields |= spill.reshape(-1, lanes)
            lane_rows[at] = fields
        else:
            # Most fields run on into the next word, which is where the lane's next field starts:
            # the first word of the field 128 values on (same ``hi``, next ``lo``), already in
            # the group. Only the last T / 8 rows (``lo`` = 7) take theirs from the first rows.
            # A field that does not run on is shifted by T (to 0), whatever its neighbour holds.
            size = (hi - lo) * BLOCK
            flat = rows.reshape(-1)
            spill = spill_all[:size]
            np.left_shift(flat[128:], left_all[: size - 128], out=spill[: size - 128])
            # the last rows' next fields gathered into a contiguous array, shifted there (numpy's
            # shifts are several times slower through a strided view) and copied into place
            ends = tail_all[: (hi - lo) * tail * lanes].reshape(hi - lo, tail, lanes)
            np.take(group, plan.tail_next, axis=1, out=ends, mode="clip")
            np.left_shift(ends, tail_left[: hi - lo], out=ends)
            spill.reshape(hi - lo, t, lanes)[:, t - tail :] = ends
            np.right_shift(flat, right_all[:size], out=flat)
            flat |= spill
        if w < t:
            rows &= mask


#: the temporaries of :func:`_groups` not in use, per type: at most :data:`_KEPT` of each are kept
_FREE: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
_FREE_LOCK = threading.Lock()
_KEPT = 8


def _take_scratch(t: int) -> tuple[np.ndarray, np.ndarray]:
    """Temporaries for a group of T-bit blocks at a width above T / 2: the next words of the
    group's fields (GROUP blocks) and of its last rows (an eighth of that). Give them back with
    :func:`_give_scratch`."""
    with _FREE_LOCK:
        free = _FREE.get(t)
        while free:
            got = free.pop()
            if got[0].size >= GROUP * BLOCK:
                return got
    dtype = DTYPES[t]
    return empty(GROUP * BLOCK, dtype), empty(GROUP * BLOCK // 8, dtype)


def _give_scratch(t: int, scratch: tuple[np.ndarray, np.ndarray]) -> None:
    with _FREE_LOCK:
        free = _FREE.setdefault(t, [])
        if len(free) < _KEPT:
            free.append(scratch)
