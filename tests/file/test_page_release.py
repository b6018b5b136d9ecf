"""Arrow's allocator is asked to give freed memory back once a thread has decoded
``pageio.RELEASE_BYTES`` of pages since it last did, not after every large page: a release costs
about a millisecond and makes the next page's buffers fault in afresh."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PylanceFileReader
from lance.file import LanceFileWriter as PylanceFileWriter

from lance_table.file import pageio
from lance_table.file.reader import LanceFileReader


class _CountingPool:
    def __init__(self) -> None:
        self.releases = 0

    def release_unused(self) -> None:
        self.releases += 1


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> _CountingPool:
    """Arrow's pool as pageio sees it, counting releases (pageio uses pyarrow for nothing else)."""
    counting = _CountingPool()
    monkeypatch.setattr(pageio, "pa", SimpleNamespace(default_memory_pool=lambda: counting))
    monkeypatch.setattr(pageio, "_DECODED", threading.local())  # (nothing decoded yet)
    return counting


def test_release_after_bytes_decoded_not_every_page(
    tmp_path: Path, pool: _CountingPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ten files of one 1.6 MB page of float64 each, written by pylance
    paths = []
    for i in range(10):
        path = tmp_path / f"{i}.lance"
        with PylanceFileWriter(str(path), version="2.2") as writer:
            writer.write_batch(pa.table({"x": np.random.default_rng(i).random(200_000)}))
        paths.append(path)
    monkeypatch.setattr(pageio, "RELEASE_BYTES", 4 << 20)
    for path in paths:
        got = LanceFileReader(str(path)).read_all()
        assert got.equals(PylanceFileReader(str(path)).read_all().to_table())
    # 16 MB of pages read by this thread: a release per 4 MiB of them, not one per page
    assert 2 <= pool.releases <= 4
