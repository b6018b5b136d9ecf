"""A stream (``to_batches``, ``to_reader``) over many small fragments reads them a group at a
time as batches, and still yields the batches a fragment-by-fragment read yields: the same
boundaries, rows, row ids and filters, on files either library wrote, with deletions."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.table import deletion, scan, scan_groups
from lance_table.table.readers import READERS


@pytest.fixture(autouse=True)
def _empty_caches() -> None:
    READERS.clear()
    deletion.DELETIONS.clear()


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    words = ["alpha", "beta", "", "gamma" * 7, "δέλτα"]
    text = [None if k else f"{words[i % 5]}{i}" for i, k in zip(ids.tolist(), (rng.random(n) < 0.2).tolist())]
    return pa.table(
        {
            "id": ids,
            "x": pa.array(rng.random(n), mask=rng.random(n) < 0.1),
            "s": pa.array(text, pa.string()),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4),
        }
    )


@pytest.fixture(params=["2.0", "2.1", "2.2"])
def many(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """90 appends of 1 to 250 rows alternating between the libraries, then deletes by both (one
    empties a fragment)."""
    uri = str(tmp_path / "ds")
    start = 0
    for i in range(90):
        n = [3, 37, 100, 1, 250][i % 5]
        mod = lance if i % 3 == 1 else lt
        mod.write_dataset(  # type: ignore[attr-defined]
            _rows(start, n, i), uri, mode="append" if i else "create", data_storage_version=request.param
        )
        start += n
    lt.dataset(uri).delete("id % 7 = 3")
    lance.dataset(uri).delete("id >= 37 and id < 140")  # the second fragment and part of the third
    return uri


def _batches(batches: list[pa.RecordBatch]) -> list[pa.Table]:
    return [pa.Table.from_batches([b]) for b in batches]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"columns": ["s", "id"]},
        {"columns": ["vec"], "with_row_id": True},
        {"filter": "x < 0.3"},
        {"filter": "id % 5 = 0", "columns": ["id", "s"], "with_row_address": True},
        {"filter": "s is null", "columns": ["x"]},
        {"batch_size": 40},
        {"offset": 1234},
    ],
)
def test_stream_equals_fragment_by_fragment_reads(
    many: str, kwargs: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = scan_groups.scan_each

    def spy(tasks, *args):  # type: ignore[no-untyped-def]
        calls.append(len(tasks))
        return real(tasks, *args)

    monkeypatch.setattr(scan, "scan_each", spy)
    grouped = _batches(list(lt.dataset(many).to_batches(**kwargs)))
    assert max(calls) > 1  # small fragments were read a group at a time
    monkeypatch.setattr(scan, "STREAM_GROUP_TASKS", 1)
    calls.clear()
    single = _batches(list(lt.dataset(many).to_batches(**kwargs)))
    assert max(calls) == 1
    assert [t.num_rows for t in grouped] == [t.num_rows for t in single]
    assert all(a.equals(b) for a, b in zip(grouped, single))
    expected = lance.dataset(many).to_table(**kwargs)
    assert pa.concat_tables(grouped).equals(expected)


def test_plain_stream_keeps_pylance_batches(many: str) -> None:
    ours = _batches(list(lt.dataset(many).to_batches()))
    theirs = _batches(list(lance.dataset(many).to_batches()))
    assert [t.num_rows for t in ours] == [t.num_rows for t in theirs]
    assert all(a.equals(b) for a, b in zip(ours, theirs))
    reader = lt.dataset(many).scanner(columns=["id"], filter="x > 0.5").to_reader()
    assert reader.read_all().equals(lance.dataset(many).to_table(columns=["id"], filter="x > 0.5"))


def test_limit_reads_fragment_by_fragment(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = scan_groups.scan_each

    def spy(tasks, *args):  # type: ignore[no-untyped-def]
        calls.append(len(tasks))
        return real(tasks, *args)

    monkeypatch.setattr(scan, "scan_each", spy)
    got = lt.dataset(many).to_table(limit=150, offset=20, filter="x < 0.5")
    assert got.equals(lance.dataset(many).to_table(limit=150, offset=20, filter="x < 0.5"))
    assert calls and max(calls) == 1  # no group read past what the limit needs


def test_a_stream_stopped_early_yields_what_it_read(many: str) -> None:
    stream = lt.dataset(many).to_batches(columns=["id"])
    first = [next(stream) for _ in range(3)]
    stream.close()
    expected = lance.dataset(many).to_table(columns=["id"]).slice(0, sum(b.num_rows for b in first))
    assert pa.Table.from_batches(first).equals(expected)


def test_stream_groups_keep_large_ranges_apart() -> None:
    def tasks(sizes: list[int]) -> list[tuple[object, int, int]]:
        return [(k, 0, n) for k, n in enumerate(sizes)]

    def groups(sizes: list[int], count: int) -> list[list[object]]:
        return [[t[0] for t in g] for g in scan._stream_groups(iter(tasks(sizes)), 400, count)]  # type: ignore[arg-type]

    assert groups([10, 20, 300, 5, 5, 5, 90, 90, 5], 3) == [[0, 1], [2], [3, 4, 5], [6, 7, 8]]
    assert groups([90, 90, 90, 90, 90], 10) == [[0, 1, 2, 3], [4]]  # at most 400 rows
    assert groups([], 3) == []
