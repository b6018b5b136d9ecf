"""Transactions as pylance's Python API shows them: ``read_transaction``, ``get_transactions``,
``transaction_properties`` on writes, ``Transaction`` commits and ``commit_batch``; manifest naming
(``enable_v2_manifest_paths``, ``migrate_manifest_paths_v2``). Each checked against pylance (the
oracle): what one library writes, the other reads the same way."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import lance.fragment
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.fragment import write_fragments
from lance_table.storage import open_storage
from lance_table.table.operations.manifest_paths import migrate_manifest_paths_v2

pytestmark = pytest.mark.interop

MESSAGE_KEY = "__lance_commit_message"


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"a": pa.array(range(start, start + n), pa.int64())})


def test_transaction_properties_are_stored_as_pylance_stores_them(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for lib, uri in ((lt, ours), (lance, theirs)):
        lib.write_dataset(_rows(0, 3), uri, commit_message="initial")
        lib.write_dataset(
            _rows(3, 3),
            uri,
            mode="append",
            transaction_properties={MESSAGE_KEY: "second", "job": "42"},
        )
        lib.write_dataset(
            _rows(6, 3), uri, mode="append", transaction_properties={"job": "43"}, commit_message="third"
        )
    expected = [
        {MESSAGE_KEY: "initial"},
        {MESSAGE_KEY: "second", "job": "42"},
        {"job": "43", MESSAGE_KEY: "third"},
    ]
    for uri in (ours, theirs):
        for reader in (lance.dataset(uri), lt.dataset(uri)):
            got = [reader.read_transaction(v).transaction_properties for v in (1, 2, 3)]
            assert got == expected


def test_read_transaction_matches_pylance(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(_rows(0, 10), uri, max_rows_per_file=4)
    lt.dataset(uri).delete("a < 2")
    lt.dataset(uri).compact_files()
    lance.dataset(uri).update_config({"k": "v"})
    lt.write_dataset(_rows(10, 2), uri, mode="append")
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    for version in range(1, theirs.version + 1):
        mine, oracle = ours.read_transaction(version), theirs.read_transaction(version)
        assert mine.uuid == oracle.uuid
        assert mine.read_version == oracle.read_version
        assert mine.transaction_properties == oracle.transaction_properties
        # pylance shows kinds without a Python class (ReserveFragments) as a bare BaseOperation
        assert type(mine.operation).__name__ == type(oracle.operation).__name__
    assert isinstance(ours.read_transaction(1).operation.new_schema, lt.LanceSchema)
    append = ours.read_transaction(ours.version).operation
    assert [f.physical_rows for f in append.fragments] == [2]


def test_get_transactions_matches_pylance(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    for i in range(5):
        lt.write_dataset(_rows(i, 1), uri, mode="append" if i else "create")
    for recent in (0, 1, 3, 10):
        mine = lt.dataset(uri).get_transactions(recent)
        oracle = lance.dataset(uri).get_transactions(recent)
        assert [t.uuid for t in mine] == [t.uuid for t in oracle]
    assert [t.read_version for t in lt.dataset(uri).get_transactions()] == [4, 3, 2, 1, 0]
    old = lt.dataset(uri, version=3).get_transactions(2)
    assert [t.read_version for t in old] == [2, 1]


def test_read_transaction_of_a_missing_version(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(_rows(0, 1), uri)
    with pytest.raises(lt.VersionNotFoundError, match="version 9"):
        lt.dataset(uri).read_transaction(9)
    with pytest.raises(OSError):  # as pylance's error
        lt.dataset(uri).read_transaction(9)


def test_a_transaction_commits_with_its_uuid_and_properties(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(_rows(0, 2), uri)
    txn = write_fragments(_rows(2, 2), uri, return_transaction=True)
    txn.transaction_properties = {"writer": "worker-1", MESSAGE_KEY: "from a worker"}
    lt.LanceDataset.commit(uri, txn)
    oracle = lance.dataset(uri).read_transaction(2)
    assert oracle.uuid == txn.uuid
    assert oracle.transaction_properties == txn.transaction_properties
    assert lance.dataset(uri).count_rows() == 4
    # and the reverse: pylance's transaction committed here
    theirs = lance.fragment.write_fragments(_rows(4, 2), uri, return_transaction=True)
    theirs.transaction_properties = {"writer": "pylance"}
    lt.LanceDataset.commit(
        uri,
        lt.Transaction(
            theirs.read_version,
            lt.LanceOperation.Append(theirs.operation.fragments),
            theirs.uuid,
            theirs.transaction_properties,
        ),
    )
    assert lance.dataset(uri).read_transaction(3).transaction_properties == {"writer": "pylance"}
    assert lance.dataset(uri).read_transaction(3).uuid == theirs.uuid
    with pytest.raises(ValueError, match="commit_message"):
        lt.LanceDataset.commit(uri, txn, commit_message="no")


def test_commit_batch_merges_appends_as_pylance(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for lib, uri in ((lt, ours), (lance, theirs)):
        lib.write_dataset(_rows(0, 2), uri)
    ours_txns = [write_fragments(_rows(i * 10, 3), ours, return_transaction=True) for i in (1, 2)]
    theirs_txns = [
        lance.fragment.write_fragments(_rows(i * 10, 3), theirs, return_transaction=True) for i in (1, 2)
    ]
    mine = lt.LanceDataset.commit_batch(ours, ours_txns)
    oracle = lance.LanceDataset.commit_batch(theirs, theirs_txns)
    assert set(mine) == set(oracle) == {"dataset", "merged"}
    assert isinstance(mine["merged"].operation, lt.LanceOperation.Append)
    assert len(mine["merged"].operation.fragments) == len(oracle["merged"].operation.fragments) == 2
    assert lt.dataset(ours).version == lance.dataset(theirs).version == 2
    assert_tables_equal(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())
    delete = lt.Transaction(2, lt.LanceOperation.Delete([], [0], "a < 2"))
    for bad in ([], [delete]):
        with pytest.raises(lt.BatchCommitError) as info:
            lt.LanceDataset.commit_batch(ours, bad)
        assert isinstance(info.value, OSError)  # pylance raises an OSError
    assert lt.dataset(ours).version == 2
    # read versions 2 and 3 (3 does not exist yet): planned against the oldest, as pylance plans it
    for lib, uri in ((lt, ours), (lance, theirs)):
        txns = [
            lib.Transaction(v, lib.LanceOperation.Append(lib.fragment.write_fragments(_rows(v * 10, 2), uri)))
            for v in (2, 3)
        ]
        result = lib.LanceDataset.commit_batch(uri, txns)
        assert result["merged"].read_version == 2
        assert result["dataset"].version == 3
    assert_tables_equal(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())


def _manifest_names(uri: Path) -> list[str]:
    return sorted(p.name for p in (uri / "_versions").iterdir() if p.suffix == ".manifest")


def test_v1_manifest_paths_and_their_migration(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for lib, uri in ((lt, ours), (lance, theirs)):
        lib.write_dataset(_rows(0, 2), uri, enable_v2_manifest_paths=False)
        lib.write_dataset(_rows(2, 2), uri, mode="append", enable_v2_manifest_paths=True)  # ignored now
    assert _manifest_names(ours) == _manifest_names(theirs) == ["1.manifest", "2.manifest"]
    assert_tables_equal(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())
    lt.dataset(ours).migrate_manifest_paths_v2()
    lance.dataset(theirs).migrate_manifest_paths_v2()
    assert _manifest_names(ours) == _manifest_names(theirs)
    assert len(_manifest_names(ours)) == 2 and all(len(n) == 29 for n in _manifest_names(ours))
    lt.dataset(ours).migrate_manifest_paths_v2()  # idempotent
    for reader in (lance.dataset, lt.dataset):
        assert reader(ours, version=1).count_rows() == 2
        assert reader(ours).count_rows() == 4
    lt.write_dataset(_rows(4, 1), ours, mode="append")
    assert lance.dataset(ours).version == 3 and len(_manifest_names(ours)) == 3


def test_a_commit_creating_a_dataset_names_its_manifests(tmp_path: Path) -> None:
    for enabled, name in ((False, "1.manifest"), (None, "18446744073709551614.manifest")):
        uri = tmp_path / f"ds-{enabled}"
        frags = write_fragments(_rows(0, 2), uri)
        op = lt.LanceOperation.Overwrite(_rows(0, 1).schema, frags)
        lt.LanceDataset.commit(uri, op, enable_v2_manifest_paths=enabled)
        assert _manifest_names(uri) == [name]
        assert lance.dataset(uri).count_rows() == 2


def test_an_interrupted_migration_finishes_when_run_again(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(_rows(0, 2), uri, enable_v2_manifest_paths=False)
    lt.write_dataset(_rows(2, 2), uri, mode="append")
    copy = tmp_path / "copy"
    shutil.copytree(uri, copy)
    # as if a run copied version 1 to its new name and stopped there
    (uri / "_versions" / "18446744073709551614.manifest").write_bytes(
        (uri / "_versions" / "1.manifest").read_bytes()
    )
    lt.dataset(copy).migrate_manifest_paths_v2()
    # the directory mixes the two schemes: the migration runs on the store itself
    migrate_manifest_paths_v2(open_storage(str(uri)))
    assert _manifest_names(uri) == _manifest_names(copy)
    assert lance.dataset(uri).count_rows() == lt.dataset(uri).count_rows() == 4
