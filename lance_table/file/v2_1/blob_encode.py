"""Blob columns for the Lance 2.1/2.2 writer (the ``blob_layout`` pylance writes for binary
fields with ``lance-encoding:blob`` metadata in a data file).

Every non-empty value is written as soon as it arrives, as its own 64-byte aligned buffer
outside any page; the page then holds one ``(position, size)`` descriptor per row, two u64
packed into a mini-block page of its own that has no levels. An empty value is ``(0, 0)``; a
null is ``(def << 16 | rep, 0)``, the levels folded into the position. The ``blob_layout``
around that inner page names the column's real layers. The reader is ``_blob_levels`` in
:mod:`decode`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.fields import BLOB_DESCRIPTOR
from lance_table.file.v2_1 import repdef
from lance_table.file.v2_1.levels import Shredded
from lance_table.file.v2_1.miniblock_encode import encode_mini_block
from lance_table.file.v2_1.values_encode import compress_values

# Writes one out-of-line buffer and returns its file offset.
BlobSink = Callable[[Any], int]


def write_blobs(piece: Shredded, sink: BlobSink) -> Shredded:
    """``piece`` with its binary values replaced by their descriptors, after writing every valid
    non-empty value through ``sink`` (positions of null rows are filled in per page)."""
    values = piece.values
    n = len(values)
    large = pa.types.is_large_binary(values.type) or pa.types.is_large_string(values.type)
    dtype = np.int64 if large else np.int32
    sizes = np.zeros(n, np.uint64)
    positions = np.zeros(n, np.uint64)
    bufs = values.buffers()
    if n and bufs[1] is not None:
        offs = np.frombuffer(bufs[1], dtype, n + 1, values.offset * np.dtype(dtype).itemsize)
        offs = offs.astype(np.int64)
        live = piece.codes == 0
        sizes = np.where(live, np.diff(offs), 0).astype(np.uint64)
        data = bufs[2]
        # one buffer per blob, as pylance writes them: the loop is per blob, not per byte
        for i in np.flatnonzero(sizes).tolist():
            positions[i] = sink(data.slice(int(offs[i]), int(sizes[i])))
    desc = pa.StructArray.from_arrays(
        [pa.array(positions, pa.uint64()), pa.array(sizes, pa.uint64())], fields=list(BLOB_DESCRIPTOR)
    )
    return Shredded(piece.rows, piece.rep, piece.codes, piece.visible, desc, piece.nulls, piece.empties)


def encode_blob_page(
    piece: Shredded, kinds: list[int], defs: np.ndarray | None, large: bool
) -> tuple[Any, list[bytes]]:
    """The ``blob_layout`` page of the descriptors in ``piece`` (from :func:`write_blobs`)."""
    desc = piece.values
    positions = np.asarray(desc.field(0).to_numpy(zero_copy_only=False), np.uint64)
    sizes = desc.field(1)
    if defs is not None:
        null = piece.codes != 0
        positions = np.where(null, defs.astype(np.uint64) << np.uint64(16), positions)
        desc = pa.StructArray.from_arrays(
            [pa.array(positions, pa.uint64()), sizes], fields=list(BLOB_DESCRIPTOR)
        )
    values = compress_values(desc, "blob descriptors", "none", large)
    inner, buffers = encode_mini_block(values, len(desc), None, None, None, [repdef.ALL_VALID_ITEM], 0, large)
    layout = pb.PageLayout()
    layout.blob_layout.inner_layout.CopyFrom(inner)
    layout.blob_layout.layers.extend(kinds)
    return layout, buffers
