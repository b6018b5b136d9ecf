"""Full-zip pages for the Lance 2.1/2.2 writer: wide values zipped with their levels.

Each entry is ``[control word][value]``: the control word (1, 2 or 4 bytes, absent when there
are no levels) holds ``rep << bits_def | def``, with just enough bits for the largest level of the
page. A fixed-width value follows every visible entry; a variable-width value is a length prefix
and the bytes, and only valid entries carry one. The second buffer, the repetition index, gives
the byte where each row starts (and the end), in the narrowest of 1, 2, 4 or 8 bytes; pages of
fixed-width values without lists need none. See ``_walk_full_zip`` in :mod:`decode`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.compression.entries import ALONE, join_entries, le_table
from lance_table.file.v2_1.repdef import max_def
from lance_table.file.v2_1.values_encode import PerValue


def _word_bytes(bits: int) -> int:
    if bits == 0:
        return 0
    return 1 if bits <= 8 else 2 if bits <= 16 else 4


def _index_width(largest: int) -> int:
    for width in (1, 2, 4):
        if largest < 1 << (8 * width):
            return width
    return 8


def encode_full_zip(
    pv: PerValue,
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    visible: np.ndarray | None,
    layers: list[int],
    max_rep: int,
) -> tuple[Any, list[Any]]:
    """A full-zip page: its ``PageLayout`` and buffers (zipped entries, repetition index). From
    :data:`entries.ALONE` bytes on, the first buffer comes as a list of pieces (long values are
    views of ``pv.data``, not copies)."""
    entries = int(rep.size if rep is not None else defs.size if defs is not None else 0)
    if rep is None and defs is None:
        entries = int(pv.lengths.size) if pv.lengths is not None else pv.data.size * 8 // int(pv.bits or 1)
    vis = np.ones(entries, bool) if visible is None else visible
    valid = vis if defs is None else vis & (defs == 0)
    bits_rep = int(rep.max()).bit_length() if rep is not None and rep.size else 0
    # Definition bits cover every level the layers allow, not just those present: pylance's
    # reader miscounts a struct's validity when a full-zip page of a nullable layer has none.
    bits_def = int(max(defs.max(), max_def(layers))).bit_length() if defs is not None and defs.size else 0
    cw = _word_bytes(bits_rep + bits_def)
    if pv.lengths is not None:
        prefix = pv.offset_bits // 8
        value_len = np.zeros(entries, np.int64)
        value_len[vis] = pv.lengths
        value_len[~valid] = 0
        head_len = cw + np.where(valid, prefix, 0)
        # drop the bytes of null values (usually there are none)
        data = pv.data
        if int(value_len.sum()) != data.size:
            data = data[np.repeat(valid[vis], pv.lengths)]
    else:
        prefix = 0
        width = int(pv.bits or 0) // 8
        value_len = np.where(vis, width, 0)
        head_len = np.full(entries, cw, np.int64)
        data = pv.data
    # header bytes of each entry, in entry order
    cols = []
    if cw:
        word = np.zeros(entries, np.uint64)
        if rep is not None:
            word |= rep.astype(np.uint64) << np.uint64(bits_def)
        if defs is not None:
            word |= defs.astype(np.uint64)
        cols.append(le_table(word, cw))
    if prefix:
        full_len = np.zeros(entries, np.int64)
        full_len[vis] = pv.lengths if pv.lengths is not None else 0
        cols.append(le_table(full_len, prefix))
    heads = np.hstack(cols) if len(cols) > 1 else cols[0] if cols else np.zeros((entries, 0), np.uint8)
    pieces = join_entries(heads, head_len, data, value_len)
    starts = np.zeros(entries + 1, np.int64)
    np.cumsum(head_len + value_len, out=starts[1:])
    total = int(starts[-1])
    layout = pb.PageLayout()
    fz = layout.full_zip_layout
    fz.bits_rep = bits_rep
    fz.bits_def = bits_def
    if pv.lengths is not None:
        fz.bits_per_offset = pv.offset_bits
    else:
        fz.bits_per_value = int(pv.bits or 0)
    fz.num_items = entries
    fz.num_visible_items = int(vis.sum())
    fz.value_compression.CopyFrom(pv.encoding)
    fz.layers.extend(layers)
    # a long buffer stays in pieces, written one after the other
    buffers: list[Any] = [pieces if total >= ALONE else b"".join(p.data for p in pieces)]
    if rep is not None or pv.lengths is not None:
        row_at = starts[:-1][rep == max_rep] if rep is not None else starts[:-1]
        index = np.append(row_at, total)
        width = _index_width(total)
        buffers.append(index.astype(f"<u{width}").tobytes())
    return layout, buffers
