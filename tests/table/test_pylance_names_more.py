"""pylance names and keyword arguments added for ported code (see ``scripts/api_gaps.py``), each run
on both libraries on copies of the same data and compared."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import lance
import lance.fragment
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table import errors
from lance_table.arrow import BFloat16
from lance_table.fragment import DeletionFile, RowIdMeta, write_fragments

pytestmark = pytest.mark.interop


def _pair(tmp_path: Path, table: pa.Table, **kwargs) -> tuple[Path, Path]:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance.write_dataset(table, ours, **kwargs)
    shutil.copytree(ours, theirs)
    return ours, theirs


ROWS = pa.table({"a": pa.array(range(20), pa.int64()), "b": [f"s{i}" for i in range(20)]})


def test_to_pandas_as_pylance(tmp_path):
    pytest.importorskip("pandas")
    ours, theirs = _pair(tmp_path, ROWS, max_rows_per_file=8)
    mine, oracle = lt.dataset(ours), lance.dataset(theirs)
    assert mine.to_pandas().equals(oracle.to_pandas())
    for options in ({"columns": ["b"], "filter": "a > 4", "limit": 5}, {"with_row_id": True, "offset": 3}):
        assert mine.to_pandas(**options).equals(oracle.to_pandas(**options))
    assert (
        mine.get_fragment(1).to_pandas(columns=["a"]).equals(oracle.get_fragment(1).to_pandas(columns=["a"]))
    )
    assert mine.to_pandas(types_mapper=None, use_threads=False).equals(oracle.to_pandas(use_threads=False))
    with pytest.raises(ValueError, match="blob_mode"):
        mine.to_pandas(blob_mode="nope")


def test_to_pandas_of_blob_columns_needs_descriptions(tmp_path):
    pytest.importorskip("pandas")
    schema = pa.schema([pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])
    ds = lt.write_dataset(pa.table({"blob": [b"x", b"yz"]}, schema=schema), tmp_path / "ds")
    with pytest.raises(errors.UnsupportedOptionError, match="blob_mode"):
        ds.to_pandas()
    assert len(ds.to_pandas(blob_mode="descriptions")) == 2
    assert list(ds.to_pandas(columns=["blob"], blob_mode="descriptions").columns) == ["blob"]


def test_dataset_facts_as_pylance(tmp_path):
    table = pa.table({"a": [1], "b": [2], "c": [3]})
    ours, theirs = _pair(tmp_path, table)
    for uri, lib in ((ours, lt), (theirs, lance)):
        lib.dataset(uri).drop_columns(["c"])
    mine, oracle = lt.dataset(ours), lance.dataset(theirs)
    assert mine.max_field_id == oracle.max_field_id == 2  # the dropped column's id stays taken
    assert mine.has_stable_row_ids is oracle.has_stable_row_ids is False
    assert mine.initial_storage_options is None and oracle.initial_storage_options is None
    assert mine.latest_storage_options() is None
    assert lt.dataset(ours, storage_options={"timeout": "30s"}).initial_storage_options == {"timeout": "30s"}
    stable = lt.write_dataset(table, tmp_path / "stable", enable_stable_row_ids=True)
    assert stable.has_stable_row_ids and lance.dataset(tmp_path / "stable").has_stable_row_ids


def test_commit_options(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(ROWS, uri)
    frags = write_fragments(ROWS, str(uri), data_cache_bytes=1 << 20, max_page_bytes=1 << 20, session=None)
    op = lt.LanceOperation.Append(frags)
    with pytest.raises(errors.UnsupportedOptionError, match="table_id"):
        lt.LanceDataset.commit(str(uri), op, read_version=1, table_id=["t"])
    assert lt.dataset(uri).version == 1
    ds = lt.LanceDataset.commit(str(uri), op, read_version=1, commit_timeout=dt.timedelta(seconds=5))
    assert ds.version == 2 and ds.count_rows() == 40
    txn = write_fragments(ROWS, str(uri), return_transaction=True)
    result = lt.LanceDataset.commit_batch(str(uri), [txn], commit_timeout=dt.timedelta(seconds=5))
    assert result["dataset"].count_rows() == lance.dataset(uri).count_rows() == 60


def test_write_fragments_options(tmp_path):
    legacy = tmp_path / "legacy"
    txn = write_fragments(ROWS, str(legacy), mode="create", use_legacy_format=True, return_transaction=True)
    lt.LanceDataset.commit(str(legacy), txn)
    assert lance.dataset(legacy).data_storage_version == lt.dataset(legacy).data_storage_version == "0.1"
    assert lance.dataset(legacy).to_table().equals(ROWS)
    for bad in ({"external_blob_mode": "ingest"}, {"table_id": ["t"]}):
        with pytest.raises(errors.UnsupportedOptionError, match=next(iter(bad))):
            write_fragments(ROWS, str(tmp_path / "none"), **bad)
    assert not (tmp_path / "none").exists()
    # enable_stable_row_ids: accepted, as pylance does, without effect on the fragments
    frags = write_fragments(ROWS, str(legacy), enable_stable_row_ids=True)
    theirs = lance.fragment.write_fragments(ROWS, str(legacy), enable_stable_row_ids=True)
    assert frags[0].row_id_meta is None and theirs[0].row_id_meta is None


def test_fragment_metadata_json_as_pylance(tmp_path):
    ours, theirs = _pair(tmp_path, ROWS, enable_stable_row_ids=True)
    for uri, lib in ((ours, lt), (theirs, lance)):
        lib.dataset(uri).delete("a < 3")
    mine = lt.dataset(ours).get_fragment(0).metadata
    oracle = lance.dataset(theirs).get_fragment(0).metadata
    assert mine.row_id_meta.json() == oracle.row_id_meta.json()
    assert RowIdMeta.from_json(json=oracle.row_id_meta.json()) == mine.row_id_meta
    text = oracle.deletion_file.json()
    assert DeletionFile.from_json(json=text).asdict() == json.loads(text)
    d, their_d = mine.deletion_file, oracle.deletion_file
    for base in ("/x/y", "x/y/"):
        assert d.path(0, base_uri=base).replace(str(d.id), "") == their_d.path(0, base_uri=base).replace(
            str(their_d.id), ""
        )
    with pytest.raises(ValueError):
        d.path(0, base_uri="s3://bucket/p")


def test_rewrite_result_original_fragments(tmp_path):
    from lance_table.optimize import Compaction

    uri = tmp_path / "ds"
    ds = lt.write_dataset(ROWS, uri, max_rows_per_file=5)
    task = Compaction.plan(ds, {"target_rows_per_fragment": 100}).tasks[0]
    result = task.execute(ds)
    assert result.original_fragments == result.old_fragments and len(result.original_fragments) == 4


def test_pylance_dataset_classes_are_exported(tmp_path):
    ds = lt.write_dataset(ROWS, tmp_path / "ds")
    assert isinstance(ds.tags, lt.Tags) and isinstance(ds.optimize, lt.DatasetOptimizer)
    assert isinstance(ds.stats, lt.LanceStats)
    ds.tags.create("v1", 1)
    tag = ds.tags.list()["v1"]
    theirs = lance.dataset(tmp_path / "ds").tags.list()["v1"]
    assert isinstance(tag, lt.Tag) and tag == theirs
    assert dict(tag.items()) == dict(theirs.items()) and list(tag.values()) == list(theirs.values())
    assert tag.get("version") == theirs.get("version") == 1 and tag.get("nope", 7) == 7
    assert tag.branch is None


def test_bfloat16_from_bytes_keyword():
    assert BFloat16.from_bytes(bytes=b"\x80\x3f").as_float() == 1.0


def test_scanner_builder_as_pylance(tmp_path):
    from lance.dataset import ScannerBuilder as TheirBuilder

    ours, theirs = _pair(tmp_path, ROWS, max_rows_per_file=8)
    mine, oracle = lt.dataset(ours), lance.dataset(theirs)

    def build(builder, ds):
        frags = ds.get_fragments()[1:]
        builder.columns(["a", "b"]).filter("a % 2 = 0").with_fragments(frags).offset(1).limit(4)
        return builder.with_row_id().apply_defaults({"batch_size": 2, "scan_in_order": True}).to_scanner()

    assert (
        build(lt.ScannerBuilder(mine), mine).to_table().equals(build(TheirBuilder(oracle), oracle).to_table())
    )
    expr = lt.ScannerBuilder(mine).filter({"expr_filter": "a > 15"}).to_scanner().to_table()
    assert expr.equals(TheirBuilder(oracle).filter({"expr_filter": "a > 15"}).to_scanner().to_table())
    with pytest.raises(errors.UnsupportedOperationError, match="nearest"):
        lt.ScannerBuilder(mine).nearest("a", [1.0], k=3).to_scanner()
    with pytest.raises(ValueError, match="nope"):
        lt.ScannerBuilder(mine).apply_defaults({"nope": 1})
    with pytest.raises(TypeError):
        lt.ScannerBuilder(mine).columns("a")  # type: ignore[arg-type]


def test_result_type_names(tmp_path):
    ds = lt.write_dataset(ROWS, tmp_path / "ds")
    deleted: lt.DeleteResult = ds.delete("a < 2")
    updated: lt.UpdateResult = ds.update({"b": "'x'"}, where="a < 4")
    assert set(deleted) == set(lt.DeleteResult.__annotations__)
    assert set(updated) == set(lt.UpdateResult.__annotations__)
    assert set(ds.stats.dataset_stats()) == set(lt.DatasetStats.__annotations__)
    assert set(lt.Version.__annotations__) <= set(ds.versions()[0])


def test_fragment_ids_and_version_refs_as_pylance(tmp_path):
    ours, theirs = _pair(tmp_path, ROWS, max_rows_per_file=6)
    for uri, lib in ((ours, lt), (theirs, lance)):
        lib.dataset(uri).delete("a < 6")  # the first fragment goes
    mine, oracle = lt.dataset(ours), lance.dataset(theirs)
    assert list(mine.fragment_ids()) == list(oracle.fragment_ids()) == [1, 2, 3]
    assert len(mine.fragment_ids()) == 3 and 2 in mine.fragment_ids()
    assert mine.version_refs() == oracle.version_refs() == [{"version": 1}, {"version": 2}]


def test_fragment_delete_rows_and_validate_as_pylance(tmp_path):
    ours, theirs = _pair(tmp_path, ROWS, max_rows_per_file=10)
    got = lt.dataset(ours).get_fragment(1).delete_rows([0, 3, 3, 9])
    want = lance.dataset(theirs).get_fragment(1).delete_rows([0, 3, 3, 9])
    assert got.deletion_file.num_deleted_rows == want.deletion_file.num_deleted_rows == 3
    assert lt.dataset(ours).get_fragment(0).delete_rows(range(10)) is None
    assert lance.dataset(theirs).get_fragment(0).delete_rows(range(10)) is None
    with pytest.raises(IndexError):
        lt.dataset(ours).get_fragment(1).delete_rows([10])
    for uri, lib, frag in ((ours, lt, got), (theirs, lance, want)):
        lib.LanceDataset.commit(str(uri), lib.LanceOperation.Delete([frag], [], "by offsets"), read_version=1)
    expected = [i for i in range(20) if i not in (10, 13, 19)]
    assert lt.dataset(ours).to_table()["a"].to_pylist() == expected
    assert lance.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
    lt.dataset(ours).get_fragment(1).validate()
    data_file = next((ours / "data").iterdir())
    data_file.unlink()
    broken = next(f for f in lt.dataset(ours).get_fragments() if f.data_files()[0].path == data_file.name)
    with pytest.raises(errors.DataFileNotFoundError):
        broken.validate()
