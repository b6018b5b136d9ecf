"""The fragment and commit contract of distributed writes (Ray, lance-ray, Daft): workers write
fragments, a driver commits them; metadata crosses between processes and between lance_table and
pylance (the oracle) as JSON, both ways."""

from __future__ import annotations

import json
import multiprocessing as mp
import pickle
from pathlib import Path

import lance
import lance.fragment
import pyarrow as pa
import pytest
from fragment_workers import lance_table_worker, make_rows, pylance_worker
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.fragment import DeletionFile, FragmentMetadata, write_fragments

pytestmark = pytest.mark.interop


def _files(uri: Path) -> set[str]:
    return {str(p.relative_to(uri)) for p in uri.rglob("*") if p.is_file()}


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by("id")


def _both_read(uri: Path, expected: pa.Table) -> None:
    assert_tables_equal(_sorted(lt.dataset(uri).to_table()), _sorted(expected), check_metadata=False)
    assert_tables_equal(_sorted(lance.dataset(uri).to_table()), _sorted(expected), check_metadata=False)


@pytest.mark.parametrize("worker", [lance_table_worker, pylance_worker], ids=["ours", "pylance"])
def test_workers_in_processes_write_and_a_driver_commits(tmp_path: Path, worker) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 100), uri)
    with mp.get_context("spawn").Pool(2) as pool:
        parts = pool.map(worker, [(str(uri), 1000 * (k + 1), 250) for k in range(3)])
    metas = [FragmentMetadata.from_json(text) for part in parts for text in part]
    assert len(metas) == 9 and all(m.id == 0 for m in metas)
    ds = lt.LanceDataset.commit(str(uri), lt.LanceOperation.Append(metas), read_version=1)
    assert ds.version == 2 and len(ds.get_fragments()) == 10
    assert [f.fragment_id for f in ds.get_fragments()] == list(range(10))
    expected = pa.concat_tables([make_rows(0, 100)] + [make_rows(1000 * (k + 1), 250) for k in range(3)])
    _both_read(uri, expected)


def test_our_fragments_committed_by_pylance(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lance.write_dataset(make_rows(0, 50), uri)
    ours = write_fragments(make_rows(100, 150), str(uri), max_rows_per_file=100)
    assert isinstance(ours, list)
    theirs = [lance.fragment.FragmentMetadata.from_json(json.dumps(m.to_json())) for m in ours]
    lance.LanceDataset.commit(str(uri), lance.LanceOperation.Append(theirs), read_version=1)
    _both_read(uri, pa.concat_tables([make_rows(0, 50), make_rows(100, 150)]))


def test_pylance_fragments_committed_by_us(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 50), uri)
    theirs = lance.fragment.write_fragments(make_rows(100, 150), str(uri), max_rows_per_file=100)
    ours = [FragmentMetadata.from_json(json.dumps(m.to_json())) for m in theirs]
    assert [m.to_json() for m in ours] == [m.to_json() for m in theirs]
    lt.LanceDataset.commit(str(uri), lt.LanceOperation.Append(ours), read_version=1)
    # pylance's own metadata objects are taken too (converted through their JSON)
    more = lance.fragment.write_fragments(make_rows(500, 10), str(uri))
    lt.LanceDataset.commit(str(uri), lt.LanceOperation.Append(more), read_version=2)
    _both_read(uri, pa.concat_tables([make_rows(0, 50), make_rows(100, 150), make_rows(500, 10)]))


def test_metadata_json_is_pylances(tmp_path: Path) -> None:
    """Deletion files and stable row ids included: the same fragment gives the same JSON text."""
    uri = tmp_path / "ds"
    lance.write_dataset(make_rows(0, 300), uri, max_rows_per_file=100, enable_stable_row_ids=True)
    lance.dataset(uri).delete("id % 7 = 0")
    ours, theirs = lt.dataset(uri).get_fragments(), lance.dataset(uri).get_fragments()
    for a, b in zip(ours, theirs, strict=True):
        assert json.dumps(a.metadata.to_json()) == json.dumps(b.metadata.to_json())
        back = FragmentMetadata.from_json(json.dumps(b.metadata.to_json()))
        assert back == a.metadata and back.to_fragment() == lt.dataset(uri).manifest.fragments[a.fragment_id]
        assert pickle.loads(pickle.dumps(a.metadata)) == a.metadata
        assert a.deletion_file() == b.deletion_file()
        assert a.metadata.deletion_file is not None
        assert a.metadata.deletion_file.path(a.fragment_id) == b.metadata.deletion_file.path(b.fragment_id)
    assert (
        DeletionFile(1, 5, "bitmap", 1).asdict()
        == lance.fragment.DeletionFile(1, 5, "bitmap", 1, None).asdict()
    )


