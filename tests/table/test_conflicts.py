"""Commits planned against an old version: rebased when compatible, refused with a typed error when not."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import make_rows

import lance_table as lt
from lance_table.storage import open_storage
from lance_table.table.commit import CommitOptions


def _ids(ds: lt.Dataset) -> list[int]:
    return sorted(ds.to_table(columns=["id"])["id"].to_pylist())


@pytest.fixture
def base(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(make_rows(0, 300), uri, max_rows_per_file=100)
    return uri


def test_append_vs_append_rebases(base):
    a = lt.dataset(base)
    b = lt.dataset(base)
    lt.write_dataset(make_rows(1000, 10), base, mode="append")
    # a stale handle's append still lands on top of the latest version
    stale = a._committed  # noqa: F841 - documents that handles are pinned
    ds = lt.write_dataset(make_rows(2000, 10), base, mode="append")
    assert ds.version == 3 and ds.count_rows() == 320
    assert b.version == 1 and b.count_rows() == 300
    assert [f.id for f in ds.manifest.fragments] == [0, 1, 2, 3, 4]


def test_delete_vs_append_and_append_vs_delete(base):
    stale = lt.dataset(base)
    lt.write_dataset(make_rows(1000, 10), base, mode="append")
    stale.delete("id < 5")  # planned at v1, committed after the append
    ds = stale
    assert ds.version == 3
    assert _ids(ds) == list(range(5, 300)) + list(range(1000, 1010))


def test_delete_vs_delete_on_different_fragments(base):
    a = lt.dataset(base)
    b = lt.dataset(base)
    a.delete("id < 10")
    b.delete("id >= 290")
    ds = b
    assert _ids(ds) == list(range(10, 290))


def test_delete_vs_delete_on_the_same_fragment_merges_deletion_vectors(base):
    a = lt.dataset(base)
    b = lt.dataset(base)
    a.delete("id % 2 = 0 AND id < 100")
    b.delete("id % 3 = 0 AND id < 100")
    ds = b
    expected = [i for i in range(300) if not (i < 100 and (i % 2 == 0 or i % 3 == 0))]
    assert _ids(ds) == expected
    frag = ds.manifest.fragments[0]
    assert frag.deletion_file.num_deleted_rows == 100 - len([i for i in range(100) if i % 2 and i % 3])
    assert _ids(lt.dataset(base)) == expected


def test_delete_vs_delete_that_removed_the_whole_fragment(base):
    a = lt.dataset(base)
    b = lt.dataset(base)
    a.delete("id < 100")  # fragment 0 dropped
    assert b.delete("id < 50 OR id = 150") == {"num_deleted_rows": 51}  # as planned at its read
    ds = b
    assert _ids(ds) == [i for i in range(100, 300) if i != 150]


def test_compaction_vs_delete_is_a_retryable_conflict(base):
    stale = lt.dataset(base)
    lt.dataset(base).delete("id = 5")
    with pytest.raises(lt.CommitConflictError) as info:
        stale.compact_files(target_rows_per_fragment=1000)
    assert info.value.retryable
    assert _ids(lt.dataset(base)) == [i for i in range(300) if i != 5]
    # retrying at the application level works
    ds = lt.dataset(base)
    ds.compact_files(target_rows_per_fragment=1000)
    assert len(ds.get_fragments()) == 1 and _ids(ds) == [i for i in range(300) if i != 5]


def test_delete_vs_compaction_is_a_retryable_conflict(base):
    stale = lt.dataset(base)
    lt.dataset(base).compact_files(target_rows_per_fragment=1000)
    with pytest.raises(lt.CommitConflictError) as info:
        stale.delete("id = 7", conflict_retries=0)
    assert info.value.retryable
    assert stale.version == 1  # a failed write leaves the handle where it was
    # with retries (as by default), the delete runs again on the latest version, as pylance's does
    assert stale.delete("id = 7") == {"num_deleted_rows": 1}
    assert stale.version == 4 and stale.count_rows() == 299
    assert lt.dataset(base).count_rows() == 299


@pytest.mark.parametrize("other", ["overwrite", "restore"])
def test_anything_vs_overwrite_or_restore_conflicts(base, other):
    lt.write_dataset(make_rows(1000, 10), base, mode="append")
    stale = lt.dataset(base)
    if other == "overwrite":
        lt.write_dataset(make_rows(5000, 5), base, mode="overwrite")
    else:
        lt.dataset(base, version=1).restore()
    with pytest.raises(lt.CommitConflictError) as info:
        stale.delete("id < 3")
    assert not info.value.retryable
    latest = lt.dataset(base)
    assert latest.versions()[-1]["operation"] == other


def test_overwrite_and_restore_apply_to_the_latest(base):
    stale = lt.dataset(base)
    lt.write_dataset(make_rows(1000, 10), base, mode="append")
    stale.restore()
    restored = stale
    assert restored.version == 3 and restored.count_rows() == 300
    assert restored.manifest.max_fragment_id == 3  # never decreases


def test_retries_are_bounded(base):
    storage = open_storage(base)
    from lance_table.format.transaction import Append
    from lance_table.table.commit import Pending, commit

    class AlwaysTaken:
        """Every manifest name is already taken."""

        def __getattr__(self, name):
            return getattr(storage, name)

        def put_if_absent(self, path, data):
            raise FileExistsError(path)

    ds = lt.dataset(base)
    with pytest.raises(lt.CommitError, match="3 retries"):
        commit(AlwaysTaken(), ds.manifest, Pending(Append(()), 1), options=CommitOptions(max_retries=3))  # type: ignore[arg-type]


def test_snapshot_isolation(base):
    ds = lt.dataset(base)
    before = ds.to_table()
    lt.write_dataset(make_rows(1000, 10), base, mode="append")
    lt.dataset(base).delete("id < 100")
    assert ds.to_table().equals(before) and ds.count_rows() == 300
    ds.checkout_latest()
    assert ds.count_rows() == 210
    assert ds.latest_version == 3


def test_storage_without_atomic_create_needs_a_lock(tmp_path):
    import contextlib
    import threading

    uri = f"local://{tmp_path}/ds"  # generic fsspec backend: no atomic create-if-absent
    with pytest.raises(lt.CommitError, match="commit_lock"):
        lt.write_dataset(make_rows(0, 10), uri)
    assert not (tmp_path / "ds" / "_versions").exists() or not any((tmp_path / "ds" / "_versions").iterdir())
    lock = threading.Lock()
    seen = []

    @contextlib.contextmanager
    def commit_lock(version):
        with lock:
            seen.append(version)
            yield

    ds = lt.write_dataset(make_rows(0, 10), uri, commit_lock=commit_lock)
    ds = lt.write_dataset(make_rows(10, 10), uri, mode="append", commit_lock=commit_lock)
    assert seen == [1, 2] and ds.count_rows() == 20
    ds = lt.write_dataset(make_rows(20, 10), uri, mode="append", unsafe_commit=True)
    assert ds.count_rows() == 30
    assert np.array_equal(lt.dataset(uri).to_table()["id"].to_numpy(), np.arange(30))
    # the file written by our generic backend is a regular dataset
    assert lt.dataset(str(tmp_path / "ds")).count_rows() == 30
    assert pa.types.is_int64(lt.dataset(str(tmp_path / "ds")).schema.field("id").type)
