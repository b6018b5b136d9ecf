"""The content sizes zstd frame headers state (general.zstd_content_sizes), which decide whether
many frames decode in one call: frames of one writer (one descriptor byte) are read by a short
path, which must give what the general reading of each header gives, also on damaged bytes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_table.file.compression import general


def _frames(sizes: list[int], level: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """zstd frames of ``sizes`` bytes each, 3 bytes apart, in one buffer: the buffer (with some
    slack), where each frame starts and its size."""
    rng = np.random.default_rng(seed)
    codec = pa.Codec("zstd", compression_level=level)
    frames = [
        b"\0\1\2" + codec.compress(rng.integers(0, 4, n, dtype=np.uint8).tobytes(), asbytes=True)
        for n in sizes
    ]
    lengths = np.array([len(f) for f in frames], np.int64)
    at = np.concatenate([[0], np.cumsum(lengths)[:-1]]) + 3
    return np.frombuffer(b"".join(frames) + bytes(32), np.uint8), at, lengths - 3


def _each(
    u8: np.ndarray, at: np.ndarray, size: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> tuple[np.ndarray, np.ndarray]:
    """The sizes read header by header (the short path turned off)."""
    with monkeypatch.context() as m:
        m.setattr(general, "_alike_sizes", lambda *args: None)
        return general.zstd_content_sizes(u8, at, size)


@pytest.mark.parametrize("level", [1, 3, 19])
@pytest.mark.parametrize("base", [0, 7, 250, 300, 70_000])
def test_frames_of_one_writer_state_their_sizes(
    level: int, base: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = [base + k for k in range(12)]
    u8, at, size = _frames(sizes, level, base)
    assert general._alike_sizes(u8, at, size) is not None or len({int(u8[a + 4]) for a in at}) > 1
    stated, known = general.zstd_content_sizes(u8, at, size)
    assert known.all() and stated.tolist() == sizes
    each = _each(u8, at, size, monkeypatch)
    assert (each[0] == stated).all() and (each[1] == known).all()


def test_damaged_headers_read_as_header_by_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """Garbled magic numbers, descriptors and sizes, and frames too short for their headers."""
    u8, at, size = _frames([300 + k for k in range(40)], 3, 1)
    rng = np.random.default_rng(2)
    for trial in range(200):
        bad = u8.copy()
        hit = at[rng.integers(0, at.size, 3)] + rng.integers(0, 12, 3)
        bad[hit] ^= rng.integers(1, 256, 3).astype(np.uint8)
        short = size.copy()
        if trial % 5 == 0:
            short[rng.integers(0, at.size)] = rng.integers(0, 9)
        got = general.zstd_content_sizes(bad, at, short)
        each = _each(bad, at, short, monkeypatch)
        assert (got[1] == each[1]).all(), trial
        assert (got[0][got[1]] == each[0][each[1]]).all(), trial
