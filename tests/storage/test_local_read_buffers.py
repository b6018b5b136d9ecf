"""Large local reads go into the buffers ``_buffers.reusable`` keeps: a buffer is read into again
once nothing views what was read into it before, never while a result still views it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lance_table import _buffers
from lance_table.storage.sources import LocalFileSource


@pytest.fixture
def big_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalFileSource, bytes]:
    monkeypatch.setattr(_buffers, "_KEPT", [])
    data = np.random.default_rng(3).integers(0, 256, 6 * _buffers.REUSED_BYTES, dtype=np.uint8).tobytes()
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    return LocalFileSource(path), data


def _owner(view: memoryview) -> int:
    """The id of the kept buffer ``view`` (of a read's result) lies in, or -1."""
    address = np.frombuffer(view, np.uint8).ctypes.data
    for buf in _buffers._KEPT:
        if buf.ctypes.data <= address < buf.ctypes.data + buf.size:
            return id(buf)
    return -1


def test_a_large_local_read_reuses_a_released_buffer(big_file: tuple[LocalFileSource, bytes]) -> None:
    source, data = big_file
    n = 2 * _buffers.REUSED_BYTES

    def ranges(at: int) -> list[tuple[int, int]]:
        return [(at, n // 2), (at + n // 2 + 90, n // 2)]  # merged into one read of one buffer

    first = source.read_ranges(ranges(10))
    owner = _owner(first[0])
    assert owner != -1
    assert [bytes(v) for v in first] == [data[a : a + k] for a, k in ranges(10)]
    held = source.read_ranges(ranges(n))
    assert _owner(held[0]) not in (-1, owner)  # the first read's results still view its buffer
    assert bytes(first[0]) == data[10 : 10 + n // 2]  # and it was not overwritten
    del first
    again = source.read_ranges(ranges(7))
    assert _owner(again[0]) == owner
    assert [bytes(v) for v in again] == [data[a : a + k] for a, k in ranges(7)]
    assert [bytes(v) for v in held] == [data[a : a + k] for a, k in ranges(n)]


def test_reads_beyond_the_kept_bytes_still_read_right(
    big_file: tuple[LocalFileSource, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, data = big_file
    monkeypatch.setattr(_buffers, "REUSED_LIMIT", 3 * _buffers.REUSED_BYTES)
    n = _buffers.REUSED_BYTES
    got = [source.read_ranges([(k * n, n // 2), (k * n + n // 2 + 1, n // 2 - 1)]) for k in range(5)]
    assert sum(buf.size for buf in _buffers._KEPT) <= _buffers.REUSED_LIMIT
    for k, views in enumerate(got):
        assert bytes(views[0]) == data[k * n : k * n + n // 2]
        assert bytes(views[1]) == data[k * n + n // 2 + 1 : (k + 1) * n]
