"""A write through a handle whose version cleanup has removed (its files gone) re-runs on the latest
version, as after any retryable conflict, instead of failing on the missing files."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import lance_table as lt


def _stale(tmp_path) -> tuple[str, lt.LanceDataset]:
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"id": range(10), "x": [0] * 10}), uri)
    stale = lt.dataset(uri)
    lt.write_dataset(pa.table({"id": range(10), "x": [5] * 10}), uri, mode="overwrite")
    lt.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0))
    return uri, stale


@pytest.mark.parametrize("op", ["update", "merge_insert", "delete"])
def test_a_write_through_a_cleaned_up_version_reruns_on_the_latest(tmp_path, op):
    uri, stale = _stale(tmp_path)
    if op == "update":
        assert stale.update({"x": "x + 1"}, "id < 3") == {"num_rows_updated": 3}
        expected = {i: 6 if i < 3 else 5 for i in range(10)}
    elif op == "merge_insert":
        src = pa.table({"id": [1, 20], "x": [7, 7]})
        stats = stale.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
        assert (stats["num_updated_rows"], stats["num_inserted_rows"]) == (1, 1)
        expected = {i: 5 for i in range(10)} | {1: 7, 20: 7}
    else:
        stale.delete("id >= 8")
        expected = {i: 5 for i in range(8)}
    table = lt.dataset(uri).to_table()
    assert dict(zip(table["id"].to_pylist(), table["x"].to_pylist(), strict=True)) == expected
    assert stale.count_rows() == len(expected)  # the handle moved to the version it committed


def test_compaction_through_a_cleaned_up_version_compacts_the_latest(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"id": range(10), "x": [0] * 10}), uri, max_rows_per_file=2)
    stale = lt.dataset(uri)
    lt.write_dataset(pa.table({"id": range(10), "x": [5] * 10}), uri, mode="overwrite", max_rows_per_file=2)
    lt.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0))
    metrics = stale.optimize.compact_files()
    assert (metrics.fragments_removed, metrics.fragments_added) == (5, 1)
    latest = lt.dataset(uri)
    assert len(latest.get_fragments()) == 1
    assert latest.to_table().sort_by("id") == pa.table({"id": range(10), "x": [5] * 10})
