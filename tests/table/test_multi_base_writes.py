"""Writes to multi-base datasets (pylance's ``initial_bases``, ``target_bases``,
``target_all_bases``, ``add_bases``) and to shallow clones, checked against pylance both ways."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_table as lt
from lance_table.format import flags

pytestmark = pytest.mark.interop


def _rows(start: int, n: int) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "s": pc.cast(ids, pa.string())})


def _files(where: Path) -> set[str]:
    return {str(p.relative_to(where)) for p in where.rglob("*.lance")} if where.exists() else set()


def _same_as_pylance(uri: Path) -> pa.Table:
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    table = ours.to_table().sort_by("id")
    assert table.equals(theirs.to_table().sort_by("id"))
    mine = {i: (b.name, b.path, b.is_dataset_root) for i, b in ours.base_paths().items()}
    assert mine == {i: (b.name, b.path, b.is_dataset_root) for i, b in theirs.base_paths().items()}
    return table


def test_we_write_bases_pylance_reads_them_and_appends(tmp_path: Path) -> None:
    uri = tmp_path / "main"
    bases = [lt.DatasetBasePath(str(tmp_path / "p1"), name="p1"), lt.DatasetBasePath(str(tmp_path / "p2"))]
    bases.append(lt.DatasetBasePath(str(tmp_path / "root"), name="root", is_dataset_root=True))
    ds = lt.write_dataset(
        _rows(0, 10), uri, initial_bases=bases, target_bases=["p1", "root"], max_rows_per_file=3
    )
    assert {i: b.name for i, b in ds.base_paths().items()} == {1: "p1", 2: None, 3: "root"}
    assert [f.data_files()[0].base_id for f in ds.get_fragments()] == [1, 3, 1, 3]
    assert len(_files(tmp_path / "p1")) == 2 and len(_files(tmp_path / "root" / "data")) == 2
    assert not _files(uri)  # nothing in the dataset's own directory
    ds = lt.write_dataset(_rows(10, 5), ds, mode="append", target_bases=[str(tmp_path / "p2")])
    assert ds.add_bases([lt.DatasetBasePath(str(tmp_path / "p4"), name="p4")], {"who": "test"}) is ds
    assert ds.read_transaction(ds.version).transaction_properties == {"who": "test"}
    ds = lt.write_dataset(_rows(15, 5), ds, mode="append", target_bases=["p4"])
    ds = lt.write_dataset(_rows(20, 5), ds, mode="append")  # no target: the dataset's own directory
    assert [f.data_files()[0].base_id for f in ds.get_fragments()][4:] == [2, 4, None]
    assert ds.manifest.writer_feature_flags & flags.BASE_PATHS
    assert _same_as_pylance(uri).equals(_rows(0, 25))
    lance.write_dataset(_rows(25, 5), uri, mode="append", target_bases=["p4"])
    assert len(_files(tmp_path / "p4")) == 2
    assert _same_as_pylance(uri).equals(_rows(0, 30))


def test_pylance_writes_bases_we_append_delete_compact_and_clean_up(tmp_path: Path) -> None:
    uri = tmp_path / "main"
    bases = [
        lance.DatasetBasePath(str(tmp_path / "p1"), name="p1"),
        lance.DatasetBasePath(str(tmp_path / "p2")),
    ]
    lance.write_dataset(_rows(0, 10), uri, initial_bases=bases, target_bases=["p1"], max_rows_per_file=4)
    ds = lt.write_dataset(_rows(10, 6), uri, mode="append", target_bases=[str(tmp_path / "p2")])
    in_bases = _files(tmp_path / "p1") | _files(tmp_path / "p2")
    assert len(in_bases) == 4
    ds.delete("id % 3 = 0")
    ds.optimize.compact_files()  # the rewritten rows go to the dataset's own directory, as pylance's
    assert {d.base_id for f in ds.get_fragments() for d in f.data_files()} == {None}
    stats = ds.cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert stats.old_versions > 0
    assert _files(tmp_path / "p1") | _files(tmp_path / "p2") == in_bases  # never outside its own
    expected = _rows(0, 16).filter(pa.array([i % 3 != 0 for i in range(16)]))
    assert _same_as_pylance(uri).equals(expected)
    lance.dataset(uri).validate()


def test_a_base_that_is_the_dataset_itself_keeps_its_files_through_cleanup(tmp_path: Path) -> None:
    """pylance keeps files by name: a base registered at the dataset's own directory loses nothing."""
    uri = tmp_path / "main"
    base = lt.DatasetBasePath(str(uri), name="self", is_dataset_root=True)
    ds = lt.write_dataset(_rows(0, 4), uri, initial_bases=[base], target_bases=["self"])
    ds = lt.write_dataset(_rows(4, 4), ds, mode="append")
    ds.cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert _same_as_pylance(uri).equals(_rows(0, 8))