def test_fragments_read_as_pylance_reads_them(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lance.write_dataset(make_rows(0, 300), uri, max_rows_per_file=100)
    lance.dataset(uri).delete("id % 5 = 0")
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    assert ours.get_fragment(7) is None and theirs.get_fragment(7) is None
    for a, b in zip(ours.get_fragments(), theirs.get_fragments(), strict=True):
        assert a.fragment_id == b.fragment_id and a.physical_rows == b.physical_rows
        assert a.count_rows() == b.count_rows() and a.count_rows("id > 150") == b.count_rows("id > 150")
        assert [f.path for f in a.data_files()] == [f.path for f in b.data_files()]
        assert_tables_equal(a.to_table(), b.to_table())
        assert_tables_equal(
            a.to_table(columns=["s"], filter="id > 120"), b.to_table(columns=["s"], filter="id > 120")
        )
        assert_tables_equal(pa.Table.from_batches(list(a.to_batches(batch_size=7))), b.to_table())
    picked = [ours.get_fragment(2), ours.get_fragment(0)]
    theirs_picked = [theirs.get_fragment(2), theirs.get_fragment(0)]
    expected = theirs.scanner(fragments=theirs_picked).to_table()  # pylance's to_table has no fragments=
    assert_tables_equal(ours.to_table(fragments=picked), expected)
    assert_tables_equal(ours.to_batches(fragments=picked).read_all(), expected)
    again = pickle.loads(pickle.dumps(ours.get_fragment(1)))
    assert_tables_equal(again.to_table(), theirs.get_fragment(1).to_table())


def test_two_drivers_on_one_read_version_both_land(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    first = write_fragments(make_rows(100, 10), str(uri))
    second = lance.fragment.write_fragments(make_rows(200, 10), str(uri))
    lt.LanceDataset.commit(str(uri), lt.LanceOperation.Append(first), read_version=1)
    ds = lt.LanceDataset.commit(str(uri), lt.LanceOperation.Append(second), read_version=1)  # rebased
    assert ds.version == 3 and [f.fragment_id for f in ds.get_fragments()] == [0, 1, 2]
    third = write_fragments(make_rows(300, 10), str(uri))
    theirs = [lance.fragment.FragmentMetadata.from_json(json.dumps(m.to_json())) for m in third]
    lance.LanceDataset.commit(str(uri), lance.LanceOperation.Append(theirs), read_version=1)
    _both_read(uri, pa.concat_tables([make_rows(k, 10) for k in (0, 100, 200, 300)]))


def test_overwrite_creates_and_transactions_commit(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    txn = write_fragments(make_rows(0, 30), str(uri), max_rows_per_file=10, return_transaction=True)
    assert isinstance(txn, lt.Transaction) and isinstance(txn.operation, lt.LanceOperation.Overwrite)
    ds = lt.LanceDataset.commit(str(uri), txn)
    assert ds.version == 1 and len(ds.get_fragments()) == 3
    txn = write_fragments(make_rows(30, 5), ds, return_transaction=True)
    assert isinstance(txn, lt.Transaction) and isinstance(txn.operation, lt.LanceOperation.Append)
    lt.LanceDataset.commit(ds, txn)
    metas = write_fragments(make_rows(90, 5), str(uri), mode="overwrite")
    new = make_rows(90, 5)
    ds = lt.LanceDataset.commit(str(uri), lt.LanceOperation.Overwrite(new.schema, metas))
    _both_read(uri, new)
    ds = lt.LanceDataset.commit(str(uri), lt.LanceOperation.Restore(2))
    _both_read(uri, make_rows(0, 35))


def test_delete_and_rewrite_made_by_pylance_workers(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 40), uri, max_rows_per_file=10)
    theirs = lance.dataset(uri)
    updated, removed = [], []
    for frag in theirs.get_fragments():
        new = frag.delete("id % 4 = 0 OR id < 10")
        if new is None:
            removed.append(frag.fragment_id)
        else:
            updated.append(FragmentMetadata.from_json(json.dumps(new.to_json())))
    lt.write_dataset(make_rows(100, 10), uri, mode="append")  # a concurrent append: the delete rebases
    op = lt.LanceOperation.Delete(updated, removed, "id % 4 = 0 OR id < 10")
    ds = lt.LanceDataset.commit(str(uri), op, read_version=1)
    kept = [i for i in range(40) if i % 4 and i >= 10] + list(range(100, 110))
    _both_read(uri, make_rows(0, 110).filter(pa.compute.is_in(make_rows(0, 110)["id"], pa.array(kept))))
    # compaction by hand: two fragments into one
    old = [ds.get_fragment(1).metadata, ds.get_fragment(2).metadata]
    rows = ds.to_table(fragments=[ds.get_fragment(1), ds.get_fragment(2)])
    new = write_fragments(rows, ds)
    group = lt.LanceOperation.RewriteGroup(old, new)
    ds = lt.LanceDataset.commit(str(uri), lt.LanceOperation.Rewrite([group]), read_version=ds.version)
    assert [f.fragment_id for f in ds.get_fragments()] == [5, 3, 4]
    _both_read(uri, make_rows(0, 110).filter(pa.compute.is_in(make_rows(0, 110)["id"], pa.array(kept))))


def _refused(uri: Path, error: type[BaseException], op: object, read_version: int | None = 1) -> None:
    before, version = _files(uri), lt.dataset(uri).version
    with pytest.raises(error):
        lt.LanceDataset.commit(str(uri), op, read_version=read_version)  # type: ignore[arg-type]
    assert lt.dataset(uri).version == version and lance.dataset(uri).version == version
    assert _files(uri) == before


def test_bad_inputs_are_typed_errors_and_change_nothing(tmp_path: Path) -> None:
    uri, other = tmp_path / "ds", tmp_path / "other"
    lt.write_dataset(make_rows(0, 10), uri)
    foreign = write_fragments(make_rows(10, 10), str(other))
    _refused(uri, lt.DataFileNotFoundError, lt.LanceOperation.Append(foreign))
    good = write_fragments(make_rows(10, 10), str(uri))
    _refused(uri, lt.VersionNotFoundError, lt.LanceOperation.Append(good), read_version=7)
    _refused(uri, ValueError, lt.LanceOperation.Append(good), read_version=None)
    wrong = pa.schema([("id", pa.int32()), ("s", pa.string()), ("tags", pa.list_(pa.string()))])
    _refused(uri, lt.SchemaError, lt.LanceOperation.Overwrite(wrong, good))
    # (an Overwrite that renames the columns lands, as in pylance: see test_commit_fragment_checks.py)
    lying = [FragmentMetadata.from_json({**good[0].to_json(), "physical_rows": 11})]
    _refused(uri, lt.CorruptFileError, lt.LanceOperation.Append(lying))
    with pytest.deprecated_call():  # (a pyarrow schema, as in pylance)
        merge = lt.LanceOperation.Merge(good, wrong)
    _refused(uri, lt.SchemaError, merge)
    _refused(uri, TypeError, lt.LanceOperation.Project(wrong))
    with pytest.raises(lt.DatasetNotFoundError):
        lt.LanceDataset.commit(str(tmp_path / "none"), lt.LanceOperation.Append(good), read_version=1)
    with pytest.raises(TypeError):
        lt.LanceOperation.Append(good[0])  # type: ignore[arg-type]
    # the fragments were fine all along
    lt.LanceDataset.commit(str(uri), lt.LanceOperation.Append(good), read_version=1)
    _both_read(uri, make_rows(0, 20))


def test_deprecated_pylance_spellings_still_work_and_warn(tmp_path: Path) -> None:
    """pylance's older calls: ``DataFile.path()``, ``field_ids()``, ``FragmentMetadata.data_files()``
    and ``Merge`` with a pyarrow schema work, with pylance's DeprecationWarning."""
    table = pa.table({"a": range(10)})
    lt.write_dataset(table, tmp_path)
    metadata = lt.dataset(tmp_path).get_fragment(0).metadata
    data_file = metadata.files[0]
    with pytest.warns(DeprecationWarning):
        assert data_file.path() == data_file.path
    with pytest.warns(DeprecationWarning):
        assert data_file.field_ids() == data_file.fields == [0]
    with pytest.warns(DeprecationWarning):
        assert metadata.data_files() == metadata.files
    assert pickle.loads(pickle.dumps(data_file)) == data_file and json.dumps(metadata.to_json())
    with pytest.warns(DeprecationWarning):  # (unpickled too, as pylance's)
        assert pickle.loads(pickle.dumps(metadata)).files[0].path() == data_file.path
    merged, _ = lt.dataset(tmp_path).get_fragment(0).merge_columns(lambda b: pa.record_batch([b["a"]], ["c"]))
    with pytest.deprecated_call():
        merge = lt.LanceOperation.Merge([merged], pa.schema([("a", pa.int64()), ("c", pa.int64())]))
    ds = lt.LanceDataset.commit(tmp_path, merge, read_version=1)
    assert ds.to_table().to_pydict() == {"a": list(range(10)), "c": list(range(10))}
