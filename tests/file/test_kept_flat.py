"""The kept rows of mini-block chunks of flat values, copied once (``v2_1.kept_flat``): the rows a
mask marks, of chunks laid out evenly (a 2-D view of them, the last chunk appended) or otherwise
(joined, then selected), with nulls, from any first row; damaged chunks are typed errors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.errors import CorruptFileError
from lance_table.file.pageio import PageIO
from lance_table.file.v2_1 import kept_flat
from lance_table.file.v2_1.chunk_headers import ChunksRead
from lance_table.storage.sources import BytesSource


def _io() -> PageIO:
    return PageIO(BytesSource(b"", name="f.lance"), None, None, (), "column 0 page 0", buffers=())


def _flat(bits: int) -> pb.CompressiveEncoding:
    return pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=bits))


def _fsl(bits: int, per: int) -> pb.CompressiveEncoding:
    return pb.CompressiveEncoding(fixed_size_list=pb.FixedSizeList(items_per_value=per, values=_flat(bits)))


def _chunks(
    rows: np.ndarray, counts: list[int], gaps: list[int], seed: int = 0
) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """``rows`` (a 2-D uint8 array, one row a value) laid out as chunks of ``counts`` values, each
    after a gap of ``gaps[k]`` random bytes (a header); the bytes, each chunk's values' start and size."""
    rng = np.random.default_rng(seed)
    parts, at, sizes, pos, row = [], [], [], 0, 0
    width = rows.shape[1]
    for count, gap in zip(counts, gaps):
        parts.append(rng.integers(0, 256, gap, dtype=np.uint8))
        pos += gap
        at.append(pos)
        body = rows[row : row + count].reshape(-1)
        parts.append(body)
        sizes.append(body.size)
        pos += body.size
        row += count
    parts.append(rng.integers(0, 256, 8, dtype=np.uint8))  # bytes after the last chunk
    assert row == rows.shape[0] and sizes == [c * width for c in counts]
    return memoryview(np.concatenate(parts).tobytes()), np.array(at, np.int64), np.array(sizes, np.int64)


LAYOUTS = {
    "even, last chunk short": ([64] * 9 + [17], [8] * 10),
    "even, last chunk full": ([64] * 5, [16] * 5),
    "one chunk": ([100], [8]),
    "two chunks": ([64, 3], [8, 24]),
    "uneven steps": ([64] * 4 + [10], [8, 16, 8, 8, 8]),
    "uneven counts": ([64, 32, 64, 64], [8] * 4),
}


# how _selected copies: in blocks into a pooled array (small results; blocks of one row, of a
# chunk and a half, of many chunks), or in one numpy selection (results of huge pages)
HOW = {
    "blocks of one row": (1, 1 << 40),
    "blocks of 96 rows": (96, 1 << 40),
    "whole": (1 << 17, 0),
    "default": None,
}


@pytest.mark.parametrize("how", sorted(HOW))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("width", [1, 3, 8, 64])
def test_selected_rows_are_the_marked_rows(layout, width, how, monkeypatch):
    if HOW[how] is not None:
        block_rows, huge = HOW[how]
        monkeypatch.setattr(kept_flat, "BLOCK_BYTES", block_rows * width)
        monkeypatch.setattr(kept_flat, "HUGE_BYTES", huge)
    counts, gaps = LAYOUTS[layout]
    total = sum(counts)
    rng = np.random.default_rng(width)
    rows = rng.integers(0, 256, (total, width), dtype=np.uint8)
    data, at, _ = _chunks(rows, counts, gaps)
    masks = [
        rng.random(total) < 0.9,
        np.zeros(total, bool),
        np.ones(total, bool),
        np.arange(total) >= total - 5,  # rows of the last chunk alone
        np.arange(total) < 3,  # rows of the first chunk alone
        (np.arange(total) < 64) | (np.arange(total) >= 128),  # a whole chunk left out
    ]
    for mask in masks:
        got = kept_flat._selected(data, at, np.array(counts, np.int64), width, mask)
        assert got.dtype == np.dtype(f"V{width}") and got.flags.c_contiguous
        assert got.tobytes() == rows[mask].tobytes()


@pytest.mark.parametrize("start", [0, 5, 63])
def test_kept_vectors_from_a_start_with_nulls(start):
    counts = [64] * 6 + [40]
    total = sum(counts)
    rng = np.random.default_rng(start)
    values = rng.random((total, 4), dtype=np.float32)
    data, at, sizes = _chunks(values.view(np.uint8).reshape(total, 16), counts, [8] * len(counts))
    defs = (rng.random(total) < 0.1).astype(np.uint16)  # 1: null
    read = ChunksRead(data, [at], [sizes], np.array(counts, np.int64), None, defs, np.array(counts))
    n = total - start - 7
    mask = rng.random(n) < 0.8
    keep = pa.array(np.concatenate([[True, False], mask, [False]])).slice(2, n)  # an offset in its bits
    dtype = pa.list_(pa.float32(), 4)
    got = kept_flat.kept(read, _fsl(32, 4), start, keep, dtype, _io())
    rows = np.flatnonzero(mask) + start
    expected = pa.FixedSizeListArray.from_arrays(pa.array(values[rows].reshape(-1)), 4)
    expected = pa.array(
        [None if defs[r] else v for r, v in zip(rows.tolist(), expected.to_pylist())], type=dtype
    )
    assert got.type == dtype and got.equals(expected)
    plain = ChunksRead(data, [at], [sizes], np.array(counts, np.int64), None, None, np.array(counts))
    no_nulls = kept_flat.kept(plain, _fsl(32, 4), start, keep, dtype, _io())
    assert no_nulls.null_count == 0 and no_nulls.values.to_numpy().tobytes() == values[rows].tobytes()


def test_kept_numbers():
    counts = [512] * 3 + [100]
    total = sum(counts)
    values = np.arange(total, dtype=np.int64) * 3
    data, at, sizes = _chunks(values.view(np.uint8).reshape(total, 8), counts, [16] * 4)
    read = ChunksRead(data, [at], [sizes], np.array(counts, np.int64), None, None, np.array(counts))
    mask = values % 7 != 0
    got = kept_flat.kept(read, _flat(64), 0, pa.array(mask), pa.int64(), _io())
    assert got.to_numpy().tolist() == values[mask].tolist()


def test_damaged_chunks_are_corrupt():
    counts = [64, 64, 10]
    total = sum(counts)
    rows = np.zeros((total, 8), np.uint8)
    data, at, sizes = _chunks(rows, counts, [8, 8, 8])
    keep = pa.array(np.ones(total, bool))
    short = ChunksRead(data, [at], [sizes - 8], np.array(counts, np.int64), None, None, np.array(counts))
    with pytest.raises(CorruptFileError, match="shorter than its values"):
        kept_flat.kept(short, _flat(64), 0, keep, pa.int64(), _io())
    past = ChunksRead(
        data, [at + len(data)], [sizes], np.array(counts, np.int64), None, None, np.array(counts)
    )
    with pytest.raises(CorruptFileError, match="shorter than its values"):
        kept_flat.kept(past, _flat(64), 0, keep, pa.int64(), _io())
    read = ChunksRead(data, [at], [sizes], np.array(counts, np.int64), None, None, np.array(counts))
    with pytest.raises(CorruptFileError, match="needed"):
        kept_flat.kept(read, _flat(64), 1, keep, pa.int64(), _io())
    defs = np.zeros(total - 1, np.uint16)
    few = ChunksRead(data, [at], [sizes], np.array(counts, np.int64), None, defs, np.array(counts))
    with pytest.raises(CorruptFileError, match="definition levels"):
        kept_flat.kept(few, _flat(64), 0, keep, pa.int64(), _io())


def test_which_pages_apply():
    def layout(enc: pb.CompressiveEncoding, **kw) -> pb.MiniBlockLayout:
        return pb.MiniBlockLayout(value_compression=enc, num_buffers=1, **kw)

    assert kept_flat.applies(layout(_flat(64)))
    assert kept_flat.applies(layout(_fsl(32, 16)))
    assert kept_flat.applies(layout(_flat(8), def_compression=_flat(16)))
    assert not kept_flat.applies(layout(_flat(1)))  # booleans
    assert not kept_flat.applies(layout(_flat(12)))
    assert not kept_flat.applies(layout(_flat(32), dictionary=_flat(32)))
    assert not kept_flat.applies(layout(_flat(32), rep_compression=_flat(16)))
    bitpacked = pb.CompressiveEncoding(inline_bitpacking=pb.InlineBitpacking(uncompressed_bits_per_value=64))
    assert not kept_flat.applies(layout(bitpacked))
    nested = pb.CompressiveEncoding(fixed_size_list=pb.FixedSizeList(items_per_value=2, values=_fsl(32, 2)))
    assert not kept_flat.applies(layout(nested))
    two = pb.MiniBlockLayout(value_compression=_flat(64), num_buffers=2)
    assert not kept_flat.applies(two)


def test_marks_of_a_sliced_mask():
    mask = np.random.default_rng(1).random(1000) < 0.5
    for lo, n in ((0, 1000), (3, 500), (999, 1), (10, 0)):
        keep = pa.array(mask).slice(lo, n)
        assert kept_flat.marks(keep).tolist() == mask[lo : lo + n].tolist()