def test_same_writes_same_layout_as_pylance(tmp_path: Path) -> None:
    layouts = []
    for lib in (lt, lance):
        root = tmp_path / lib.__name__
        bases = [lib.DatasetBasePath(str(root / n), name=n) for n in ("a", "b")]
        ds = lib.write_dataset(_rows(0, 6), root / "ds", initial_bases=bases, max_rows_per_file=2)
        ds = lib.write_dataset(_rows(6, 6), ds, mode="append", target_all_bases=True, max_rows_per_file=2)
        ds = lib.write_dataset(_rows(12, 6), ds, mode="append", target_all_bases=False, max_rows_per_file=2)
        ds = lib.write_dataset(_rows(18, 2), root / "ds", mode="overwrite", target_bases=["b"])
        layouts.append(([f.data_files()[0].base_id for f in ds.get_fragments()], sorted(ds.base_paths())))
        layouts.append(
            [
                (f.data_files()[0].base_id)
                for f in lib.dataset(root / "ds").checkout_version(3).get_fragments()
            ]
        )
    assert layouts[0] == layouts[2] and layouts[1] == layouts[3]
    assert layouts[1] == [None, None, None, None, 1, 2, 1, 2, 1]


def test_shallow_clone_takes_writes(tmp_path: Path) -> None:
    source = tmp_path / "source"
    lance.write_dataset(_rows(0, 10), source, max_rows_per_file=5)
    lance.dataset(source).delete("id = 2")
    clone = tmp_path / "clone"
    lance.dataset(source).shallow_clone(clone, 2)
    before = _files(source)
    ds = lt.write_dataset(_rows(10, 5), clone, mode="append")
    ds.delete("id IN (3, 11)")
    ds.optimize.compact_files()
    ds.cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    expected = _rows(0, 15).filter(pc.invert(pc.is_in(_rows(0, 15)["id"], pa.array([2, 3, 11]))))
    assert _same_as_pylance(clone).equals(expected)
    assert _files(source) == before and lance.dataset(source).count_rows() == 9


def test_the_commit_api_registers_bases_and_takes_fragments_in_them(tmp_path: Path) -> None:
    uri = tmp_path / "main"
    base = lt.DatasetBasePath(str(tmp_path / "p1"), name="p1")
    frags = lt.fragment.write_fragments(_rows(0, 4), uri, mode="overwrite")
    op = lt.LanceOperation.Overwrite(_rows(0, 0).schema, frags, initial_bases=[base])
    ds = lt.LanceDataset.commit(uri, op)
    assert ds.read_transaction(1).operation.initial_bases == [base.with_id(1)]
    theirs = lance.fragment.write_fragments(_rows(4, 4), str(uri), target_bases=["p1"])
    assert theirs[0].files[0].base_id == 1
    ds = lt.LanceDataset.commit(uri, lt.LanceOperation.Append(theirs), read_version=ds.version)
    assert _same_as_pylance(uri).equals(_rows(0, 8))


