"""pylance's stream variants of merge_insert (``execute_batches``, ``execute_uncommitted_batches``,
``analyze_plan_batches``): the same results as pylance's on copies of the same dataset, from a
reader that is read once."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

import lance_table as lt

lance = pytest.importorskip("lance")


def _source() -> pa.RecordBatchReader:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    batches = (
        pa.record_batch([pa.array([i, i + 100]), pa.array([f"s{i}", f"n{i}"])], schema=schema)
        for i in range(0, 40, 4)
    )
    return pa.RecordBatchReader.from_batches(schema, batches)


def _copies(tmp_path) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lt.write_dataset(
        pa.table({"id": pa.array(range(20), pa.int64()), "v": [f"t{i}" for i in range(20)]}), ours
    )
    shutil.copytree(ours, theirs)
    return ours, theirs


def _rows(uri: str) -> list[dict]:
    return sorted(lance.dataset(uri).to_table().to_pylist(), key=lambda r: r["id"])


def test_execute_batches_as_pylance(tmp_path) -> None:
    ours, theirs = _copies(tmp_path)
    got = (
        lt.dataset(ours)
        .merge_insert("id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute_batches(_source())
    )
    want = (
        lance.dataset(theirs)
        .merge_insert("id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute_batches(_source())
    )
    assert dict(got) == dict(want) == {"num_inserted_rows": 15, "num_updated_rows": 5, "num_deleted_rows": 0}
    assert _rows(ours) == _rows(theirs)
    # a Table is an Arrow stream too; a list is not
    table = pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]})
    assert (
        lt.dataset(ours)
        .merge_insert("id")
        .when_matched_update_all()
        .execute_batches(table)["num_updated_rows"]
        == 1
    )
    with pytest.raises(TypeError):
        lt.dataset(ours).merge_insert("id").when_matched_update_all().execute_batches([1, 2])


def test_execute_uncommitted_batches_commits_as_pylance(tmp_path) -> None:
    ours, theirs = _copies(tmp_path)
    ds = lt.dataset(ours)
    tx, stats = ds.merge_insert("id").when_matched_update_all().execute_uncommitted_batches(_source())
    assert stats == {"num_inserted_rows": 0, "num_updated_rows": 5, "num_deleted_rows": 0}
    assert lt.dataset(ours).version == 1  # nothing committed yet
    lt.LanceDataset.commit(ours, tx.operation, read_version=tx.read_version)
    ptx, pstats = (
        lance.dataset(theirs)
        .merge_insert("id")
        .when_matched_update_all()
        .execute_uncommitted_batches(_source())
    )
    lance.LanceDataset.commit(theirs, ptx.operation, read_version=ptx.read_version)
    assert dict(pstats) == stats and _rows(ours) == _rows(theirs)


def test_analyze_plan_batches_commits_nothing(tmp_path) -> None:
    ours, _ = _copies(tmp_path)
    text = lt.dataset(ours).merge_insert("id").when_matched_update_all().analyze_plan_batches(_source())
    assert "MergeInsert" in text and "num_updated_rows=5" in text
    assert lt.dataset(ours).version == 1 and lt.dataset(ours).count_rows() == 20
