"""pylance 14's get_version, delta, all_files, tracked_files and io_stats_*: the same call on both
libraries, on one dataset, compared."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_table as lt


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> str:
    """Four versions by pylance, stable row ids: create, append, delete, update."""
    uri = str(tmp_path_factory.mktemp("history") / "ds")
    ds = lance.write_dataset(pa.table({"x": [1, 2, 3]}), uri, enable_stable_row_ids=True)
    ds = lance.write_dataset(pa.table({"x": [4]}), uri, mode="append")
    ds.delete("x = 2")
    ds.update({"x": "x + 10"}, where="x = 3")
    return uri


def _sorted(reader: pa.RecordBatchReader) -> list[dict]:
    return sorted(reader.read_all().to_pylist(), key=lambda r: sorted(r.items()))


def test_get_version_is_pylances(history):
    for version in (1, 2, 4):
        assert (
            lt.dataset(history, version=version).get_version()
            == lance.dataset(history, version=version).get_version()
        )


@pytest.mark.parametrize(
    "kwargs",
    [{"compared_against": 1}, {"begin_version": 3, "end_version": 4}, {"begin_version": 1, "end_version": 3}],
)
def test_delta_is_pylances(history, kwargs):
    ours, theirs = lt.dataset(history).delta(**kwargs), lance.dataset(history).delta(**kwargs)
    assert ours.get_deleted_row_ids().read_all().equals(theirs.get_deleted_row_ids().read_all())
    assert ours.get_inserted_rows().read_all().equals(theirs.get_inserted_rows().read_all())
    assert ours.get_updated_rows().read_all().equals(theirs.get_updated_rows().read_all())
    # rows are read as they are in the handle's version, as pylance reads them
    ours, theirs = (lib.dataset(history, version=3).delta(**kwargs) for lib in (lt, lance))
    assert ours.get_inserted_rows().read_all().equals(theirs.get_inserted_rows().read_all())
    assert ours.get_updated_rows().read_all().equals(theirs.get_updated_rows().read_all())
    assert [(t.read_version, type(t.operation).__name__) for t in ours.list_transactions()] == [
        (t.read_version, type(t.operation).__name__) for t in theirs.list_transactions()
    ]


def test_delta_bad_arguments_are_pylances_errors(history, tmp_path):
    ds = lt.dataset(history)
    for kwargs in ({}, {"begin_version": 1}):
        with pytest.raises(ValueError, match="begin_version"):
            ds.delta(**kwargs)
    with pytest.raises(ValueError):  # VersionNotFoundError
        ds.delta(compared_against=9)
    plain = lt.write_dataset(pa.table({"x": [1, 2]}), str(tmp_path / "plain"))
    plain.delete("x = 1")
    with pytest.raises(ValueError, match="stable row ids"):
        plain.delta(compared_against=1).get_deleted_row_ids()
    theirs = lance.dataset(plain.uri).delta(compared_against=1)  # without stable row ids: no rows
    assert (
        plain.delta(compared_against=1)
        .get_inserted_rows()
        .read_all()
        .equals(theirs.get_inserted_rows().read_all())
    )


def test_tracked_and_all_files_are_pylances(history):
    ours, theirs = lt.dataset(history), lance.dataset(history)
    assert ours.tracked_files().schema.equals(theirs.tracked_files().schema)
    assert ours.all_files().schema.equals(theirs.all_files().schema)
    assert _sorted(ours.tracked_files()) == _sorted(theirs.tracked_files())
    assert _sorted(ours.tracked_files(min_version=3)) == _sorted(theirs.tracked_files(min_version=3))
    assert _sorted(ours.all_files()) == _sorted(theirs.all_files())
    seen = []
    ours.tracked_files(progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_io_stats_count_reads_since_the_last_reset(history):
    ds = lt.dataset(history)
    ds.io_stats_incremental()
    assert ds.io_stats_snapshot().read_bytes == 0
    lt.dataset(history, metadata_cache_size_bytes=0).to_table()
    first = ds.io_stats_snapshot()
    assert first.read_iops > 0 and first.read_bytes > 0
    assert ds.io_stats_incremental() == first
    assert ds.io_stats_snapshot().read_iops == 0
