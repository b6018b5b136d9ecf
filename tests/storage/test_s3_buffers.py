"""Large reads from object storage received into buffers handed out again once nothing refers to
them, and a page's equal-width values joined where they were received (no second buffer of the
page's size): the tables read stay intact and equal pylance's."""

from __future__ import annotations

import gc
import sys

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table import _buffers
from lance_table.file.v2_1 import batch, byteranges
from lance_table.table.readers import READERS


def _vectors(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 16, dtype=np.float32)), 16)
    x = pa.array(rng.random(rows), mask=rng.random(rows) < 0.1)  # (levels: joined by a copy)
    return pa.table({"id": np.arange(rows), "vec": vec, "x": x})


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each call of ``join_in_place`` from the decoder joined in place."""
    calls: list[bool] = []
    real = byteranges.join_in_place

    def spy(data, starts, lengths):  # type: ignore[no-untyped-def]
        got = real(data, starts, lengths)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(batch, "join_in_place", spy)
    return calls


@pytest.mark.s3
def test_vectors_joined_where_received_equal_pylance_and_earlier_tables_stay_intact(
    s3_uri: str, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lance_table.storage import remote_sources

    monkeypatch.setattr(remote_sources, "SPLIT_READ_BYTES", 300_000)  # a page read in parts
    monkeypatch.setattr(_buffers, "REUSED_BYTES", 100_000)
    data = _vectors(30_000, 1)
    lance.write_dataset(data, s3_uri, storage_options=s3_options, data_storage_version="2.2")
    calls = _spy(monkeypatch)
    READERS.clear()
    ours = lt.dataset(s3_uri, storage_options=s3_options)
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    expected = theirs.to_table()
    first = ours.to_table()
    assert first.equals(expected) and first.equals(data)
    assert calls and all(calls)  # (the vectors' page: its chunks joined in place)
    # a second read while the first table is held: its buffers are not the first table's
    second = ours.to_table(columns=["vec", "id"])
    assert first.equals(expected) and second.equals(expected.select(["vec", "id"]))
    del first, second
    for _ in range(2):  # buffers handed out again: every table read intact
        again = ours.to_table()
        assert again.equals(expected)
    idx = np.arange(3, 30_000, 997)
    assert ours.take(idx).equals(theirs.take(idx))
    where = "id >= 12000 AND id < 12100"
    assert ours.to_table(filter=where).equals(theirs.to_table(filter=where))
    assert ours._storage._direct.usable


@pytest.mark.s3
def test_a_read_in_parts_holds_no_buffer_once_its_result_is_dropped(
    s3_uri: str, s3_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # (no reference cycle keeps the buffers received into alive until the garbage collector runs)
    from lance_table.storage import open_storage, remote_sources

    monkeypatch.setattr(remote_sources, "SPLIT_READ_BYTES", 100_000)
    monkeypatch.setattr(_buffers, "REUSED_BYTES", 50_000)
    monkeypatch.setattr(_buffers, "_KEPT", [])
    storage = open_storage(s3_uri, s3_options)
    blob = np.random.default_rng(2).integers(0, 256, 1_000_000, dtype=np.uint8).tobytes()
    storage.write("f.bin", blob)
    source = storage.source("f.bin", len(blob))
    gc.disable()
    try:
        for _ in range(3):
            (got,) = source.read_ranges([(1000, 900_000)])
            assert bytes(got) == blob[1000:901_000]
            del got
            assert _buffers._KEPT and all(sys.getrefcount(buf) == _buffers._UNHELD for buf in _buffers._KEPT)
    finally:
        gc.enable()
    assert len(_buffers._KEPT) == 1  # (one buffer, handed out again each time)


def test_local_pages_are_never_joined_in_place(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # a file map or bytes the reader holds are no page's own: their values are copied out
    data = _vectors(30_000, 3)
    uri = str(tmp_path / "d")
    lance.write_dataset(data, uri, data_storage_version="2.2")
    calls = _spy(monkeypatch)
    ours = lt.dataset(uri)
    for _ in range(2):
        assert ours.to_table().equals(lance.dataset(uri).to_table())
    assert calls == []


@pytest.mark.parametrize("last", [0, 1, 500, 700])
@pytest.mark.parametrize(("step", "length"), [(700, 700), (712, 700), (4104, 4096)])
def test_join_in_place_equals_join(step: int, length: int, last: int) -> None:
    n = 600
    rng = np.random.default_rng(step + last)
    starts = np.arange(n, dtype=np.int64) * step + 9
    lengths = np.full(n, length, np.int64)
    lengths[-1] = last
    data = rng.integers(0, 256, int(starts[-1]) + step + 9, dtype=np.uint8)
    expected = bytes(byteranges.join(memoryview(data.copy()), starts, lengths))
    got = byteranges.join_in_place(memoryview(data), starts, lengths)
    assert got is not None and bytes(got) == expected
    assert np.shares_memory(np.frombuffer(got, np.uint8), data)


def test_join_in_place_leaves_other_layouts_and_read_only_bytes_alone() -> None:
    data = np.arange(10_000, dtype=np.uint8)
    before = data.copy()
    starts = np.array([0, 100, 250, 300], np.int64)  # uneven steps
    assert byteranges.join_in_place(memoryview(data), starts, np.full(4, 50, np.int64)) is None
    even = np.arange(4, dtype=np.int64) * 100
    assert byteranges.join_in_place(memoryview(data), even, np.full(4, 150, np.int64)) is None  # overlap
    past = even + 9_800  # (past the end)
    assert byteranges.join_in_place(memoryview(data), past, np.full(4, 50, np.int64)) is None
    assert np.array_equal(data, before)
    assert byteranges.join_in_place(memoryview(data.tobytes()), even, np.full(4, 50, np.int64)) is None
