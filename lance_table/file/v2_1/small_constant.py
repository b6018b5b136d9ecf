"""Constant pages of many small files decoded at once (part of :mod:`small_many`).

pylance writes a 2.2 page whose rows all hold one value, or are all null, as a constant page: no
chunks, the value inline in the page's description (fixed-width values) or in a buffer of its
own (strings). A table fed by many small appends has such columns everywhere: the id of the
load, its source, an optional field nobody filled. Here the pages of many files become one
array: each file's value repeated over its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.decode import constant_bytes
from lance_table.file.v2_1.values import Fixed, Var, byte_width, to_arrow

#: the forms of a constant page: its value inline, in a buffer of its own, or every row null
INLINE = 1
IN_BUFFER = 2
NULLS = 3


def form(layout: Any, buffers: Sequence[tuple[int, int]]) -> tuple[int, bytes] | None:
    """The form of a constant page (``layout``: its ``ConstantLayout``) without levels, and its
    inline value; None when it has levels (a value on some rows only: read on its own)."""
    in_buffer = not layout.HasField("inline_value") and len(buffers) % 2 == 1
    levels = buffers[1:] if in_buffer else buffers
    if any(size for _, size in levels):
        return None
    if in_buffer:
        return IN_BUFFER, b""
    if layout.HasField("inline_value"):
        return INLINE, bytes(layout.inline_value)
    return NULLS, b""


def decode(
    kind: int,
    values: Sequence[bytes],
    where: Sequence[tuple[int, int]],
    rows: np.ndarray,
    data: memoryview,
    dtype: pa.DataType,
    io: PageIO,
) -> pa.Array | None:
    """The rows of constant pages of one ``kind``, one file after another: ``values`` their
    inline values, ``where`` the place of their value buffers in ``data`` (offset and size),
    ``rows`` their row counts (None where a value does not fit the type)."""
    total = int(rows.sum())
    if kind == NULLS:
        return pa.nulls(total, dtype)
    if kind == INLINE:
        width = byte_width(dtype)
        if not width or pa.types.is_fixed_size_list(dtype) or any(len(v) != width for v in values):
            return None
        each = np.frombuffer(b"".join(values), np.uint8).reshape(-1, width)
        return to_arrow(Fixed(np.repeat(each, rows, axis=0).tobytes(), width * 8), dtype, total, io)
    found = [constant_bytes(data[at : at + size], io) for at, size in where]
    offsets = np.zeros(len(found) + 1, np.int64)
    np.cumsum([len(v) for v in found], out=offsets[1:])
    items = to_arrow(Var(b"".join(found), offsets), dtype, len(found), io)
    return items.take(pa.array(np.repeat(np.arange(len(found)), rows)))
