"""Detached commits (``commit(..., detached=True)``) against pylance: the version numbers and
manifest names, checkout and commits on top of a detached version by either library, the version
line untouched, cleanup by either library leaving the same files, and bad input refused as
pylance refuses it."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.errors import DetachedCommitError, VersionNotFoundError
from lance_table.format import paths

pytestmark = pytest.mark.interop

MASK = 0x8000000000000000


def _x(*values: int) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())})


def _detached_append(lib: Any, uri: Path, read_version: int, *values: int) -> Any:
    """A detached Append of ``values`` on ``read_version``, committed by ``lib`` (lance or lt)."""
    frag = lib.LanceFragment.create(str(uri), _x(*values))
    commit = lance.LanceDataset.commit if lib is lance else lt.Dataset.commit
    return commit(str(uri), lib.LanceOperation.Append([frag]), read_version=read_version, detached=True)


def _files(uri: Path) -> list[str]:
    return sorted(str(p.relative_to(uri)) for p in uri.rglob("*") if p.is_file())


@pytest.mark.parametrize("writer", ["lance", "lance_table"])
def test_detached_versions_both_ways(tmp_path: Path, writer: str) -> None:
    """The upstream scenario, with each commit made by one library and read by both."""
    lib, other = (lance, lt) if writer == "lance" else (lt, lance)
    uri = tmp_path / "ds"
    lib.write_dataset(_x(0), uri, enable_v2_manifest_paths=True)
    hint = (uri / paths.LATEST_VERSION_HINT).read_bytes()
    detached = _detached_append(lib, uri, 1, 1)
    assert detached.version & MASK
    assert (uri / "_versions" / f"d{detached.version}.manifest").is_file()
    assert (uri / paths.LATEST_VERSION_HINT).read_bytes() == hint
    for reader in (lance, lt):
        ds = reader.dataset(str(uri))
        assert ds.version == ds.latest_version == 1
        assert [v["version"] for v in ds.versions()] == [1]
        assert_tables_equal(ds.checkout_version(detached.version).to_table(), _x(0, 1))
        assert_tables_equal(reader.dataset(str(uri), version=detached.version).to_table(), _x(0, 1))
    # The version line goes on; the detached version stays as it was.
    other.write_dataset(_x(2), uri, mode="append")
    for reader in (lance, lt):
        ds = reader.dataset(str(uri))
        assert_tables_equal(ds.to_table(), _x(0, 2))
        assert_tables_equal(ds.checkout_version(detached.version).to_table(), _x(0, 1))
    # Detached on detached, by the other library; both read it.
    second = _detached_append(other, uri, detached.version, 3)
    assert second.version & MASK and second.version != detached.version
    for reader in (lance, lt):
        ds = reader.dataset(str(uri))
        assert_tables_equal(ds.checkout_version(second.version).to_table(), _x(0, 1, 3))
        assert ds.latest_version == 2
    ours = lt.dataset(str(uri)).checkout_version(second.version)
    assert_tables_equal(ours.to_table(), lance.dataset(str(uri)).checkout_version(second.version).to_table())


def test_detached_overwrite_and_restore(tmp_path: Path) -> None:
    """A detached Overwrite and a detached Restore give what pylance's give, read by both."""
    results = {}
    for name, lib in (("lance", lance), ("lance_table", lt)):
        uri = tmp_path / name
        lance.write_dataset(_x(0), uri, enable_v2_manifest_paths=True)
        lance.write_dataset(_x(1), uri, mode="append")
        commit = lance.LanceDataset.commit if lib is lance else lt.Dataset.commit
        frags = lance.fragment.write_fragments(_x(9), str(uri))
        op = lib.LanceOperation.Overwrite(_x().schema, frags)
        over = commit(str(uri), op, read_version=2, detached=True)
        restored = commit(str(uri), lib.LanceOperation.Restore(1), detached=True)
        assert over.version & MASK and restored.version & MASK
        for reader in (lance, lt):
            ds = reader.dataset(str(uri))
            assert ds.latest_version == 2
            results[name, reader.__name__] = (
                ds.checkout_version(over.version).to_table(),
                ds.checkout_version(restored.version).to_table(),
            )
    for over, restored in results.values():
        assert_tables_equal(over, _x(9))
        assert_tables_equal(restored, _x(0))


