"""FastLanes bit-unpacking (the "1024-value transposed" layout of Lance 2.1+ bitpacking), in numpy.

A block holds 1024 values of an unsigned T-bit type packed at W bits, as W * (1024 / T) words of
T bits. Lane ``l`` (of ``1024 / T``) is a bit stream made of words ``packed[k * lanes + l]``; its
``r``-th W-bit field is the value at position ``ORDER[r // 8] * 16 + (r % 8) * 128 + l``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from lance_table._buffers import empty
from lance_table.file.compression import pack_few, unpack_fields

ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])
DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
BLOCK = 1024
#: blocks packed or unpacked at a time (64K values): a group's temporaries stay in the cache
#: (measured on 1M 64-bit values: 15-25% less time than 256 blocks at a time)
PACK_GROUP = 64


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
    return first, second, shift.astype(dtype), (t - shift).astype(dtype)


@dataclass(frozen=True)
class _UnpackPlan:
    """:func:`_plan` laid out for unpacking whole blocks: shifts repeated over the lanes, so that
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
    #: the rows of ``cross`` in a group of PACK_GROUP blocks seen as (blocks * T, lanes) rows
    cross_rows: np.ndarray
    #: per row of the last T / 8 of a block (fields ``8 * hi + 7``), the row of the lane's next
    #: field (``8 * (hi + 1)``, among the first T / 8 rows; the last field: its own row)
    tail_next: np.ndarray


@functools.lru_cache(maxsize=256)
def _unpack_plan(t: int, w: int) -> _UnpackPlan:
    first, second, right, left = _plan(t, w)
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
        cross_rows=(np.arange(PACK_GROUP)[:, None] * t + cross[None, :]).reshape(-1),
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
    mask = dtype((1 << w) - 1)
    few = plan.cross.size * 2 < t  # few fields run on into the next word: only they take bits from it
    if not few:
        right_all, left_all, tail_left = _group_shifts(t, w, PACK_GROUP)
        spill_all = empty(min(blocks, PACK_GROUP) * BLOCK, dtype)
        tail = t // 8
    for lo in range(0, blocks, PACK_GROUP):  # a group of blocks at a time, in cache (as in pack)
        hi = min(lo + PACK_GROUP, blocks)
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
            np.left_shift(
                group[:, plan.tail_next],
                tail_left[: hi - lo],
                out=spill.reshape(hi - lo, t, lanes)[:, t - tail :],
            )
            np.right_shift(flat, right_all[:size], out=flat)
            flat |= spill
        if w < t:
            rows &= mask
    return out


