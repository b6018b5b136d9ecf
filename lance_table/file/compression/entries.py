"""Entries laid back to back, each a short head (a control word, a length, a frame header) and
a body taken in order from one buffer: the byte layout of full-zip pages and of values compressed
one by one.

The bytes are placed with numpy a group of entries at a time, so the temporary masks stay small
whatever the size of the whole; a body of :data:`ALONE` bytes or more is not copied at all, but
handed on as a view of its buffer, between its head and the entries that follow.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

# Entries are placed in groups of about this many bytes (the size of the masks a group needs).
GROUP = 1 << 20
# A body at least this long is its own piece: a view of the input, never copied.
ALONE = 1 << 20
# Entries whose bodies average this many bytes are joined one by one (see :func:`_joined`).
_JOIN_AVG = 1024


def le_table(values: np.ndarray, width: int) -> np.ndarray:
    """Little-endian bytes of unsigned integers, ``width`` each, as an ``(n, width)`` table."""
    return np.ascontiguousarray(values.astype("<u8")).view(np.uint8).reshape(-1, 8)[:, :width]


def join_entries(
    heads: np.ndarray, head_len: np.ndarray, body: np.ndarray, body_len: np.ndarray
) -> list[np.ndarray]:
    """The entries ``heads[i, :head_len[i]] + body_i`` back to back, as pieces to write in order
    (their concatenation is the result).

    ``heads`` is an ``(n, width)`` uint8 table, ``body`` the n bodies back to back (``body_len``
    bytes each). The pieces are views of ``body`` for long bodies and small new arrays between.
    """
    n = int(head_len.size)
    body = body.reshape(-1)
    if not n:
        return []
    if not int(head_len.sum()):
        return [body]
    if body.size >= _JOIN_AVG * n and int(body_len.max()) < ALONE:
        return [_joined(heads, head_len, body, body_len)]
    sizes = head_len + body_len
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=starts[1:])
    body_at = np.zeros(n + 1, np.int64)
    np.cumsum(body_len, out=body_at[1:])
    # a group ends where the next entry starts another GROUP of bytes, and around long bodies
    alone = body_len >= ALONE
    cut = np.zeros(n + 1, bool)
    cut[[0, n]] = True
    cut[1:n] = (starts[1:n] // GROUP != starts[: n - 1] // GROUP) | alone[1:] | alone[:-1]
    bounds = np.flatnonzero(cut).tolist()
    pieces: list[np.ndarray] = []
    for a, b in pairwise(bounds):
        if b - a == 1 and alone[a]:
            pieces.append(heads[a, : head_len[a]].copy())
            pieces.append(body[body_at[a] : body_at[a + 1]])
            continue
        pieces.append(
            _place(heads[a:b], head_len[a:b], body[body_at[a] : body_at[b]], starts[a : b + 1] - starts[a])
        )
    return pieces


def _joined(heads: np.ndarray, head_len: np.ndarray, body: np.ndarray, body_len: np.ndarray) -> np.ndarray:
    """The entries joined by ``bytes.join`` from a head and a body view each: for long bodies a
    few list items per entry cost less than :func:`_place`'s masks over every byte."""
    width = heads.shape[1]
    table = np.ascontiguousarray(heads).tobytes()
    view = memoryview(np.ascontiguousarray(body).data).cast("B")
    at = np.zeros(body_len.size + 1, np.int64)
    np.cumsum(body_len, out=at[1:])
    pieces: list[bytes | memoryview] = []
    for i, (h, a, b) in enumerate(zip(head_len.tolist(), at[:-1].tolist(), at[1:].tolist(), strict=True)):
        pieces.append(table[i * width : i * width + h])
        pieces.append(view[a:b])
    return np.frombuffer(b"".join(pieces), np.uint8)


def _place(heads: np.ndarray, head_len: np.ndarray, body: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """A few entries (``starts``: where each begins, from 0, and the end) placed in one array."""
    out = np.empty(int(starts[-1]), np.uint8)
    keep = np.arange(heads.shape[1])[None, :] < head_len[:, None]
    is_head = np.zeros(out.size, bool)
    is_head[_spans(starts[:-1], head_len)] = True
    out[is_head] = heads[keep]
    out[~is_head] = body
    return out


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] + 0 .. lengths[i] - 1`` for all i, concatenated."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    shift = np.repeat(starts - (ends - lengths), lengths)
    return np.arange(total, dtype=np.int64) + shift