def test_bad_bases_are_typed_errors_naming_them(tmp_path: Path) -> None:
    uri = tmp_path / "main"
    p1, p2 = str(tmp_path / "p1"), str(tmp_path / "p2")
    with pytest.raises(lt.BasePathError, match="'nope' not found") as err:
        lt.write_dataset(
            _rows(0, 4), uri, initial_bases=[lt.DatasetBasePath(p1, name="p1")], target_bases=["nope"]
        )
    assert isinstance(err.value, OSError) and err.value.reference == "nope"
    assert not uri.exists() and not _files(tmp_path)
    with pytest.raises(lt.BasePathError, match="p1") as err:
        twice = [lt.DatasetBasePath(p1, name="a"), lt.DatasetBasePath(p1, name="b")]
        lt.write_dataset(_rows(0, 4), uri, initial_bases=twice)
    assert err.value.reference == p1
    ds = lt.write_dataset(_rows(0, 4), uri, initial_bases=[lt.DatasetBasePath(p1, name="p1")])
    version = ds.version
    with pytest.raises(ValueError, match="already exists"):
        ds.add_bases([lt.DatasetBasePath(p2, name="p1")])
    with pytest.raises(lt.BasePathError, match="already exists"):
        ds.add_bases([lt.DatasetBasePath(p1, name="other")])
    with pytest.raises(lt.BasePathError, match="id 1"):
        ds.add_bases([lt.DatasetBasePath(p2, name="p2", id=1)])
    with pytest.raises(TypeError):
        ds.add_bases([p2])  # type: ignore[list-item]
    with pytest.raises(lt.BasePathError, match="Cannot register new bases in Append mode"):
        lt.write_dataset(_rows(4, 4), ds, mode="append", initial_bases=[lt.DatasetBasePath(p2)])
    with pytest.raises(lt.BasePathError, match="target_all_bases"):
        lt.write_dataset(_rows(4, 4), ds, mode="append", target_bases=["p1"], target_all_bases=True)
    assert lt.dataset(uri).version == version
    # a fragment naming a base id the dataset does not register
    frags = lance.fragment.write_fragments(_rows(4, 4), str(uri), target_bases=["p1"])
    frags[0].files[0].base_id = 9
    with pytest.raises(lt.BasePathError, match="base path 9") as err:
        lt.LanceDataset.commit(uri, lt.LanceOperation.Append(frags), read_version=version)
    assert err.value.reference == "9" and lt.dataset(uri).version == version


def test_a_failed_write_leaves_nothing_in_the_bases(tmp_path: Path) -> None:
    uri = tmp_path / "main"
    ds = lt.write_dataset(
        _rows(0, 4), uri, initial_bases=[lt.DatasetBasePath(str(tmp_path / "p1"), name="p1")]
    )

    def failing() -> Iterator[pa.RecordBatch]:
        yield from _rows(4, 4).to_batches()
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        reader = pa.RecordBatchReader.from_batches(_rows(0, 0).schema, failing())
        lt.write_dataset(reader, ds, mode="append", target_bases=["p1"], max_rows_per_file=2)
    assert not _files(tmp_path / "p1") and lt.dataset(uri).version == ds.version


def test_our_workers_write_fragments_into_bases_a_pylance_driver_commits(tmp_path: Path) -> None:
    uri = tmp_path / "main"
    base = lt.DatasetBasePath(str(tmp_path / "p1"), name="p1", is_dataset_root=True)
    txn = lt.fragment.write_fragments(
        _rows(0, 4), uri, initial_bases=[base], target_bases=["p1"], return_transaction=True
    )
    assert txn.operation.initial_bases == [base.with_id(1)]
    ds = lt.LanceDataset.commit(uri, txn.operation)
    metas = lt.fragment.write_fragments(_rows(4, 4), uri, target_all_bases=True, max_rows_per_file=2)
    assert [m.files[0].base_id for m in metas] == [None, 1]
    theirs = [lance.fragment.FragmentMetadata.from_json(json.dumps(m.to_json())) for m in metas]
    lance.LanceDataset.commit(str(uri), lance.LanceOperation.Append(theirs), read_version=ds.version)
    assert _same_as_pylance(uri).equals(_rows(0, 8))
    lt.dataset(uri).validate()
    next((tmp_path / "p1" / "data").glob("*.lance")).unlink()
    with pytest.raises(lt.DataFileNotFoundError, match="p1/data/"):
        lt.dataset(uri).validate()


