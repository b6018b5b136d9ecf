"""Narrow and wide columns of one read of fragments of a few thousand rows (ids, floats and short
strings beside vectors): a batch of all of them would hold only a few files, so the narrow ones
are batched across many files by themselves and the wide ones by themselves, and the columns are
put side by side. Rows, order, deletions, filters, takes and system columns equal pylance's, on
files either library wrote; a spy checks that the split is taken."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import column_groups_spy, ids_and_vectors

import lance_table as lt
from lance_table.table import deletion, fragment_batch
from lance_table.table.readers import READERS

ROWS = 1_000  # rows per file: the vectors of a file are 64 kB, the other columns some 18 kB


@pytest.fixture(autouse=True)
def _empty_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    READERS.clear()
    deletion.DELETIONS.clear()
    # a quarter of the bound (256 kB): files of 1k rows stand for 4k-row ones; a batch of every
    # column holds three of them, one of the vectors alone four, one of the rest fourteen
    monkeypatch.setattr(fragment_batch, "BATCH_BYTES", fragment_batch.BATCH_BYTES // 4)


@pytest.fixture(params=[("lance_table", "2.2"), ("pylance", "2.2"), ("lance_table", "2.1")])
def narrow(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Eight files of 1k rows, then an append of 300 rows."""
    writer, version = request.param
    write: Any = lance.write_dataset if writer == "pylance" else lt.write_dataset
    uri = str(tmp_path / "ds")
    write(ids_and_vectors(0, 8 * ROWS, 1), uri, data_storage_version=version, max_rows_per_file=ROWS)
    write(ids_and_vectors(8 * ROWS, 300, 2), uri, mode="append", data_storage_version=version)
    return uri


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[list[list[str]]]:
    """The column groups of every read split into narrow and wide columns."""
    return column_groups_spy(monkeypatch, fragment_batch, "_narrow_groups")


def test_narrow_columns_are_batched_apart_from_wide_ones(narrow: str, groups: list[list[list[str]]]) -> None:
    ours, theirs = lt.dataset(narrow), lance.dataset(narrow)
    for cols in (["id", "x", "vec"], ["vec", "id", "x"], ["x", "vec", "cat", "id"], None):
        got = ours.to_table(columns=cols)
        assert got.equals(theirs.to_table(columns=cols)), cols
    assert [["id", "x"], ["vec"]] in groups
    assert [["id", "x", "cat"], ["vec"]] in groups
    assert got.column("vec").combine_chunks().flatten().to_numpy()[::16].tolist() == list(range(got.num_rows))
    groups.clear()
    assert ours.to_table(columns=["id", "x", "cat"]).equals(theirs.to_table(columns=["id", "x", "cat"]))
    assert not groups  # narrow columns alone: one batch of all


def test_deletions_filters_and_row_ids_equal_pylance(
    narrow: str, tmp_path: Path, groups: list[list[list[str]]]
) -> None:
    copy = str(tmp_path / "copy")
    shutil.copytree(narrow, copy)
    # whole files, a long range in one, single rows: the fragments are still read in runs
    flt = "(id >= 2500 AND id < 3900) OR id >= 8250 OR id = 17 OR id = 5432"
    lt.dataset(narrow).delete(flt)
    lance.dataset(copy).delete(flt)
    ours, theirs = lt.dataset(narrow), lance.dataset(copy)
    groups.clear()
    for cols in (["id", "x", "vec"], ["vec", "x"], ["_rowaddr", "vec", "id", "_rowid"]):
        assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols)), cols
    assert groups
    for f in ("x < 0.3", "id >= 990 AND id < 5010", "x IS NULL OR cat = 'c5'"):
        for cols in (["id", "x", "vec"], None):
            got = ours.to_table(columns=cols, filter=f, with_row_id=True)
            assert got.equals(theirs.to_table(columns=cols, filter=f, with_row_id=True)), (f, cols)
    n = theirs.count_rows()
    picks = [*np.random.default_rng(5).choice(n, 300, replace=False).tolist(), n - 1, 0, 17, 17]
    assert ours.take(picks, columns=["vec", "id", "x"]).equals(theirs.take(picks, columns=["vec", "id", "x"]))
    batches = list(ours.to_batches(columns=["id", "x", "vec"], batch_size=700))
    assert pa.Table.from_batches(batches).equals(theirs.to_table(columns=["id", "x", "vec"]))


def test_damaged_wide_column_names_the_file(narrow: str, groups: list[list[list[str]]]) -> None:
    """A data file whose vector page is cut short: the read names that file."""
    data = sorted((Path(narrow) / "data").iterdir())[3]
    raw = bytearray(data.read_bytes())
    ds = lt.dataset(narrow)
    frag_rows = ds.to_table(columns=["id", "x", "vec"])  # (the layouts are read and kept now)
    assert frag_rows.num_rows == 8 * ROWS + 300
    # the vector values of the file: the 64 kB run of float32 bytes, zeroed out of its page table
    READERS.clear()
    raw[: len(raw) // 2] = bytes(len(raw) // 2)
    data.write_bytes(bytes(raw))
    with pytest.raises(lt.CorruptFileError) as info:
        lt.dataset(narrow).to_table(columns=["id", "x", "vec"])
    assert data.name in str(info.value)
