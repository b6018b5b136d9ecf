"""Small and large columns of one read (ids and floats beside vectors, in fragments of 20k rows):
the small columns batched across the files, the large ones file by file, put side by side. The
rows, their order, deletions, filters, takes, limits, batch sizes and system columns are
pylance's, on files either library wrote; a spy checks that the mixed path is the one taken."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import column_groups_spy, ids_and_vectors

import lance_table as lt
from lance_table.file.v2_0 import small_many as small_many20
from lance_table.table import deletion, fragment_batch
from lance_table.table.fragment import FragmentReader
from lance_table.table.readers import READERS

ROWS = 5_000  # rows per file: the vectors of a file are 320 kB, more than half a batch below


@pytest.fixture(autouse=True)
def _empty_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    READERS.clear()
    deletion.DELETIONS.clear()
    # a quarter of the bound: files of 5k rows stand for pylance's 20k-row ones (ids and floats
    # batch across the files, the vectors of one file are too large to share a batch)
    monkeypatch.setattr(fragment_batch, "BATCH_BYTES", fragment_batch.BATCH_BYTES // 4)


def _write(uri: str, writer: str, version: str) -> None:
    """Three files of 5k rows, then appends of 300, 3k and 50 rows."""
    write: Callable[..., Any] = lance.write_dataset if writer == "pylance" else lt.write_dataset
    write(ids_and_vectors(0, 3 * ROWS, 1), uri, data_storage_version=version, max_rows_per_file=ROWS)
    start = 3 * ROWS
    for k, n in enumerate((300, 3_000, 50)):
        write(ids_and_vectors(start, n, 2 + k), uri, mode="append", data_storage_version=version)
        start += n


@pytest.fixture(
    params=[("lance_table", "2.2"), ("pylance", "2.2"), ("lance_table", "2.1"), ("lance_table", "2.0")]
)
def mixed(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    uri = str(tmp_path / "ds")
    _write(uri, *request.param)
    return uri


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[list[list[str]]]:
    """The column groups of every read that split its columns."""
    return column_groups_spy(monkeypatch, fragment_batch, "_column_groups")


def _copy(uri: str, tmp_path: Path) -> str:
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    return copy


def test_small_columns_are_batched_beside_large_ones(mixed: str, groups: list[list[list[str]]]) -> None:
    ours, theirs = lt.dataset(mixed), lance.dataset(mixed)
    for cols in (["id", "x", "vec"], ["vec", "id", "x"], ["x", "vec", "cat", "id"], None):
        got = ours.to_table(columns=cols)
        assert got.equals(theirs.to_table(columns=cols)), cols
    # the ids and floats in one group, the vectors in another; the strings among the small
    # columns (with them, or each small column alone where the vectors lie between them)
    assert [["id", "x"], ["vec"]] in groups
    assert any(["vec"] in g and any("cat" in names for names in g) for g in groups)
    assert got.column("vec").combine_chunks().flatten().to_numpy()[::16].tolist() == list(range(got.num_rows))


def test_deletions_row_ids_and_addresses_equal_pylance(
    mixed: str, tmp_path: Path, groups: list[list[list[str]]]
) -> None:
    copy = _copy(mixed, tmp_path)
    # rows here and there, a long range inside one file, and most of a small one
    flt = "id % 7 = 3 OR (id >= 6000 AND id < 7500) OR (id >= 15000 AND id < 15250)"
    lt.dataset(mixed).delete(flt)
    lance.dataset(copy).delete(flt)
    ours, theirs = lt.dataset(mixed), lance.dataset(copy)
    groups.clear()
    for cols in (["id", "x", "vec"], ["vec", "x"], ["_rowaddr", "vec", "id", "_rowid"]):
        assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols)), cols
    assert ours.to_table(columns=["x", "vec"], with_row_id=True).equals(
        theirs.to_table(columns=["x", "vec"], with_row_id=True)
    )
    assert groups  # the reads after the deletes took the mixed path too


def test_filters_equal_pylance(mixed: str) -> None:
    ours, theirs = lt.dataset(mixed), lance.dataset(mixed)
    for flt in ("x < 0.3", "id >= 4990 AND id < 10010", "x IS NULL OR id > 17000", "cat = 'c5'"):
        for cols in (["id", "x", "vec"], ["vec", "cat"], None):
            got = ours.to_table(columns=cols, filter=flt, with_row_id=True)
            assert got.equals(theirs.to_table(columns=cols, filter=flt, with_row_id=True)), (flt, cols)


def test_takes_limits_and_batches_equal_pylance(
    mixed: str, tmp_path: Path, groups: list[list[list[str]]]
) -> None:
    copy = _copy(mixed, tmp_path)
    lt.dataset(mixed).delete("id % 5 = 2")
    lance.dataset(copy).delete("id % 5 = 2")
    ours, theirs = lt.dataset(mixed), lance.dataset(copy)
    n = theirs.count_rows()
    picks = [*np.random.default_rng(5).choice(n, 500, replace=False).tolist(), n - 1, 0, 17, 17]
    cols = ["id", "x", "vec"]
    assert ours.take(picks, columns=cols).equals(theirs.take(picks, columns=cols))
    groups.clear()
    most = np.random.default_rng(6).permutation(n)[: n * 3 // 4]  # most rows, in no order
    assert ours.take(most, columns=cols).equals(theirs.take(most, columns=cols))
    assert groups  # most rows of each file: batched as a scan's
    for limit, offset in ((1000, 4_500), (8_000, 10), (5, n - 3)):
        got = ours.to_table(columns=["vec", "id", "x"], limit=limit, offset=offset)
        assert got.equals(theirs.to_table(columns=["vec", "id", "x"], limit=limit, offset=offset))
    for size in (1000, 1777):
        mine = list(ours.to_batches(columns=cols, batch_size=size))
        other = list(theirs.to_batches(columns=cols, batch_size=size))
        assert [b.num_rows for b in mine] == [b.num_rows for b in other]  # (none across fragments)
        assert pa.Table.from_batches(mine).equals(pa.Table.from_batches(other))


def test_compaction_of_mixed_fragments_equals_pylance(mixed: str) -> None:
    expected = lance.dataset(mixed).to_table()
    lt.dataset(mixed).compact_files()
    assert lance.dataset(mixed).to_table().equals(expected)
    assert lt.dataset(mixed).to_table().equals(expected)


def test_fragments_read_alone_are_not_split(mixed: str, groups: list[list[list[str]]]) -> None:
    # one file too large to share a batch: nothing to gain by splitting its columns
    ds = lt.dataset(mixed)
    frags = ds._snapshot.fragment_readers()
    cols = ["id", "x", "vec"]
    runs = [f.live_runs(0, f.physical_rows) for f in frags]
    got = fragment_batch.read(frags[:1], cols, runs[:1])
    assert not groups
    both = fragment_batch.read(frags[:2], cols, runs[:2])
    assert got.equals(lance.dataset(mixed).to_table(columns=cols, limit=ROWS))
    assert both.equals(lance.dataset(mixed).to_table(columns=cols, limit=2 * ROWS))
    plan = fragment_batch.plans(frags[:1], cols)[0]
    if plan is not None and isinstance(plan[1], small_many20.FileLayout):
        assert not groups  # 2.0 files: all the columns read straight into their values, unsplit
    elif plan is not None:
        assert groups == [[["id", "x"], ["vec"]]]


def test_large_files_of_fixed_width_decode_as_batches_of_their_own(
    mixed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the vectors of a 2.1/2.2 file too large to share a batch: decoded whole as a batch of one
    # (its bytes as they are, not joined), never falling back to the file's own reader
    ds = lt.dataset(mixed)
    frags = ds._snapshot.fragment_readers()
    first = frags[0].fragment.files[0]
    if (first.file_major_version, first.file_minor_version) == (2, 0):
        pytest.skip("2.0 files: read by their own reader")
    by_reader: list[int] = []
    monkeypatch.setattr(FragmentReader, "read", lambda self, *a, **k: by_reader.append(1))
    got = lt.dataset(mixed).to_table(columns=["id", "vec", "x"])
    assert not by_reader
    assert got.equals(lance.dataset(mixed).to_table(columns=["id", "vec", "x"]))


@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_small_columns_with_large_ones_between_are_batched_each_alone(
    writer: str, tmp_path: Path, groups: list[list[list[str]]]
) -> None:
    # the vectors stored between the ids and the floats: a batch of both would read the vectors
    # too, so each is batched on its own
    uri = str(tmp_path / "apart")
    data = ids_and_vectors(0, 3 * ROWS, 8).select(["id", "vec", "x"])
    write: Callable[..., Any] = lance.write_dataset if writer == "pylance" else lt.write_dataset
    write(data, uri, data_storage_version="2.2", max_rows_per_file=ROWS)
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    for cols in (["x", "id"], ["id", "vec", "x"]):
        assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols)), cols
        flt = "x < 0.5"
        got = ours.to_table(columns=cols, filter=flt, with_row_id=True)
        assert got.equals(theirs.to_table(columns=cols, filter=flt, with_row_id=True)), cols
    assert [["id"], ["x"]] in map(sorted, groups) and [["id"], ["vec"], ["x"]] in map(sorted, groups)