@pytest.mark.parametrize("unverified", [False, True])
def test_cleanup_keeps_what_pylance_keeps(tmp_path: Path, unverified: bool) -> None:
    """Cleanup by either library on copies of one dataset leaves the same files: detached
    manifests stay, and the files they need do not count as referenced (so a detached version's
    base data of a removed version goes, while its own young data files stay unless
    ``delete_unverified``)."""
    src = tmp_path / "src"
    lance.write_dataset(_x(0), src, enable_v2_manifest_paths=True)
    before = set(_files(src))
    kept = _detached_append(lance, src, 1, 1)
    made = _detached_append(lt, src, 1, 2)
    own = {p for p in set(_files(src)) - before if p.startswith("data/")}
    assert len(own) == 2
    lance.write_dataset(_x(5), src, mode="overwrite")
    left = {}
    for name in ("lance", "lance_table"):
        uri = tmp_path / name
        shutil.copytree(src, uri)
        ds = (lance if name == "lance" else lt).dataset(str(uri))
        ds.cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=unverified)
        left[name] = _files(uri)
    assert left["lance"] == left["lance_table"]
    for version in (kept.version, made.version):
        assert f"_versions/d{version}.manifest" in left["lance"]
    assert own.isdisjoint(left["lance"]) == unverified
    for reader in (lance, lt):
        ds = reader.dataset(str(tmp_path / "lance_table"))
        assert_tables_equal(ds.to_table(), _x(5))
    # With the default cutoff nothing young goes: the detached versions stay readable.
    for name, lib in (("lance-default", lance), ("lance_table-default", lt)):
        uri = tmp_path / name
        shutil.copytree(src, uri)
        lib.dataset(str(uri)).cleanup_old_versions()
        for reader in (lance, lt):
            detached = reader.dataset(str(uri)).checkout_version(made.version)
            assert_tables_equal(detached.to_table(), _x(0, 2))


def test_bad_input_refused_as_pylance(tmp_path: Path) -> None:
    """A detached version that does not exist, V1 manifest names, no dataset, an attached commit
    on a detached version: typed errors that are OSErrors, as pylance's; nothing written."""
    uri = tmp_path / "ds"
    lance.write_dataset(_x(0), uri, enable_v2_manifest_paths=True)
    missing = MASK | 12345
    for reader in (lance, lt):
        with pytest.raises(OSError):
            reader.dataset(str(uri)).checkout_version(missing)
    with pytest.raises(VersionNotFoundError, match=str(missing)):
        lt.dataset(str(uri)).checkout_version(missing)
    detached = _detached_append(lance, uri, 1, 1)
    for lib in (lance, lt):
        with pytest.raises(OSError):
            _commit(lib, uri, read_version=detached.version)
    with pytest.raises(DetachedCommitError, match="detached"):
        _commit(lt, uri, read_version=detached.version)
    assert [v["version"] for v in lt.dataset(str(uri)).versions()] == [1]
    v1 = tmp_path / "v1"
    lance.write_dataset(_x(0), v1, enable_v2_manifest_paths=False)
    for lib in (lance, lt):
        with pytest.raises(OSError, match="v1 manifest paths"):
            _commit(lib, v1, read_version=1, detached=True)
    with pytest.raises(DetachedCommitError):
        _commit(lt, v1, read_version=1, detached=True)
    assert not [p for p in _files(v1) if p.startswith(("_versions/d", "_transactions/1-"))]
    for lib in (lance, lt):
        new = tmp_path / f"new-{lib.__name__}"
        frags = lib.fragment.write_fragments(_x(0), str(new))
        commit = lance.LanceDataset.commit if lib is lance else lt.Dataset.commit
        with pytest.raises(OSError, match="create"):
            commit(str(new), lib.LanceOperation.Overwrite(_x().schema, frags), detached=True)
        assert not os.path.exists(new / "_versions")


def _commit(lib: Any, uri: Path, **kwargs: Any) -> Any:
    frag = lib.LanceFragment.create(str(uri), _x(5))
    commit = lance.LanceDataset.commit if lib is lance else lt.Dataset.commit
    return commit(str(uri), lib.LanceOperation.Append([frag]), **kwargs)


@pytest.mark.parametrize("writer", ["lance", "lance_table"])
def test_commit_batch_detached(tmp_path: Path, writer: str) -> None:
    """``commit_batch(..., detached=True)``: the merged appends land as one detached version, read
    by both libraries; the version line and its hint stay as they were."""
    lib = lance if writer == "lance" else lt
    uri = tmp_path / "ds"
    lib.write_dataset(_x(0), uri)
    hint = (uri / paths.LATEST_VERSION_HINT).read_bytes()
    txns = [lib.fragment.write_fragments(_x(v), str(uri), return_transaction=True) for v in (1, 2)]
    result = lib.LanceDataset.commit_batch(str(uri), txns, detached=True)
    version = result["dataset"].version
    assert version & MASK and result["merged"].read_version == 1
    assert len(result["merged"].operation.fragments) == 2
    assert (uri / "_versions" / f"d{version}.manifest").is_file()
    assert (uri / paths.LATEST_VERSION_HINT).read_bytes() == hint
    for reader in (lance, lt):
        assert reader.dataset(str(uri)).version == 1
        assert_tables_equal(reader.dataset(str(uri), version=version).to_table(), _x(0, 1, 2))
    # the ordinary line goes on at 2, on top of version 1, not of the detached version
    lt.write_dataset(_x(3), uri, mode="append")
    for reader in (lance, lt):
        assert_tables_equal(reader.dataset(str(uri)).to_table(), _x(0, 3))