@functools.lru_cache(maxsize=256)
def _pick_plan(t: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per position of a block (0..1023): the word its value starts in and the next word (both
    counted from the block's first word), and their right and left shifts."""
    first, second, right, left = _plan(t, w)
    lanes = BLOCK // t
    p = np.arange(BLOCK)
    field, lane = p // lanes, p % lanes
    return first[field] * lanes + lane, second[field] * lanes + lane, right[field], left[field]


def pick(words: np.ndarray, t: int, w: int, block_at: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Single values of W-bit blocks without unpacking the blocks: value ``positions[k]`` (0..1023)
    of the block whose words start at ``block_at[k]`` in ``words``.

    The caller checks that every block lies inside ``words``."""
    dtype = DTYPES[t]
    if w == 0 or not positions.size:
        return np.zeros(positions.size, dtype)
    i1, i2, right, left = _pick_plan(t, w)
    out = words[block_at + i1[positions]] >> right[positions]
    out |= words[block_at + i2[positions]] << left[positions]
    if w < t:
        out &= dtype((1 << w) - 1)
    return out


#: :func:`unpack_head` gathers values one by one: below this many values of a block it beats
#: unpacking the whole block (measured: 100 values 4 us, a block 10 us)
HEAD_VALUES = 512


def unpack_head(words: np.ndarray, t: int, w: int, count: int) -> np.ndarray:
    """The first ``count`` values of the one W-bit block at the start of ``words`` (what
    ``unpack(words, t, w, 1)[:count]`` gives), gathering only those values: the block of a small
    page holds a hundred values, not 1024. The caller checks that the block lies inside ``words``."""
    dtype = DTYPES[t]
    if w == 0 or count <= 0:
        return np.zeros(max(count, 0), dtype)
    i1, i2, right, left = _pick_plan(t, w)
    out = words[i1[:count]] >> right[:count]
    out |= words[i2[:count]] << left[:count]
    if w < t:
        out &= dtype((1 << w) - 1)
    return out


# --- packing ---------------------------------------------------------------------------------------


def as_unsigned(values: np.ndarray) -> np.ndarray:
    """The values as the unsigned integers of their width, bit for bit (a view, no copy).

    This is how Lance bitpacks signed integers and floats: their bit patterns are packed as they
    are, so a negative integer or a float has a wide bit width (no zigzag, no frame of reference).

    Raises:
        ValueError: the values are not 1, 2, 4 or 8 bytes wide.
    """
    values = np.ascontiguousarray(values)
    dtype = DTYPES.get(values.dtype.itemsize * 8)
    if dtype is None or values.dtype.kind not in "uifb":
        raise ValueError(f"cannot bitpack values of type {values.dtype}")
    return values.view(dtype)


def _blocks(values: np.ndarray) -> np.ndarray:
    """The values as rows of 1024, the last one padded with zeros."""
    n = values.size
    if n % BLOCK == 0:
        return values.reshape(-1, BLOCK)
    padded = np.zeros(-(-n // BLOCK) * BLOCK, values.dtype)
    padded[:n] = values
    return padded.reshape(-1, BLOCK)


def bit_lengths(ors: np.ndarray, t: int) -> np.ndarray:
    """The bit length of each value (0 for 0), for unsigned T-bit values (int64)."""
    if ors.size <= _FEW_LENGTHS:  # a small page's few blocks: Python's int.bit_length
        return np.array([int(x).bit_length() for x in ors.tolist()], np.int64)
    dtype = DTYPES[t]
    return (ors[:, None] >> np.arange(t, dtype=dtype)[None, :] != 0).sum(axis=1).astype(np.int64, copy=False)


#: :func:`bit_lengths` of at most this many values are counted in Python (numpy's shift-and-count
#: over a (values, T) grid costs more than a few calls of ``int.bit_length``)
_FEW_LENGTHS = 16


def block_bit_widths(values: np.ndarray) -> np.ndarray:
    """The smallest bit width of each 1024-value block (the last may be short): the bit length of
    the OR of its values, as pylance computes it. Signed and float values count as their bit
    patterns (see :func:`as_unsigned`)."""
    values = as_unsigned(values)
    t = values.dtype.itemsize * 8
    if not values.size:
        return np.zeros(0, np.int64)
    return bit_lengths(np.bitwise_or.reduce(_blocks(values), axis=1), t).astype(np.int64)


def bit_width(values: np.ndarray) -> int:
    """The smallest bit width that holds every value (0 when all are 0 or there are none): the
    widest of :func:`block_bit_widths`, found as the bit length of the OR of every value."""
    values = as_unsigned(values)
    return int(np.bitwise_or.reduce(values)).bit_length() if values.size else 0


@dataclass(frozen=True)
class _PackPlan:
    """How a T-bit type is packed at W bits, on a block laid out as a (T + 1, lanes) grid: row r
    holds field r of every lane, and row T is zeros."""

    rows: np.ndarray  # per field r, the row of ``lanes`` values of the block that it is
    left: np.ndarray  # (1, (T + 1) * lanes): each grid value's left shift within its word
    #: for each word, its j-th field's row, for j = 0, 1, ...; row T once the word has no more
    steps: tuple[np.ndarray, ...]
    #: the first field of each word (the fields of word k are ``firsts[k]`` up to ``firsts[k + 1]``)
    firsts: np.ndarray
    #: the fields that spill into the next word, their right shifts and the word they spill into
    spills: np.ndarray
    right: np.ndarray  # (1, spills * lanes)
    spill_words: np.ndarray


@functools.lru_cache(maxsize=256)
def _pack_plan(t: int, w: int) -> _PackPlan:
    dtype = DTYPES[t]
    lanes = BLOCK // t
    r = np.arange(t)
    shift = r * w % t
    first_rows = -(-np.arange(w) * t // w)  # the first field of word k: smallest r with r * w // t == k
    per_word = np.diff(np.append(first_rows, t))
    spills = np.flatnonzero(shift + w > t)
    return _PackPlan(
        rows=(ORDER[r // 8] * 16 + (r % 8) * 128) // lanes,
        left=np.repeat(np.append(shift, 0).astype(dtype), lanes)[None, :],
        steps=tuple(np.where(j < per_word, first_rows + j, t) for j in range(int(per_word.max()))),
        firsts=first_rows.astype(np.intp),
        spills=spills,
        right=np.repeat((t - shift[spills]).astype(dtype), lanes)[None, :],
        spill_words=spills * w // t + 1,
    )


def pack(values: np.ndarray, w: int) -> np.ndarray:
    """FastLanes-pack unsigned values at ``w`` bits: the inverse of :func:`unpack`.

    Returns ``ceil(n / 1024) * w * 1024 / T`` words of the values' type (T bits); the last block
    is padded with zeros. Bits of a value above ``w`` are dropped.

    Raises:
        ValueError: the values are not unsigned 8/16/32/64-bit integers, or ``w`` is not in 0..T.
    """
    values = np.ascontiguousarray(values)
    t = values.dtype.itemsize * 8
    if values.dtype.kind != "u" or t not in DTYPES:
        raise ValueError(f"FastLanes packs unsigned 8/16/32/64-bit integers, not {values.dtype}")
    if not 0 <= w <= t:
        raise ValueError(f"bit width {w} is not between 0 and {t}")
    dtype = DTYPES[t]
    if w == 0 or not values.size:
        return np.zeros(0, dtype)
    if values.size <= pack_few.FEW_VALUES and w <= pack_few.FEW_BITS:  # a small page's one block
        return pack_few.pack_few(values.astype(dtype, copy=False), w)
    lanes = BLOCK // t
    blocks = _blocks(values).reshape(-1, t, lanes)
    n = blocks.shape[0]
    plan = _pack_plan(t, w)
    if w == t:
        return np.take(blocks, plan.rows, axis=1).reshape(-1)
    out = np.empty((n, w, lanes), dtype)
    # A group of blocks at a time, through one grid that stays in cache: on big inputs this is
    # several times faster than working on whole-input temporaries.
    grid = np.empty((min(n, PACK_GROUP), t + 1, lanes), dtype)
    grid[:, t] = 0
    mask = dtype((1 << w) - 1)
    for lo in range(0, n, PACK_GROUP):
        hi = min(lo + PACK_GROUP, n)
        g = grid[: hi - lo]
        np.take(blocks[lo:hi], plan.rows, axis=1, out=g[:, :t], mode="clip")  # rows all in range
        flat = g.reshape(hi - lo, -1)
        flat &= mask
        spill = np.take(g, plan.spills, axis=1)
        # Shifts stay in the T-bit type, so bits pushed past the top fall off.
        flat <<= plan.left
        words = out[lo:hi]
        if hi - lo <= _REDUCE_BLOCKS and len(plan.steps) >= _REDUCE_STEPS:  # one call for every word
            np.bitwise_or.reduceat(g[:, :t], plan.firsts, axis=1, out=words)
        else:
            np.take(g, plan.steps[0], axis=1, out=words, mode="clip")
            for rows in plan.steps[1:]:
                words |= np.take(g, rows, axis=1)
        if plan.spills.size:
            spill_flat = spill.reshape(hi - lo, -1)
            spill_flat >>= plan.right
            words[:, plan.spill_words, :] |= spill
    return out.reshape(-1)


#: :func:`pack` ORs each word's fields together by one ``reduceat`` for groups of at most this many
#: blocks (a small page's one block) when words hold at least :data:`_REDUCE_STEPS` fields (narrow
#: widths: one call where the field-by-field ORs take up to T / W); else field by field, which is
#: faster on more blocks or fewer fields (measured: 1 block of 16-bit levels at width 1, 8 against
#: 25 us; 16 blocks at width 3, 50 against 31)
_REDUCE_BLOCKS = 2
_REDUCE_STEPS = 4


def pack_inline(values: np.ndarray) -> np.ndarray:
    """Lance's inline bitpacking: each 1024-value block (the last zero-padded) is one T-bit word
    holding its bit width W, then its W * 1024 / T packed words. Each block gets its own minimal
    width. Signed and float values are packed as their bit patterns.

    Returns the words (of the values' unsigned type); ``.tobytes()`` is the buffer.
    """
    values = as_unsigned(values)
    if not values.size:
        return np.zeros(0, values.dtype)
    if values.size <= BLOCK:  # one block (a small page's): its width word, then its words
        t = values.dtype.itemsize * 8
        w = int(np.bitwise_or.reduce(values)).bit_length()
        out = np.empty(1 + w * (BLOCK // t), values.dtype)
        out[0] = w
        if w:
            out[1:] = pack(values, w)
        return out
    return pack_inline_blocks(_blocks(values))[0]


#: :func:`pack_inline_blocks` packs runs of blocks of one width a run at a time below this many
#: runs (no gather of the blocks, no scatter of their words); else a width at a time
_SLICED_RUNS = 64


def pack_inline_blocks(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pack_inline` of unsigned values already in rows of 1024 (one block each): the
    words, and where each block's words start among them."""
    t = blocks.dtype.itemsize * 8
    dtype = DTYPES[t]
    lanes = BLOCK // t
    widths = bit_lengths(np.bitwise_or.reduce(blocks, axis=1), t)
    sizes = 1 + widths * lanes
    starts = np.zeros(widths.size, np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    out = np.empty(int(sizes.sum()), dtype)
    if widths.size and (widths == widths[0]).all():  # one width (typical): rows of 1 + W words
        rows = out.reshape(widths.size, -1)
        rows[:, 0] = widths[0]
        if widths[0]:
            rows[:, 1:] = pack(blocks.reshape(-1), int(widths[0])).reshape(widths.size, -1)
        return out, starts
    out[starts] = widths.astype(dtype)
    bounds = np.flatnonzero(np.diff(widths)) + 1
    if bounds.size < _SLICED_RUNS:  # few runs of one width (sorted or clustered values): each a slice
        for a, b in itertools.pairwise([0, *bounds.tolist(), widths.size]):
            w = int(widths[a])
            if w:
                size = 1 + w * lanes
                rows = out[int(starts[a]) : int(starts[a]) + (b - a) * size].reshape(b - a, size)
                rows[:, 1:] = pack(blocks[a:b].reshape(-1), w).reshape(b - a, -1)
        return out, starts
    for w in np.unique(widths):  # one pass per distinct width, at most T + 1
        if not w:
            continue
        chosen = np.flatnonzero(widths == w)
        packed = pack(blocks[chosen].reshape(-1), int(w)).reshape(chosen.size, -1)
        out[(starts[chosen] + 1)[:, None] + np.arange(packed.shape[1])] = packed
    return out, starts


def pack_out_of_line(values: np.ndarray, w: int | None = None) -> np.ndarray:
    """Lance's out-of-line bitpacking: whole blocks at one width ``w`` with no headers.

    ``w`` defaults to the smallest width that holds every value. A short last block is padded and
    packed when that costs fewer bits than it saves, otherwise its values are stored raw (the
    reader tells which from the buffer length), as pylance decides.

    Raises:
        ValueError: a value does not fit in ``w`` bits.
    """
    values = as_unsigned(values)
    t = values.dtype.itemsize * 8
    need = bit_width(values)
    if w is None:
        w = need
    elif need > w:
        raise ValueError(f"values need {need} bits, more than {w}")
    full, tail = divmod(values.size, BLOCK)
    head = pack(values[: full * BLOCK], w)
    if not tail:
        return head
    if w * (BLOCK - tail) < (t - w) * tail:
        return np.concatenate([head, pack(values[full * BLOCK :], w)])
    return np.concatenate([head, values[full * BLOCK :]])
