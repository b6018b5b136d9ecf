"""A column of fixed-size lists of fixed-size lists (``FixedSizeList<FixedSizeList<float32>>``)
reads and writes the same rows as pylance wherever lance_table takes or filters rows of a slice:
scans after deletes with offset and limit, takes, filters, and merges whose source is a slice.

(pyarrow 26 takes and filters rows of a slice of such an array from the wrong place, shifted by the
slice's offset; every take and filter of lance_table goes through ``file.arrow_take``.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt

ROWS = 600
MATRIX = pa.list_(pa.list_(pa.float32(), 2), 3)


def _table(start: int, rows: int) -> pa.Table:
    ids = np.arange(start, start + rows, dtype=np.int64)
    flat = pa.array((np.repeat(ids, 6) * 10 + np.tile(np.arange(6), rows)).astype(np.float32))
    inner = pa.FixedSizeListArray.from_arrays(flat, 2)
    return pa.table({"id": ids, "m": pa.FixedSizeListArray.from_arrays(inner, 3)})


@pytest.fixture(scope="module", params=["2.0", "2.2"])
def deleted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A dataset of three fragments, rows deleted from each by pylance."""
    uri = str(tmp_path_factory.mktemp("nested") / "ds")
    lt.write_dataset(_table(0, ROWS), uri, max_rows_per_file=200, data_storage_version=request.param)
    lance.dataset(uri).delete("id % 7 = 3 OR (id >= 250 AND id < 290)")
    return uri


def test_reads_after_deletes_match_pylance(deleted: str) -> None:
    ours, theirs = lt.dataset(deleted), lance.dataset(deleted)
    assert ours.to_table().equals(theirs.to_table())
    for offset, limit in ((0, 50), (37, 111), (190, 260)):
        got = ours.to_table(offset=offset, limit=limit)
        assert got.equals(theirs.to_table(offset=offset, limit=limit)), (offset, limit)
    where = "id % 5 = 1"
    assert ours.to_table(filter=where).equals(theirs.to_table(filter=where))
    assert ours.to_table(filter=where, limit=20, offset=9).equals(
        theirs.to_table(filter=where, limit=20, offset=9)
    )
    idx = [0, 1, 150, 199, 200, 201, 333, 478, 150]
    assert ours.take(idx).equals(theirs.take(idx))
    got = pa.Table.from_batches(ours.to_batches(batch_size=64))
    assert got.equals(theirs.to_table())


def test_merges_from_a_sliced_source_match_pylance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lance_table.table.operations import merge_plan

    monkeypatch.setattr(merge_plan, "WRITE_BATCH_ROWS", 64)  # new rows written from slices of the source
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lt.write_dataset(_table(0, 300), ours_uri, max_rows_per_file=100)
    shutil.copytree(ours_uri, theirs_uri)
    source = _table(250, 400).slice(17, 300)  # rows 267..566: some matched, most new
    doubled = source.set_column(1, "m", _table(10_000, 300).column("m"))
    for uri, lib in ((ours_uri, lt), (theirs_uri, lance)):
        ds = lib.dataset(uri)
        ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(doubled)
        extra = pa.table({"id": source.column("id"), "copy": source.column("m")}).slice(40, 200)
        lib.dataset(uri).merge(extra, "id")
    ours = lt.dataset(ours_uri).to_table().sort_by("id")
    theirs = lance.dataset(theirs_uri).to_table().sort_by("id")
    assert ours.num_rows == 567
    assert ours.equals(theirs)
