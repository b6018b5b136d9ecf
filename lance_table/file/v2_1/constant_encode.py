"""Constant pages of the Lance 2.2 writer: a page whose rows all hold one value, as pylance 14 writes it.

pylance stores such a page as a ``constant_layout`` without any chunk: a fixed-width value of at most
32 bytes (booleans as one byte) as the layout's ``inline_value``, a binary or string value in the
page's one buffer (``[u32 2][u32 offset bytes][u32 value bytes]``, the offsets ``0, size`` in the
type's offset width, then the value). This writer takes that form for pages without repetition or
definition levels (no lists, no nulls), which are most constant pages (a load's or a source's id in
each record of an append); pages with levels keep their mini-block form. 2.1 files never have them.

Besides matching pylance's files, a constant page costs a comparison of the values and no search
for their compression (run lengths, dictionary, bitpacking), which a small append's constant
columns would otherwise pay on every page.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.v2_1.value_kinds import byte_values, fixed_bits, variable_parts
from lance_table.schema import is_binary_like

#: the widest fixed-width value pylance keeps inline (wider ones go to a buffer in another form)
MAX_INLINE_BYTES = 32


def constant_page(values: pa.Array, kinds: Sequence[int]) -> tuple[Any, list[bytes]] | None:
    """The layout and buffers of a page of ``values`` (no nulls, no levels: the caller checks)
    under the layers ``kinds`` when every value is the same and has a constant form, else None."""
    t = values.type
    n = len(values)
    if not n or values.null_count or pa.types.is_dictionary(t):
        return None
    if not _constant_type(t):
        return None  # (fixed-size lists, packed structs: pylance keeps their mini-block form)
    if n > 1 and not pa.types.is_floating(t) and not values[0].equals(values[n - 1]):
        return None  # most pages that are not constant, told at once (floats: NaN equals nothing)
    if is_binary_like(t):
        return _binary(values, kinds, n)
    bits = fixed_bits(t)
    if pa.types.is_boolean(t):
        true = values.true_count
        if true not in (0, n):
            return None
        value = b"\x01" if true else b"\x00"
    elif bits is None or bits % 8 or bits // 8 > MAX_INLINE_BYTES:
        return None
    else:
        table = byte_values(values, bits // 8)
        value = table[0].tobytes()
        # the last value first: a page that is not constant mostly fails there, at once
        if n > 1 and (table[-1].tobytes() != value or not bool((table[1:] == table[0]).all())):
            return None
    layout = pb.PageLayout()
    layout.constant_layout.layers.extend(kinds)
    layout.constant_layout.inline_value = value
    return layout, []


def _constant_type(t: pa.DataType) -> bool:
    """The types whose constant pages are written: those pylance was seen to write so."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_temporal(t)
        or pa.types.is_decimal(t)
        or pa.types.is_fixed_size_binary(t)
        or is_binary_like(t)
    )


def _binary(values: pa.Array, kinds: Sequence[int], n: int) -> tuple[Any, list[bytes]] | None:
    offsets, data = variable_parts(values)
    size = int(offsets[1])
    if data.size != size * n or (n > 1 and not bool((offsets[1:] - offsets[:-1] == size).all())):
        return None
    if size and n > 1:
        rows = data.reshape(n, size)
        if rows[-1].tobytes() != rows[0].tobytes() or not bool((rows[1:] == rows[0]).all()):
            return None
    t = values.type
    word = 8 if pa.types.is_large_binary(t) or pa.types.is_large_string(t) else 4
    head = struct.pack("<III", 2, 2 * word, size)
    buffer = head + np.array([0, size], f"<u{word}").tobytes() + data[:size].tobytes()
    layout = pb.PageLayout()
    layout.constant_layout.layers.extend(kinds)
    return layout, [buffer]
