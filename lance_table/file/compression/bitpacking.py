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

from lance_table.file.compression import pack_few
from lance_table.file.compression.unpack_blocks import BLOCK, DTYPES, ORDER, field_plan
from lance_table.file.compression.unpack_blocks import unpack as unpack

#: blocks packed at a time (64K values): a group's temporaries stay in the cache (measured on 1M
#: 64-bit values: 15-25% less time than 256 blocks at a time)
PACK_GROUP = 64


@functools.lru_cache(maxsize=256)
def _pick_plan(t: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per position of a block (0..1023): the word its value starts in and the next word (both
    counted from the block's first word), and their right and left shifts."""
    first, second, right, left = field_plan(t, w)
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
