"""The public Dataset API: modes, inputs, reads, takes, scans, errors, time travel, cleanup."""

from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import make_rows
from helpers import assert_tables_equal

import lance_table as lt


def test_modes(tmp_path):
    uri = tmp_path / "ds"
    with pytest.raises(lt.DatasetNotFoundError):
        lt.dataset(uri)
    ds = lt.write_dataset(make_rows(0, 10), uri)
    with pytest.raises(lt.DatasetAlreadyExistsError):
        lt.write_dataset(make_rows(0, 10), uri)
    ds2 = lt.write_dataset(make_rows(10, 5), uri, mode="append")
    assert (ds.version, ds.count_rows(), ds2.version, ds2.count_rows()) == (1, 10, 2, 15)
    ds3 = lt.write_dataset(pa.table({"other": [1, 2]}), uri, mode="overwrite")
    assert ds3.schema.names == ["other"] and ds3.count_rows() == 2
    assert lt.write_dataset(make_rows(0, 3), tmp_path / "new", mode="append").count_rows() == 3
    with pytest.raises(ValueError, match="mode"):
        lt.write_dataset(make_rows(0, 3), uri, mode="upsert")  # type: ignore[arg-type]


def test_handles_are_pinned(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(make_rows(0, 10), uri)
    lt.write_dataset(make_rows(10, 10), uri, mode="append")
    assert ds.version == 1 and ds.count_rows() == 10 and ds.to_table().num_rows == 10
    assert ds.latest_version == 2
    assert ds.checkout(1).count_rows() == 10
    assert ds.checkout_latest() is None  # moves this handle, as pylance's
    assert ds.version == 2 and ds.count_rows() == 20
    with pytest.raises(lt.VersionNotFoundError):
        ds.checkout(9)


@pytest.mark.parametrize("kind", ["table", "batch", "reader", "iterable", "pandas", "generator"])
def test_input_kinds(tmp_path, kind):
    table = make_rows(0, 1000).select(["id", "x", "s"])
    data = {
        "table": lambda: table,
        "batch": lambda: (
            table.to_batches()[0] if len(table.to_batches()) == 1 else table.combine_chunks().to_batches()[0]
        ),
        "reader": lambda: pa.RecordBatchReader.from_batches(
            table.schema, table.to_batches(max_chunksize=100)
        ),
        "iterable": lambda: table.to_batches(max_chunksize=100),
        "pandas": lambda: table.to_pandas(),
        "generator": lambda: (b for b in table.to_batches(max_chunksize=300)),
    }[kind]()
    ds = lt.write_dataset(data, tmp_path / "ds", schema=table.schema if kind == "pandas" else None)
    assert_tables_equal(ds.to_table(), table, check_metadata=False)


def test_rolls_over_files(tmp_path):
    ds = lt.write_dataset(make_rows(0, 2500), tmp_path / "ds", max_rows_per_file=1000)
    assert [f.physical_rows for f in ds.get_fragments()] == [1000, 1000, 500]
    # the byte limit counts bytes written, checked after each batch (as pylance): these rows are
    # one batch, whose pages are written only when the file is closed
    ds = lt.write_dataset(make_rows(0, 2500), tmp_path / "ds2", max_bytes_per_file=20_000)
    assert [f.physical_rows for f in ds.get_fragments()] == [2500]
    assert_tables_equal(ds.to_table(), make_rows(0, 2500), check_metadata=False)


def test_append_schema_must_match(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    with pytest.raises(lt.SchemaError, match="unexpected"):  # (missing nullable columns are filled)
        lt.write_dataset(pa.table({"id": [1], "zz": [1]}), uri, mode="append")
    with pytest.raises(lt.SchemaError, match="id"):
        bad = make_rows(0, 3).set_column(0, "id", pa.array([1.0, 2.0, 3.0]))
        lt.write_dataset(bad, uri, mode="append")
    reordered = make_rows(10, 5).select(["s", "x", "id", "v", "tags"])
    ds = lt.write_dataset(reordered, uri, mode="append")
    assert ds.count_rows() == 15 and ds.schema.names == ["id", "x", "s", "v", "tags"]
    assert sorted(os.listdir(uri / "data")).__len__() == 2  # failed appends left no files


def test_failed_write_leaves_dataset_and_directory_unchanged(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    before = sorted(p.relative_to(uri).as_posix() for p in uri.rglob("*"))

    def batches():
        yield make_rows(10, 100).to_batches()[0]
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        lt.write_dataset(batches(), uri, mode="append", schema=make_rows(0, 10).schema, max_rows_per_file=30)
    after = sorted(p.relative_to(uri).as_posix() for p in uri.rglob("*"))
    assert after == before
    assert lt.dataset(uri).version == 1


def test_projection_filter_limit_offset_row_id(tmp_path):
    table = make_rows(0, 3000)
    ds = lt.write_dataset(table, tmp_path / "ds", max_rows_per_file=1000)
    got = ds.to_table(columns=["s", "id"], filter="id >= 500 AND x < 0.5", limit=100, offset=10)
    mask = pc.and_(pc.greater_equal(table["id"], 500), pc.less(table["x"], 0.5))
    expected = table.filter(mask).select(["s", "id"]).slice(10, 100)
    assert_tables_equal(got, expected, check_metadata=False)
    with_ids = ds.to_table(columns=["id"], with_row_id=True)
    ids = with_ids["id"].to_numpy()
    assert with_ids["_rowid"].to_numpy().tolist() == ((ids // 1000) << 32 | (ids % 1000)).tolist()
    assert ds.count_rows("s IS NULL") == pc.sum(pc.is_null(table["s"])).as_py()
    assert ds.to_table(limit=0).num_rows == 0
    assert ds.to_table(offset=5000).num_rows == 0
    expr = pc.field("id") < 5
    assert ds.to_table(filter=expr)["id"].to_pylist() == [0, 1, 2, 3, 4]


def test_batches_stream_and_feed_other_libraries(tmp_path):
    table = make_rows(0, 5000)
    ds = lt.write_dataset(table, tmp_path / "ds", max_rows_per_file=2000)
    reader = ds.to_batches(batch_size=700, columns=["id", "x"])
    assert isinstance(reader, pa.RecordBatchReader)
    sizes = [b.num_rows for b in reader]
    assert max(sizes) <= 700 and sum(sizes) == 5000
    df = pd.DataFrame(ds.to_batches(columns=["id"]).read_pandas())
    assert df["id"].tolist() == list(range(5000))
    assert ds.scanner(filter="id < 3").to_table().num_rows == 3


def test_take_by_position_skips_deleted_rows(tmp_path):
    table = make_rows(0, 3000)
    ds = lt.write_dataset(table, tmp_path / "ds", max_rows_per_file=1000)
    assert ds.delete("id % 3 = 0") == {"num_deleted_rows": 1000}
    live = table.filter(pc.not_equal(pc.modulo(table["id"], 3), 0))
    idx = [0, 1999, 5, 5, 1000, 1]
    assert_tables_equal(ds.take(idx), live.take(pa.array(idx)), check_metadata=False)
    assert_tables_equal(
        ds.take(idx, columns=["s"]), live.select(["s"]).take(pa.array(idx)), check_metadata=False
    )
    with pytest.raises(IndexError):
        ds.take([2000])


def test_filtered_scan_reads_only_predicate_columns_for_non_matching_rows(tmp_path, monkeypatch):
    from lance_table.table import fragment as fragment_mod

    ds = lt.write_dataset(make_rows(0, 10_000), tmp_path / "ds")
    reads: list[tuple[list[str], int]] = []
    original = fragment_mod.FragmentReader.read

    def spy(self, names, runs, floors=None):
        reads.append((list(names), runs.total))
        return original(self, names, runs, floors)

    monkeypatch.setattr(fragment_mod.FragmentReader, "read", spy)
    got = ds.to_table(filter="id = 1234")
    assert got["id"].to_pylist() == [1234]
    # a filter that only bounds an integer column finds its rows from the packed values: no
    # column is decoded for the rows that do not match, and the matching row is read once
    assert reads == [(["id", "x", "s", "v", "tags"], 1)]
    reads.clear()
    got = ds.to_table(filter="id = 1234 OR id = 1235")  # (not an interval: a filter pass first)
    assert got["id"].to_pylist() == [1234, 1235]
    # the predicate's column is not read twice: the matching rows come from the filter pass
    assert reads == [(["id"], 10_000), (["x", "s", "v", "tags"], 2)]
    reads.clear()
    ds.delete("x < 0.01")
    assert reads == [(["x"], 10_000)]


def test_restore_and_tags(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(make_rows(0, 10), uri)
    ds.tags.create("first", 1)
    lt.write_dataset(make_rows(10, 10), uri, mode="append")
    with pytest.raises(lt.TagError):
        ds.tags.create("first", 2)
    with pytest.raises(lt.TagError):
        ds.tags.create("bad/name", 2)
    with pytest.raises(lt.VersionNotFoundError):
        ds.tags.create("future", 99)
    ds.tags.update("first", 2)
    assert lt.dataset(uri, version="first").version == 2
    ds.tags.update("first", 1)
    tags = ds.tags.list()
    assert tags["first"].version == 1 and tags["first"].updated_at.tzinfo is not None
    restored = lt.dataset(uri, version="first")
    assert restored.restore() is None
    assert restored.version == 3 and restored.count_rows() == 10
    assert restored.versions()[-1]["operation"] == "restore"
    ds.tags.delete("first")
    with pytest.raises(lt.TagError):
        ds.tags.delete("first")
    with pytest.raises(lt.TagError):
        lt.dataset(uri, version="first")


def test_cleanup_removes_only_unreferenced_old_files(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 100), uri)
    ds = lt.write_dataset(make_rows(0, 50), uri, mode="overwrite")
    ds.delete("id < 10")
    ds.tags.create("keep", 2)
    orphan = uri / "data" / "orphan.lance"
    orphan.write_bytes(b"in flight")
    stats = ds.cleanup_old_versions(older_than=dt.timedelta(0), error_if_tagged_old_versions=False)
    assert stats.old_versions == 1  # version 1 only: 2 is tagged, 3 is the latest
    assert orphan.exists()  # younger than the grace period
    assert sorted(v["version"] for v in lt.dataset(uri).versions()) == [2, 3]
    assert_tables_equal(lt.dataset(uri, version=2).to_table(), make_rows(0, 50), check_metadata=False)
    assert lt.dataset(uri).count_rows() == 40
    old = os.stat(orphan).st_mtime - 30 * 86400
    os.utime(orphan, (old, old))
    ds.cleanup_old_versions(older_than=dt.timedelta(0), error_if_tagged_old_versions=False)
    assert not orphan.exists()
    with pytest.raises(lt.TagError):
        ds.cleanup_old_versions(older_than=dt.timedelta(0))


def test_compaction_plan_and_versions(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(make_rows(0, 1000), uri, max_rows_per_file=100)
    ds.delete("id < 50")
    before = ds.to_table()
    compacted = lt.dataset(uri)
    metrics = compacted.optimize.compact_files(target_rows_per_fragment=400)
    assert (metrics.fragments_removed, metrics.fragments_added) == (10, 2)
    assert (metrics.files_removed, metrics.files_added) == (10 + 1, 2)  # with the deletion file
    assert compacted.version == ds.version + 2
    ops = [v["operation"] for v in compacted.versions()[-2:]]
    assert ops == ["reserve_fragments", "rewrite"]
    # as pylance: bins of at least 400 live rows, one fragment each
    assert [f.physical_rows for f in compacted.get_fragments()] == [450, 500]
    assert [f.id for f in compacted.manifest.fragments] == [10, 11]
    assert_tables_equal(compacted.to_table(), before, check_metadata=False)
    version = compacted.version
    assert compacted.compact_files(target_rows_per_fragment=400).fragments_removed == 0  # nothing to do
    assert compacted.version == version


def test_memory_storage(tmp_path):
    import fsspec

    uri = "memory://lance_table_tests/ds1"
    try:
        lt.write_dataset(make_rows(0, 100), uri, max_rows_per_file=40)
        lt.write_dataset(make_rows(100, 10), uri, mode="append").delete("id < 5")
        assert lt.dataset(uri).count_rows() == 105
        assert lt.dataset(uri, version=1).count_rows() == 100
    finally:
        fsspec.filesystem("memory").rm("/lance_table_tests", recursive=True)


def test_asof(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    lt.write_dataset(make_rows(10, 10), uri, mode="append")
    now = dt.datetime.now(dt.timezone.utc)
    assert lt.dataset(uri, asof=now).version == 2
    with pytest.raises(lt.VersionNotFoundError):
        lt.dataset(uri, asof=dt.datetime(2000, 1, 1))


def test_scan_empty_and_fully_deleted(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(make_rows(0, 100), uri, max_rows_per_file=50)
    ds.delete("id >= 0")
    assert ds.count_rows() == 0 and ds.get_fragments() == []
    assert ds.to_table().num_rows == 0 and ds.to_table().schema.names == make_rows(0, 1).schema.names
    assert ds.take([]).num_rows == 0
    ds2 = lt.write_dataset(make_rows(0, 5), uri, mode="append")
    assert [f.id for f in ds2.manifest.fragments] == [2]
    assert np.array_equal(ds2.to_table()["id"].to_numpy(), np.arange(5))


def test_scans_without_columns_keep_row_counts(tmp_path):
    ds = lt.write_dataset(pa.table({"a": [1, 2, 3, None]}), tmp_path / "ds")
    assert ds.to_table(columns=[], filter="a > 1").num_rows == 2
    assert ds.to_table(columns=[]).num_rows == 4
    assert ds.to_batches(columns=[], filter="a > 1").read_all().num_rows == 2
    assert ds.to_table(filter="TRUE").num_rows == 4
    assert (ds.count_rows("TRUE"), ds.count_rows("1 = 0"), ds.count_rows("NOT (a > 1)")) == (4, 0, 1)


def test_data_storage_version_names_as_pylance_takes_them(tmp_path):
    from lance_table.errors import UnsupportedFormatError

    table = pa.table({"id": [1, 2, 3]})
    ds = lt.write_dataset(table, tmp_path / "a", data_storage_version="2.0")
    assert ds.data_storage_version == "2.0"
    # an append keeps the dataset's format, whatever it asks for (as pylance does)
    ds = lt.write_dataset(table, tmp_path / "a", mode="append", data_storage_version="2.2")
    assert ds.data_storage_version == "2.0" and ds.count_rows() == 6
    with pytest.raises(ValueError, match="data_storage_version"):
        lt.write_dataset(table, tmp_path / "b", data_storage_version="3.0")
    with pytest.raises(UnsupportedFormatError):
        lt.write_dataset(table, tmp_path / "next", data_storage_version="next")
    assert not (tmp_path / "next" / "_versions").exists()
    for name in ("legacy", "0.1"):
        ds = lt.write_dataset(table, tmp_path / name, data_storage_version=name)
        assert ds.data_storage_version == "0.1"


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_streamed_scans_read_ahead_in_order(tmp_path, monkeypatch, version):
    """Streamed scans read ranges of fragments ahead on threads; batches come in row order, and a
    caller that stops early leaves nothing running."""
    from lance_table.table import scan

    monkeypatch.setattr(scan, "READ_CHUNK_ROWS", 150)  # many ranges per fragment
    table = make_rows(0, 3000)
    ds = lt.write_dataset(table, tmp_path / "ds", max_rows_per_file=700, data_storage_version=version)
    ds.delete("id % 7 = 3")
    expected = ds.to_table()
    assert expected.num_rows == 3000 - len([i for i in range(3000) if i % 7 == 3])
    got = pa.Table.from_batches(list(ds.to_batches(batch_size=64)))
    assert_tables_equal(got, expected)
    assert got["id"].to_pylist() == [i for i in range(3000) if i % 7 != 3]
    flt = pa.Table.from_batches(list(ds.to_batches(filter="x < 0.5", batch_size=64)), schema=expected.schema)
    assert_tables_equal(flt, expected.filter(pc.less(expected["x"], 0.5)))
    cut = ds.to_batches(offset=1234, limit=500, columns=["id"]).read_all()
    assert cut["id"].to_pylist() == expected["id"].to_pylist()[1234:1734]
    reader = ds.to_batches(batch_size=50)
    first = [reader.read_next_batch() for _ in range(3)]
    reader.close()
    head = pa.Table.from_batches(first)
    assert head.num_rows > 0 and head.equals(expected.slice(0, head.num_rows))