def test_merge_insert_targets_bases_as_pylance(tmp_path: Path) -> None:
    results = []
    for lib in (lt, lance):
        root = tmp_path / lib.__name__
        base = lib.DatasetBasePath(str(root / "a"), name="a")
        uri = str(root / "ds")
        targets = [uri, "a"]  # the dataset's URI: its own directory
        lib.write_dataset(_rows(0, 4), uri, initial_bases=[base], target_bases=targets, max_rows_per_file=2)
        ds = lib.dataset(uri)
        stats = [ds.merge_insert("id").when_not_matched_insert_all().target_bases(["a"]).execute(_rows(4, 3))]
        ds = lib.dataset(uri)
        merge = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
        stats.append(merge.target_all_bases().execute(_rows(6, 3)))
        ds = lib.dataset(uri)
        results.append(([f.data_files()[0].base_id for f in ds.get_fragments()], stats))
    assert results[0] == results[1] and results[0][0] == [None, 1, 1, None]
    assert _same_as_pylance(tmp_path / "lance_table" / "ds").equals(_rows(0, 9))


def test_our_shallow_clones_are_pylances(tmp_path: Path) -> None:
    layouts = []
    for lib in (lt, lance):
        root = tmp_path / lib.__name__
        base = lib.DatasetBasePath(str(root / "b1"), name="b1")
        ds = lib.write_dataset(
            _rows(0, 6), root / "src", initial_bases=[base], target_bases=["b1"], max_rows_per_file=3
        )
        ds = lib.write_dataset(_rows(6, 3), ds, mode="append")
        ds.delete("id = 1")
        ds.tags.create("t1", 2)
        clones = [ds.shallow_clone(root / "c1", 3), ds.shallow_clone(root / "c2", "t1")]
        clones.append(lib.dataset(root / "c1").shallow_clone(root / "c3", (None, 3)))
        layouts.append(
            [
                (
                    c.version,
                    {i: (b.name, b.is_dataset_root, Path(b.path).name) for i, b in c.base_paths().items()},
                    [[d.base_id for d in f.data_files()] for f in c.get_fragments()],
                    c.to_table().num_rows,
                )
                for c in clones
            ]
        )
        txn = lance.dataset(root / "c1").read_transaction(3)
        assert (txn.operation.ref_version, txn.operation.ref_path) == (3, str(root / "src"))
    assert layouts[0] == layouts[1]
    clone = tmp_path / "lance_table" / "c3"
    ds = lt.write_dataset(_rows(9, 2), clone, mode="append")
    ds.delete("id = 0")
    expected = _rows(1, 10).filter(pa.array([i != 1 for i in range(1, 11)]))
    assert _same_as_pylance(clone).equals(expected)
    with pytest.raises(lt.DatasetAlreadyExistsError):
        ds.shallow_clone(tmp_path / "lance_table" / "c1", 3)
    with pytest.raises(lt.BranchError, match="branch 'dev'"):  # no such branch
        ds.shallow_clone(tmp_path / "c9", ("dev", 1))


def test_validate_checks_files_in_the_source_of_a_clone(tmp_path: Path) -> None:
    ds = lt.write_dataset(_rows(0, 4), tmp_path / "src")
    ds.delete("id = 0")
    clone = ds.shallow_clone(tmp_path / "clone", ds.version)
    clone.validate()
    next((tmp_path / "src" / "_deletions").iterdir()).unlink()
    with pytest.raises(lt.DataFileNotFoundError, match="src/_deletions/"):
        clone.validate()


