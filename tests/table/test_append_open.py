"""An append opens the version this process committed last when ``_versions`` is provably as that
commit left it: a stream of appends lists the directory once per append (in the commit), and a
version another writer committed (or cleaned up, or a dataset made anew) is never missed."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.format import paths
from lance_table.storage import open_storage
from lance_table.table import latest_known
from lance_table.table.session import clear_caches


def _rows(i: int) -> pa.Table:
    ids = np.arange(i * 10, i * 10 + 10)
    return pa.table({"id": ids, "s": [f"r{k}" for k in ids.tolist()]})


def _expected(indices: list[int]) -> pa.Table:
    return pa.concat_tables([_rows(i) for i in indices])


def _tick() -> None:
    """Let the file system's clock move on (directory times are coarse), as a real gap between
    two writers' commits does."""
    time.sleep(0.03)


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The directories ``os.listdir`` / ``os.scandir`` read, in order."""
    out: list[str] = []
    listdir, scandir = os.listdir, os.scandir

    def recording_listdir(path: str = ".") -> list[str]:
        out.append(os.path.basename(os.fspath(path)))
        return listdir(path)

    def recording_scandir(path: str = ".") -> object:
        out.append(os.path.basename(os.fspath(path)))
        return scandir(path)

    monkeypatch.setattr(os, "listdir", recording_listdir)
    monkeypatch.setattr(os, "scandir", recording_scandir)
    yield out


def test_a_stream_of_appends_lists_versions_once_per_append(tmp_path, listings) -> None:
    import lance

    clear_caches()
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0), uri, data_storage_version="2.2")
    lt.write_dataset(_rows(1), uri, mode="append")  # (may list: nothing kept before)
    listings.clear()
    for i in range(2, 7):
        lt.write_dataset(_rows(i), uri, mode="append")
    assert listings.count(paths.VERSIONS_DIR) == 5
    assert lt.dataset(uri).version == lance.dataset(uri).version == 7
    assert lance.dataset(uri).to_table().equals(_expected(list(range(7))))
    # without what this process kept (a fresh process), the open lists as well
    clear_caches()
    listings.clear()
    lt.write_dataset(_rows(7), uri, mode="append")
    assert listings.count(paths.VERSIONS_DIR) == 2
    assert lance.dataset(uri).to_table().equals(_expected(list(range(8))))


def test_versions_another_writer_committed_are_seen(tmp_path) -> None:
    import lance

    clear_caches()
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0), uri, data_storage_version="2.2")
    lt.write_dataset(_rows(1), uri, mode="append")
    _tick()
    lance.write_dataset(_rows(2), uri, mode="append")
    assert latest_known.latest(open_storage(uri)) is None  # _versions changed
    lt.write_dataset(_rows(3), uri, mode="append")
    _tick()
    # a new column from the other writer: the next append writes it too (it opened that version)
    ds = lance.dataset(uri)
    ds.add_columns({"d": "id * 2"})
    table = _rows(4).append_column("d", pa.array(np.arange(40, 50) * 2))
    lt.write_dataset(table, uri, mode="append")
    got = lance.dataset(uri).to_table()
    assert got.column_names == ["id", "s", "d"] and got.num_rows == 50
    assert got.column("d").to_pylist() == [i * 2 for i in range(50)]
    assert lt.dataset(uri).to_table().equals(got)


def test_a_version_missed_within_a_clock_tick_is_rebased_over(tmp_path) -> None:
    """What the open keeps may miss a commit made within the same tick of the clock as this
    process's own: the append then opens the version before it, and its commit (which lists)
    rebases over what it missed."""
    import lance

    clear_caches()
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0), uri, data_storage_version="2.2")
    lt.write_dataset(_rows(1), uri, mode="append")
    storage = open_storage(uri)
    kept = latest_known._KNOWN.get(storage.cache_key)
    assert kept is not None and kept[2].version == 2
    lance.write_dataset(_rows(2), uri, mode="append")
    lance.write_dataset(_rows(3), uri, mode="append")
    # as if both had landed in the tick of version 2's commit: the tokens did not move
    entry, manifest = kept[2], kept[3]
    latest_known._KNOWN.put(
        storage.cache_key,
        (storage.change_token(paths.VERSIONS_DIR), storage.change_token(entry.path), entry, manifest),
    )
    assert latest_known.latest(storage) == (entry, manifest)
    snapshot = lt.write_dataset(_rows(4), uri, mode="append")
    assert snapshot.version == 5
    assert lance.dataset(uri).version == 5
    expected = _expected([0, 1, 2, 3, 4])
    assert lance.dataset(uri).to_table().sort_by("id").equals(expected)
    assert lt.dataset(uri).to_table().sort_by("id").equals(expected)
    assert sorted(f.fragment_id for f in lance.dataset(uri).get_fragments()) == [0, 1, 2, 3, 4]


def test_cleanup_and_a_dataset_made_anew_are_seen(tmp_path) -> None:
    import lance

    clear_caches()
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0), uri, data_storage_version="2.2")
    lt.write_dataset(_rows(1), uri, mode="append")
    _tick()
    lance.write_dataset(_rows(2), uri, mode="append")
    lance.write_dataset(_rows(3), uri, mode="append")
    lance.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0))
    lt.write_dataset(_rows(4), uri, mode="append")
    assert lance.dataset(uri).to_table().sort_by("id").equals(_expected([0, 1, 2, 3, 4]))
    assert [v["version"] for v in lance.dataset(uri).versions()] == [4, 5]
    _tick()
    # the dataset is removed and written anew by another writer: the append opens the new one
    shutil.rmtree(uri)
    lance.write_dataset(_rows(7), uri, data_storage_version="2.2")
    assert latest_known.latest(open_storage(uri)) is None
    snapshot = lt.write_dataset(_rows(8), uri, mode="append")
    assert snapshot.version == 2
    assert lance.dataset(uri).to_table().equals(_expected([7, 8]))


def test_appends_of_other_schemas_are_planned_for_their_own(tmp_path) -> None:
    """The plan of an append is kept for the next append of the same schema only: an append
    that lacks a nullable field, one with all of them, one of a field the dataset lacks and one
    after a new column each get their own."""
    import lance

    from lance_table.errors import SchemaError

    clear_caches()
    uri = str(tmp_path / "ds")
    full = pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]})
    lt.write_dataset(full, uri, data_storage_version="2.2")
    lt.write_dataset(full.select(["id"]), uri, mode="append")  # "s" left out: nulls
    lt.write_dataset(full, uri, mode="append")
    lt.write_dataset(full.select(["id"]), uri, mode="append")
    with pytest.raises(SchemaError):
        lt.write_dataset(full.append_column("x", pa.array([0, 0])), uri, mode="append")
    meta = full.replace_schema_metadata({"k": "v"})
    lt.write_dataset(meta, uri, mode="append")
    ds = lt.dataset(uri)
    ds.add_columns({"d": "id * 2"})
    lt.write_dataset(full.append_column("d", pa.array([7, 8], pa.int64())), uri, mode="append")
    lt.write_dataset(full, uri, mode="append")  # "d" left out: nulls
    got = lance.dataset(uri).to_table()
    s = ["a", "b", None, None, "a", "b", None, None, "a", "b", "a", "b", "a", "b"]
    assert got.column("s").to_pylist() == s
    assert got.column("d").to_pylist() == [2, 4] * 5 + [7, 8, None, None]
    assert lt.dataset(uri).to_table().equals(got)
