"""Ranges of one length gathered as rows (:func:`byteranges.gather`, :func:`byteranges.runs_of`,
the offset pairs of :func:`batch._chunk_words`): the bytes are those of the ranges joined one by
one, at any alignment, up to the end of the data, and ranges past it are refused."""

from __future__ import annotations

import numpy as np
import pytest

from lance_table.file.v2_1 import batch, byteranges


def _joined(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> bytes:
    return b"".join(data[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist()))


@pytest.mark.parametrize("width", [1, 3, 8, 20, 64, 255, 300])
def test_ranges_of_one_length_are_the_joined_ranges(width: int) -> None:
    rng = np.random.default_rng(width)
    data = rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()
    starts = rng.integers(0, len(data) - width + 1, 40)
    starts[-1] = len(data) - width  # the last range ends with the data
    lengths = np.full(starts.size, width)
    assert bytes(byteranges.gather(data, starts, lengths)) == _joined(data, starts, lengths)
    # and beside them, ranges of other lengths
    lengths[::3] = rng.integers(0, width + 1, lengths[::3].size)
    assert bytes(byteranges.gather(data, starts, lengths)) == _joined(data, starts, lengths)


def test_ranges_past_the_data_are_refused() -> None:
    data = bytes(range(100))
    starts = np.array([0, 10, 20, 30, 40, 50, 60, 90])
    with pytest.raises(IndexError):
        byteranges.gather(data, starts, np.full(starts.size, 20))


def test_runs_of_items() -> None:
    values = np.arange(50, dtype=np.uint32)
    starts = np.array([0, 7, 7, 48])
    assert byteranges.runs_of(values, starts, 2).tolist() == [0, 1, 7, 8, 7, 8, 48, 49]
    assert byteranges.runs_of(values, starts, 0).size == 0
    with pytest.raises(IndexError):
        byteranges.runs_of(values, np.array([49]), 2)
    with pytest.raises(IndexError):
        byteranges.runs_of(values[:1], np.array([0]), 2)


@pytest.mark.parametrize("width", [4, 8])
def test_offset_pairs_at_any_alignment(width: int) -> None:
    rng = np.random.default_rng(width)
    raw = rng.integers(0, 256, 4000, dtype=np.uint8).tobytes()
    dtype = np.uint32 if width == 4 else np.uint64
    for residue in range(width):
        at = np.sort(rng.integers(0, 3000, 30)) // width * width + residue
        n = np.full(at.size, 2)
        got = batch._chunk_words(memoryview(raw), at, n, width)
        want = np.concatenate([np.frombuffer(raw[a : a + 2 * width], dtype) for a in at.tolist()])
        assert got.tolist() == want.tolist()
    # of several lengths, at mixed alignments
    at = np.array([0, 5, 12, 33])
    n = np.array([2, 1, 3, 2])
    got = batch._chunk_words(memoryview(raw), at, n, width)
    want = np.concatenate(
        [np.frombuffer(raw[a : a + k * width], dtype) for a, k in zip(at.tolist(), n.tolist())]
    )
    assert got.tolist() == want.tolist()
