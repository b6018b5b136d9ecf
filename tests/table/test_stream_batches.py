"""A stream (``to_batches``, ``to_reader``) over many small fragments reads them a group at a
time as batches, and still yields the batches a fragment-by-fragment read yields: the same
boundaries, rows, row ids and filters, on files either library wrote, with deletions. A count of
the rows that match a filter, and an update's search for its rows, read them as batches too."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.table import scan, scan_groups, snapshot
from lance_table.table.operations import delete as delete_op

pytestmark = pytest.mark.usefixtures("empty_caches")


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


@pytest.fixture(params=["2.0", "2.1", "2.2"], scope="module")
def many(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    """90 appends of 1 to 250 rows alternating between the libraries, then deletes by both (one
    empties a fragment)."""
    uri = str(tmp_path_factory.mktemp("many") / "ds")
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


def test_limits_read_the_rows_they_need(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    groups: list[list[int]] = []
    real = scan_groups.scan_each

    def spy(tasks, *args):  # type: ignore[no-untyped-def]
        groups.append([hi - lo for _, lo, hi in tasks])
        return real(tasks, *args)

    monkeypatch.setattr(scan, "scan_each", spy)
    theirs = lance.dataset(many)
    deleted = sum(f.metadata.physical_rows for f in theirs.get_fragments()) - theirs.count_rows()
    for limit, offset in ((10, 0), (150, 20), (1000, 0), (7, 3000)):
        groups.clear()
        got = lt.dataset(many).to_table(limit=limit, offset=offset, columns=["id", "s"])
        assert got.equals(theirs.to_table(limit=limit, offset=offset, columns=["id", "s"]))
        read = [n for g in groups for n in g]
        assert sum(read[:-1]) < offset + limit + deleted  # no range read past the rows needed
        if limit >= 1000:
            assert max(len(g) for g in groups) > 1  # small fragments grouped
    for where in ("x < 0.5", "s is null"):
        got = lt.dataset(many).to_table(limit=120, offset=30, filter=where)
        assert got.equals(theirs.to_table(limit=120, offset=30, filter=where))
    assert lt.dataset(many).head(5).equals(theirs.head(5))


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


@pytest.mark.parametrize(
    "where",
    ["x < 0.3", "id >= 100 and id < 2000", "s is null", "id % 5 = 0 and x > 0.5", "id < 0", "s = 'beta1'"],
)
def test_filtered_counts_equal_pylance(many: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = scan.batch_matching_rows

    def spy(frags, *args):  # type: ignore[no-untyped-def]
        calls.append(len(frags))
        return real(frags, *args)

    monkeypatch.setattr(scan, "batch_matching_rows", spy)
    assert lt.dataset(many).count_rows(filter=where) == lance.dataset(many).count_rows(filter=where)
    assert sum(calls) == len(lt.dataset(many).get_fragments())  # every fragment counted in groups
    assert max(calls) > 1


def test_filtered_count_of_large_and_small_fragments(tmp_path: Path) -> None:
    uri = str(tmp_path / "mixed")
    lt.write_dataset(_rows(0, 300_000, 1), uri)  # larger than a read chunk: counted in ranges
    for i in range(6):
        lance.write_dataset(_rows(300_000 + i * 50, 50, i), uri, mode="append")
    lance.dataset(uri).delete("id % 11 = 0")
    for where in ("x < 0.25", "id > 299990", "id > 299990 and s is not null"):
        assert lt.dataset(uri).count_rows(filter=where) == lance.dataset(uri).count_rows(filter=where)


def test_a_head_makes_readers_of_the_fragments_it_reads(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real = snapshot.FragmentReader

    def counting(fragment, *args):  # type: ignore[no-untyped-def]
        made.append(fragment.id)
        return real(fragment, *args)

    ds = lt.dataset(many)
    monkeypatch.setattr(snapshot, "FragmentReader", counting)
    assert ds.head(3).equals(lance.dataset(many).head(3))
    assert 0 < len(made) <= 3  # not one per fragment of the version
    made.clear()
    assert ds.to_table(limit=5, offset=600, columns=["id"]).equals(
        lance.dataset(many).to_table(limit=5, offset=600, columns=["id"])
    )
    assert len(made) < len(ds.get_fragments()) // 2


def test_updates_find_their_rows_in_batches(
    many: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(many, ours)
    shutil.copytree(many, theirs)
    calls: list[int] = []
    real = delete_op.batch_matching_rows

    def spy(frags, *args):  # type: ignore[no-untyped-def]
        calls.append(len(frags))
        return real(frags, *args)

    monkeypatch.setattr(delete_op, "batch_matching_rows", spy)
    for where, values in (("id % 9 = 4", {"x": "x + 1"}), ("s is null and id > 500", {"s": "'was null'"})):
        lt.dataset(ours).update(values, where=where)
        lance.dataset(theirs).update(values, where=where)
    assert calls and max(calls) > 1
    lt.dataset(ours).update({"x": "0.5"})  # every row: no predicate to read
    lance.dataset(theirs).update({"x": "0.5"})
    for uri in (ours, theirs):
        got = lt.dataset(uri).to_table().sort_by("id")
        assert got.equals(lance.dataset(ours).to_table().sort_by("id"))
        assert got.equals(lance.dataset(theirs).to_table().sort_by("id"))