def test_concurrent_add_bases_both_land_and_a_clash_is_named(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    lt.write_dataset(_rows(0, 2), uri)
    first, second, third = (lt.dataset(uri) for _ in range(3))
    first.add_bases([lt.DatasetBasePath(str(tmp_path / "x"), name="x")])
    second.add_bases([lt.DatasetBasePath(str(tmp_path / "y"), name="y")])  # rebased over the first
    with pytest.raises(lt.BasePathError, match="'x' already exists"):
        third.add_bases([lt.DatasetBasePath(str(tmp_path / "z"), name="x")])
    assert {i: b.name for i, b in lance.dataset(uri).base_paths().items()} == {1: "x", 2: "y"}
    assert third.version == 1 and lt.dataset(uri).version == 3


def test_a_merge_insert_whose_commit_conflicts_leaves_nothing_in_the_bases(tmp_path: Path) -> None:
    uri = tmp_path / "main"
    bases = [lt.DatasetBasePath(str(tmp_path / "p1"), name="p1", is_dataset_root=True)]
    stale = lt.write_dataset(_rows(0, 4), uri, initial_bases=bases)
    lt.dataset(uri).update({"s": "'x'"}, where="id = 1")  # rewrites the fragment the merge changes
    before = lt.dataset(uri).to_table().sort_by("id")
    merge = stale.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    with pytest.raises(lt.CommitConflictError):
        merge.target_bases(["p1"]).conflict_retries(0).execute(_rows(2, 4))
    assert not _files(tmp_path / "p1")
    assert _same_as_pylance(uri).equals(before) and lt.dataset(uri).version == stale.version + 1
    lt.dataset(uri).validate()
    # a dry run (analyze_plan) removes its files in the bases too
    stale = lt.dataset(uri)
    stale.merge_insert("id").when_not_matched_insert_all().target_bases(["p1"]).analyze_plan(_rows(9, 2))
    assert not _files(tmp_path / "p1") and lt.dataset(uri).version == stale.version


def test_a_write_that_fails_at_its_commit_leaves_nothing_in_the_bases(tmp_path: Path) -> None:
    uri = tmp_path / "main"
    base = lt.DatasetBasePath(str(tmp_path / "p1"), name="p1")

    def refusing_lock(version: int) -> Iterator[None]:
        raise RuntimeError("lock refused")

    lock = contextlib.contextmanager(refusing_lock)
    with pytest.raises(RuntimeError, match="lock refused"):
        lt.write_dataset(_rows(0, 4), uri, initial_bases=[base], target_bases=["p1"], commit_lock=lock)
    assert not _files(tmp_path / "p1") and not _files(uri)


@pytest.mark.s3
def test_a_base_on_another_store_takes_its_own_options_as_pylances(
    tmp_path: Path, s3_uri: str, s3_options: dict[str, str]
) -> None:
    """A local dataset with a base on S3 whose options only ``base_store_params`` (or the
    ``base_<id>.`` storage options) give: written, read, pickled, committed by both libraries."""
    uri, params = str(tmp_path / "main"), {s3_uri: s3_options}
    base = lt.DatasetBasePath(s3_uri, name="s3")
    ds = lt.write_dataset(
        _rows(0, 4), uri, initial_bases=[base], target_bases=["s3"], base_store_params=params
    )
    assert ds.to_table().equals(_rows(0, 4)) and not _files(Path(uri) / "data")
    assert pickle.loads(pickle.dumps(ds)).to_table().equals(_rows(0, 4))
    lance.write_dataset(_rows(4, 2), uri, mode="append", target_bases=["s3"], base_store_params=params)
    ds = lt.dataset(uri, base_store_params=params)
    ds.merge_insert("id").when_not_matched_insert_all().target_bases(["s3"]).execute(_rows(6, 2))
    metas = lt.fragment.write_fragments(_rows(8, 2), ds, target_bases=["s3"])
    ds = lt.LanceDataset.commit(uri, lt.LanceOperation.Append(metas), ds.version, base_store_params=params)
    assert [f.data_files()[0].base_id for f in ds.get_fragments()] == [1] * 4
    theirs = lance.dataset(uri, base_store_params=params).to_table()
    assert ds.to_table().equals(_rows(0, 10)) and theirs.equals(_rows(0, 10))
    prefixed = {f"base_1.{k}": v for k, v in s3_options.items()}  # pylance's per-base options
    assert lt.dataset(uri, storage_options=prefixed).to_table().equals(_rows(0, 10))
    lt.dataset(uri, storage_options=prefixed).validate()
    with pytest.raises(lt.StorageOptionsError, match="base_store_params"):
        lt.dataset(uri, base_store_params={s3_uri: "key=value"})


def _blob_rows(start: int) -> pa.Table:
    """Blob v2 rows of every kind (small thresholds): inline, packed, dedicated, empty and null."""
    md = {
        "lance-encoding:blob": "true",
        "lance-encoding:blob-inline-size-threshold": "64",
        "lance-encoding:blob-dedicated-size-threshold": "2000",
    }
    values = [b"abc", bytes(range(200)), b"d" * 3000, b"", None]
    field = pa.field("b", pa.large_binary(), metadata=md)
    ids = pa.array(range(start, start + len(values)), pa.int64())
    schema = pa.schema([pa.field("id", pa.int64()), field])
    return pa.table({"id": ids, "b": pa.array(values, pa.large_binary())}, schema=schema)


def _blob_layout(root: Path) -> tuple[list[str], dict[str, list[str]]]:
    """Per base: the data files' directories and the sidecar names next to each (stems aside)."""
    out = {}
    for base in ("ds", "p0", "p1"):
        found = sorted(root.glob(f"{base}/**/*.blob"))
        out[base] = sorted(f"{p.parent.parent.relative_to(root)}/<stem>/{p.name}" for p in found)
    return sorted(str(p.parent.relative_to(root)) for p in root.glob("*/**/*.lance")), out


@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_blob_v2_sidecars_sit_in_their_base_as_pylances(tmp_path: Path, writer: str) -> None:
    """Blob v2 values written to other bases (a plain one and a dataset root): sidecars next to
    their data file, in its base, as pylance puts them; each library reads and appends to what
    the other wrote."""
    layouts, libs = [], {"lance_table": lt, "pylance": lance}
    for name, lib in libs.items():
        root = tmp_path / name
        bases = [
            lib.DatasetBasePath(str(root / "p0"), name="p0"),
            lib.DatasetBasePath(str(root / "p1"), name="p1", is_dataset_root=True),
        ]
        opts = {"initial_bases": bases, "target_bases": ["p0", "p1"], "max_rows_per_file": 5}
        table = pa.concat_tables([_blob_rows(0), _blob_rows(5)])
        lib.write_dataset(table, str(root / "ds"), data_storage_version="2.2", **opts)
        layouts.append(_blob_layout(root))
        descriptors = [lance.dataset(str(root / "ds")).to_table().column("b").to_pylist()]
        descriptors.append(lt.dataset(root / "ds").to_table().column("b").to_pylist())
        assert descriptors[0] == descriptors[1]
    assert layouts[0] == layouts[1]
    uri = str(tmp_path / writer / "ds")
    other = lance if writer == "lance_table" else lt
    other.write_dataset(_blob_rows(10), uri, mode="append", target_bases=["p1"])
    expected = pa.concat_tables([_blob_rows(0), _blob_rows(5), _blob_rows(10)]).column("b").to_pylist()
    rows = list(range(15))
    for lib in (lt, lance):
        ds = lib.dataset(uri)
        assert ds.to_table(columns=["id"]).column("id").to_pylist() == rows
        assert [f if f is None else f.read() for f in ds.take_blobs("b", indices=rows)] == expected
    lt.dataset(uri).optimize.compact_files()  # reads every blob from its base, writes them anew
    for lib in (lt, lance):
        assert [
            f if f is None else f.read() for f in lib.dataset(uri).take_blobs("b", indices=rows)
        ] == expected


@pytest.mark.s3
def test_external_blobs_in_a_base_on_another_store_read_with_its_options(
    tmp_path: Path, s3_uri: str, s3_options: dict[str, str]
) -> None:
    from lance.blob import blob_array

    from lance_table.storage import open_storage

    open_storage(s3_uri, s3_options).write("ext/x.bin", b"0123456789")
    base, uri = f"{s3_uri}/ext", str(tmp_path / "ds")
    table = pa.table({"id": pa.array([0, 1], pa.int64()), "b": blob_array([f"{base}/x.bin", b"in"])})
    params = {base: s3_options}
    bases = [lance.DatasetBasePath(base, name="e")]
    lance.write_dataset(table, uri, data_storage_version="2.2", initial_bases=bases, base_store_params=params)
    ours = lt.dataset(uri, base_store_params=params).take_blobs("b", indices=[0, 1], allow_external=True)
    theirs = lance.dataset(uri, base_store_params=params).take_blobs("b", indices=[0, 1])
    assert [f.read() for f in ours] == [f.read() for f in theirs] == [b"0123456789", b"in"]
