"""Schema evolution (``add_columns``, ``merge``, ``alter_columns``, ``drop_columns``,
``LanceFragment.merge_columns``) against pylance: the same calls on copies of one dataset (legacy,
2.0, 2.2; stable row ids; blob columns), with the resulting tables, field ids, transactions and
data file layouts compared; pylance keeps writing ours; maintenance (time travel, compaction,
cleanup, restore) over fragments with several data files and dropped columns."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

import lance_table as lt

pytestmark = pytest.mark.interop

VERSIONS = ["legacy", "2.0", "2.1", "2.2"]


def _table(n: int = 10) -> pa.Table:
    return pa.table(
        {
            "a": pa.array(range(n), pa.int64()),
            "s": pa.StructArray.from_arrays(
                [pa.array(range(n), pa.int64()), pa.array([f"y{i}" for i in range(n)])], ["x", "y"]
            ),
            "t": pa.array([f"t{i}" if i % 3 else None for i in range(n)]),
            "f": pa.array([i / 2 for i in range(n)], pa.float64()),
            "l": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int32())),
        }
    )


def _copies(tmp_path: Path, version: str, n: int = 10, **options: Any) -> tuple[str, str]:
    """The same dataset twice (written by pylance): ours and theirs."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(_table(n), theirs, data_storage_version=version, max_rows_per_file=4, **options)
    lance.dataset(theirs).delete("a = 5")
    shutil.copytree(theirs, ours)
    return ours, theirs


def _field_ids(uri: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []

    def walk(fields: Any) -> None:
        for f in fields:
            out.append((f.name(), f.id()))
            walk(f.children())

    walk(lance.dataset(uri).lance_schema.fields())
    return out


def _layout(uri: str) -> list[list[tuple[list[int], int, int]]]:
    ds = lance.dataset(uri)
    return [
        [(d.fields, d.file_major_version, d.file_minor_version) for d in f.metadata.files]
        for f in ds.get_fragments()
    ]


def _same(ours: str, theirs: str) -> None:
    """Both datasets read alike by both libraries, with the same field ids, data file layout and
    last transaction kind."""
    expected = lance.dataset(theirs).to_table()
    assert_tables_equal(lance.dataset(ours).to_table(), expected)
    # (lance_table reads 2.0 blob columns as bytes where pylance gives descriptors: compare alike)
    assert_tables_equal(lt.dataset(ours).to_table(), lt.dataset(theirs).to_table())
    assert lt.dataset(ours).schema == lt.dataset(theirs).schema
    assert _field_ids(ours) == _field_ids(theirs)
    assert _layout(ours) == _layout(theirs)
    o, t = lance.dataset(ours), lance.dataset(theirs)
    mine, theirs_op = o.read_transaction(o.version).operation, t.read_transaction(t.version).operation
    assert type(mine) is type(theirs_op)
    assert getattr(mine, "preserves_nullability", None) == getattr(theirs_op, "preserves_nullability", None)
    assert o.version == t.version


def _both(ours: str, theirs: str, call: Callable[[Any], Any]) -> None:
    call(lt.dataset(ours))
    call(lance.dataset(theirs))
    _same(ours, theirs)


@pytest.mark.parametrize("version", VERSIONS)
def test_each_operation_matches_pylance(tmp_path, version):
    ours, theirs = _copies(tmp_path, version)
    _both(ours, theirs, lambda d: d.add_columns({"b": "a * 2", "c": "concat(t, '!')", "k": "f + 1"}))
    _both(ours, theirs, lambda d: d.add_columns({"one": "1"}))
    if version != "legacy":
        _both(ours, theirs, lambda d: d.add_columns(pa.field("n", pa.int32())))
        _both(
            ours, theirs, lambda d: d.add_columns([pa.field("n2", pa.string()), pa.field("n3", pa.float32())])
        )
    _both(ours, theirs, lambda d: d.alter_columns({"path": "b", "name": "bb"}, {"path": "s.x", "name": "xx"}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "a", "data_type": pa.int32()}))
    _both(
        ours, theirs, lambda d: d.alter_columns({"path": "t", "data_type": pa.large_string(), "name": "tt"})
    )
    _both(ours, theirs, lambda d: d.alter_columns({"path": "f", "data_type": pa.float32()}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "l", "data_type": pa.large_list(pa.int32())}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "a", "nullable": False}))
    _both(ours, theirs, lambda d: d.drop_columns(["s.y", "tt"]))
    source = pa.table({"a": pa.array([1, 3, 6, 6, 42], pa.int32()), "m": ["p", "q", "r", "r2", "z"]})
    _both(ours, theirs, lambda d: d.merge(source, "a"))
    # pylance keeps writing ours, and we keep writing pylance's
    for writer, other in ((lance, ours), (lt, theirs)):
        more = writer.dataset(other).to_table().slice(0, 2)
        writer.write_dataset(more, other, mode="append")
        writer.dataset(other).delete("bb = 2")
    assert_tables_equal(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())
    assert_tables_equal(lt.dataset(ours).to_table(), lance.dataset(theirs).to_table())


@pytest.mark.parametrize("version", VERSIONS)
def test_maintenance_over_several_data_files_and_dropped_columns(tmp_path, version):
    ours, theirs = _copies(tmp_path, version)
    for uri, mod in ((ours, lt), (theirs, lance)):
        mod.dataset(uri).add_columns({"b": "a + 1"})
        mod.dataset(uri).alter_columns({"path": "a", "data_type": pa.int32()})
        mod.dataset(uri).drop_columns(["t", "s.x"])
    history = {
        v: lance.dataset(theirs, version=v).to_table() for v in range(1, lance.dataset(theirs).version + 1)
    }
    for v, expected in history.items():  # time travel
        assert_tables_equal(lt.dataset(ours, version=v).to_table(), expected)
    latest = history[max(history)]
    lt.dataset(ours).compact_files()
    lance.dataset(theirs).optimize.compact_files()
    for uri in (ours, theirs):
        assert_tables_equal(lance.dataset(uri).to_table(), latest)
        assert_tables_equal(lt.dataset(uri).to_table(), latest)
    # the compacted files hold only the remaining fields, as pylance's
    assert _layout(ours) == _layout(theirs)
    assert _field_ids(ours) == _field_ids(theirs)
    lt.dataset(ours).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert_tables_equal(lance.dataset(ours).to_table(), latest)
    lt.dataset(ours, version=lance.dataset(ours).version).restore()
    assert_tables_equal(lance.dataset(ours).to_table(), latest)
    lance.dataset(theirs).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert_tables_equal(lt.dataset(theirs).to_table(), latest)


def test_restore_before_a_schema_change(tmp_path):
    ours, _ = _copies(tmp_path, "2.2")
    before = lance.dataset(ours).to_table()
    lt.dataset(ours).add_columns({"b": "a + 1"})
    lt.dataset(ours).drop_columns(["t"])
    lt.dataset(ours, version=2).restore()
    assert_tables_equal(lance.dataset(ours).to_table(), before)
    assert_tables_equal(lt.dataset(ours).to_table(), before)


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_stable_row_ids(tmp_path, version):
    ours, theirs = _copies(tmp_path, version, n=12, enable_stable_row_ids=True)
    _both(ours, theirs, lambda d: d.add_columns({"b": "a * 3"}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "a", "data_type": pa.int16()}))
    _both(
        ours, theirs, lambda d: d.merge(pa.table({"a": pa.array([2, 7], pa.int16()), "m": [1.5, 2.5]}), "a")
    )
    for uri in (ours, theirs):  # pylance keeps writing
        lance.dataset(uri).delete("a = 2")
        more = lance.dataset(uri).to_table().slice(0, 2)
        lance.write_dataset(more, uri, mode="append")
    expected = lance.dataset(theirs).to_table(with_row_id=True)
    assert_tables_equal(lance.dataset(ours).to_table(with_row_id=True), expected)
    assert_tables_equal(lt.dataset(ours).to_table(with_row_id=True), expected)
    for a, b in zip(lance.dataset(ours).get_fragments(), lance.dataset(theirs).get_fragments()):
        assert a.metadata.row_id_meta == b.metadata.row_id_meta


@pytest.mark.parametrize("version", VERSIONS)
def test_batch_udf_with_row_ids_and_batch_size(tmp_path, version):
    ours, theirs = _copies(tmp_path, version, n=20)
    calls: dict[str, list[tuple[int, list[str]]]] = {"lt": [], "lance": []}

    def udf_for(key: str) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
        def double(batch: pa.RecordBatch) -> pa.RecordBatch:
            calls[key].append((batch.num_rows, batch.schema.names))
            total = pc.add(batch.column("a"), pc.cast(batch.column("_rowid"), pa.int64()))
            return pa.record_batch([total], ["sum"])

        return double

    lt.dataset(ours).add_columns(udf_for("lt"), read_columns=["_rowid", "a"], batch_size=3)
    lance.dataset(theirs).add_columns(udf_for("lance"), read_columns=["_rowid", "a"], batch_size=3)
    _same(ours, theirs)
    assert calls["lt"] == calls["lance"]

    @lt.batch_udf(output_schema=pa.schema([pa.field("neg", pa.int64())]))
    def neg(batch: pa.RecordBatch) -> Any:
        return batch.to_pandas().assign(neg=lambda df: -df["a"])[["neg"]]

    @lance.batch_udf(output_schema=pa.schema([pa.field("neg", pa.int64())]))
    def neg2(batch: pa.RecordBatch) -> Any:
        return batch.to_pandas().assign(neg=lambda df: -df["a"])[["neg"]]

    lt.dataset(ours).add_columns(neg, read_columns=["a"])
    lance.dataset(theirs).add_columns(neg2, read_columns=["a"])
    _same(ours, theirs)


def test_udf_checkpoint_resumes_after_a_failure(tmp_path):
    ours, theirs = _copies(tmp_path, "2.2", n=12)
    checkpoint = tmp_path / "udf.sqlite"
    seen: list[int] = []
    fail = {"on": True}

    @lt.batch_udf(output_schema=pa.schema([pa.field("sq", pa.int64())]), checkpoint_file=checkpoint)
    def square(batch: pa.RecordBatch) -> pa.RecordBatch:
        first = batch.column("a")[0].as_py()
        if fail["on"] and first >= 8:
            raise RuntimeError("boom")
        seen.append(first)
        return pa.record_batch([pc.multiply(batch.column("a"), batch.column("a"))], ["sq"])

    files_before = sorted(p.name for p in Path(ours, "data").iterdir())
    version = lt.dataset(ours).version
    with pytest.raises(RuntimeError, match="boom"):
        lt.dataset(ours).add_columns(square, read_columns=["a"], batch_size=2)
    assert lt.dataset(ours).version == version
    assert sorted(p.name for p in Path(ours, "data").iterdir()) == files_before
    assert checkpoint.exists()
    done = sorted(seen)
    seen.clear()
    fail["on"] = False
    lt.dataset(ours).add_columns(square, read_columns=["a"], batch_size=2)
    assert set(seen).isdisjoint(done) and done  # completed batches came from the checkpoint
    assert not checkpoint.exists()
    lance.dataset(theirs).add_columns({"sq": "a * a"})
    assert_tables_equal(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())


@pytest.mark.parametrize("version", VERSIONS)
def test_add_columns_from_aligned_rows(tmp_path, version):
    ours, theirs = _copies(tmp_path, version)
    rows = lance.dataset(theirs).count_rows()
    new = pa.table({"k": pa.array(range(100, 100 + rows), pa.int64()), "w": [f"w{i}" for i in range(rows)]})
    _both(ours, theirs, lambda d: d.add_columns(new))
    renamed = pa.schema([pa.field("k2", pa.int64()), pa.field("w2", pa.string())])
    reader = pa.RecordBatchReader.from_batches(
        renamed, [b.rename_columns(["k2", "w2"]) for b in new.to_batches(max_chunksize=3)]
    )
    lt.dataset(ours).add_columns(reader)
    assert lt.dataset(ours).to_table().column("k2").to_pylist() == list(range(100, 100 + rows))


def test_aligned_rows_of_another_length_leave_the_dataset_as_it_was(tmp_path):
    ours, _ = _copies(tmp_path, "2.2")
    files_before = sorted(p.name for p in Path(ours, "data").iterdir())
    for n in (3, 40):
        with pytest.raises(lt.SchemaChangeError, match="rows"):
            lt.dataset(ours).add_columns(pa.table({"k": range(n)}))
    assert lt.dataset(ours).version == 2
    assert sorted(p.name for p in Path(ours, "data").iterdir()) == files_before


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_merge_matches_pylance(tmp_path, version):
    ours, theirs = _copies(tmp_path, version, n=30)
    source = pa.table(
        {"key": pa.array([3, 4, 4, 29, 77, None], pa.int64()), "v": [1, 2, 3, 4, 5, 6], "w": list("abcdef")}
    )
    _both(ours, theirs, lambda d: d.merge(source, "a", right_on="key"))
    _both(ours, theirs, lambda d: d.merge(pa.table({"a": [1, 2], "z": [0.5, 0.25]}).to_batches()[0], "a"))


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_fragment_merge_columns_then_merge_commit(tmp_path, version):
    ours, theirs = _copies(tmp_path, version)
    for mod, uri in ((lt, ours), (lance, theirs)):
        ds = mod.dataset(uri)
        frags, schema = [], None
        for frag in ds.get_fragments():
            metadata, schema = frag.merge_columns({"b": "a * 10"})
            frags.append(metadata)
        mod.LanceDataset.commit(uri, mod.LanceOperation.Merge(frags, schema), read_version=ds.version)
    _same(ours, theirs)
    theirs_schema = (
        lance.dataset(theirs)
        .get_fragments()[0]
        .merge_columns(lambda b: pa.record_batch([b.column("a")], ["c"]), columns=["a"])[1]
    )
    ours_schema = (
        lt.dataset(ours)
        .get_fragments()[0]
        .merge_columns(lambda b: pa.record_batch([b.column("a")], ["c"]), columns=["a"])[1]
    )
    assert [(f.name(), f.id()) for f in ours_schema.fields()] == [
        (f.name(), f.id()) for f in theirs_schema.fields()
    ]
    udf = lt.batch_udf(checkpoint_file=tmp_path / "c.sqlite")(lambda b: b)
    with pytest.raises(ValueError, match="checkpoint"):
        lt.dataset(ours).get_fragments()[0].merge_columns(udf)


def test_blob_columns(tmp_path):
    blob = pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    table = pa.table(
        {
            "a": pa.array(range(8), pa.int64()),
            "blob": pa.array([b"x" * i for i in range(8)], pa.large_binary()),
        }
    )
    table = table.cast(pa.schema([pa.field("a", pa.int64()), blob]))
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    lance.write_dataset(table, theirs, data_storage_version="2.0", max_rows_per_file=3)
    shutil.copytree(theirs, ours)
    _both(ours, theirs, lambda d: d.add_columns({"b": "a + 1"}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "blob", "name": "bytes"}))
    assert [f.read() for f in lance.dataset(ours).take_blobs("bytes", indices=[2, 5])] == [b"xx", b"x" * 5]
    _both(ours, theirs, lambda d: d.drop_columns(["bytes"]))


@pytest.mark.parametrize("mod", [lt, lance], ids=["lance_table", "pylance"])
def test_bad_input_is_refused_as_pylance_refuses_it(tmp_path, mod):
    ours, theirs = _copies(tmp_path, "2.2")
    uri = ours if mod is lt else theirs
    ds = mod.dataset(uri)
    with pytest.raises(OSError, match="already exists"):
        ds.add_columns({"a": "a + 1"})
    with pytest.raises(ValueError, match="does not exist"):
        ds.drop_columns(["nope"])
    with pytest.raises(OSError, match="does not exist"):
        ds.alter_columns({"path": "nope", "name": "x"})
    with pytest.raises(OSError):
        ds.alter_columns({"path": "a", "data_type": pa.string()})
    mod.dataset(uri).add_columns({"big": "a + 1000"})
    mod.dataset(uri).alter_columns({"path": "a", "data_type": pa.int8()})  # fits
    version = mod.dataset(uri).version
    with pytest.raises(OSError):
        mod.dataset(uri).alter_columns({"path": "big", "data_type": pa.int8()})  # does not fit
    with pytest.raises(OSError):
        mod.dataset(uri).alter_columns({"path": "t", "nullable": False})  # holds nulls
    with pytest.raises(TypeError):
        mod.dataset(uri).add_columns({"x": 1})
    if mod is lt:
        with pytest.raises(lt.FilterError):
            mod.dataset(uri).add_columns({"x": "nope + 1"})
    else:
        with pytest.raises(OSError):
            mod.dataset(uri).add_columns({"x": "nope + 1"})
    assert mod.dataset(uri).version == version  # failed changes leave the dataset as it was


def test_all_null_columns_on_a_legacy_dataset_are_refused(tmp_path):
    ours, _ = _copies(tmp_path, "legacy")
    with pytest.raises(lt.UnsupportedFormatError, match="legacy"):
        lt.dataset(ours).add_columns(pa.field("n", pa.int32()))


def test_the_handle_moves_to_the_version_it_committed(tmp_path):
    ours, _ = _copies(tmp_path, "2.2")
    ds = lt.dataset(ours)
    assert ds.add_columns({"b": "a + 1"}) is None
    assert ds.alter_columns({"path": "b", "name": "c"}) is None
    assert ds.drop_columns(["t"]) is None
    assert ds.merge(pa.table({"a": [1], "m": [2]}), "a") is None
    assert ds.version == lance.dataset(ours).version == 6
    assert ds.schema.names == ["a", "s", "f", "l", "c", "m"]


@pytest.mark.parametrize("concurrent", ["append", "delete", "add_columns"])
def test_a_concurrent_write_preempts_a_schema_change_which_removes_its_files(tmp_path, concurrent):
    from lance_table.table.operations.schema_alter import plan_alter_columns
    from lance_table.table.operations.schema_udf import plan_add_columns

    ours, _ = _copies(tmp_path, "2.2")
    for plan in (
        lambda s: plan_add_columns(s, {"b": "a + 1"})[0],
        lambda s: plan_alter_columns(s, [{"path": "a", "data_type": pa.int32()}]),
    ):
        snapshot = lt.dataset(ours)._snapshot
        pending = plan(snapshot)
        assert pending.written
        if concurrent == "append":
            lance.write_dataset(lance.dataset(ours).to_table().slice(0, 1), ours, mode="append")
        elif concurrent == "delete":
            lance.dataset(ours).delete("a = 1")
        else:
            lance.dataset(ours).add_columns({f"z{lance.dataset(ours).version}": "a * 3"})
        expected = lance.dataset(ours).to_table()
        with pytest.raises(lt.CommitConflictError, match="retry"):
            snapshot.commit(pending)
        assert not [p for p in pending.written if Path(ours, p).exists()]
        assert_tables_equal(lt.dataset(ours).to_table(), expected)


@pytest.mark.s3
def test_schema_changes_on_s3_match_pylance(tmp_path, s3_uri, s3_options):
    """Each change made on the S3 server, and the same by pylance locally: same tables."""
    local = str(tmp_path / "theirs")
    for uri, opts in ((s3_uri, s3_options), (local, None)):
        lance.write_dataset(_table(12), uri, max_rows_per_file=5, storage_options=opts)
        lance.dataset(uri, storage_options=opts).delete("a = 5")
    ops: list[Callable[[Any], Any]] = [
        lambda d: d.add_columns({"b": "a * 2"}),
        lambda d: d.alter_columns({"path": "a", "data_type": pa.int32()}, {"path": "s.x", "name": "xx"}),
        lambda d: d.drop_columns(["t"]),
        lambda d: d.merge(pa.table({"a": pa.array([1, 2], pa.int32()), "m": [1, 2]}), "a"),
    ]
    for op in ops:
        op(lt.dataset(s3_uri, storage_options=s3_options))
        op(lance.dataset(local))
        expected = lance.dataset(local).to_table()
        assert_tables_equal(lance.dataset(s3_uri, storage_options=s3_options).to_table(), expected)
        assert_tables_equal(lt.dataset(s3_uri, storage_options=s3_options).to_table(), expected)


def test_indexed_columns_keep_their_indices_or_refuse_a_cast_as_in_pylance(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    table = pa.table({"a": pa.array(range(100), pa.int64()), "t": [f"s{i % 5}" for i in range(100)]})
    lance.write_dataset(table, theirs, max_rows_per_file=40)
    lance.dataset(theirs).create_scalar_index("a", "BTREE")
    lance.dataset(theirs).create_scalar_index("t", "BITMAP")
    shutil.copytree(theirs, ours)
    for mod in (lt, lance):
        uri = ours if mod is lt else theirs
        with pytest.raises(OSError, match="a_idx"):
            mod.dataset(uri).alter_columns({"path": "a", "data_type": pa.int32()})
    _both(ours, theirs, lambda d: d.add_columns({"b": "a + 1"}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "a", "name": "aa"}))
    for uri in (ours, theirs):
        ds = lance.dataset(uri)
        assert sorted((i.name, tuple(i.field_names)) for i in ds.describe_indices()) == [
            ("a_idx", ("aa",)),
            ("t_idx", ("t",)),
        ]
        assert ds.to_table(filter="aa = 3 and t = 's3'").num_rows == 1


def test_blob_v2_columns(tmp_path):
    from lance.blob import blob_array

    values = [b"x" * i for i in range(8)]
    table = pa.table({"a": pa.array(range(8), pa.int64()), "blob": blob_array(values)})
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    lance.write_dataset(table, theirs, data_storage_version="2.2", max_rows_per_file=3)
    shutil.copytree(theirs, ours)
    _both(ours, theirs, lambda d: d.add_columns({"b": "a + 1"}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "a", "data_type": pa.int32()}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "blob", "name": "bytes"}))
    assert [f.read() for f in lance.dataset(ours).take_blobs("bytes", indices=[2, 5])] == [b"xx", b"x" * 5]
    assert [f.read() for f in lt.dataset(ours).take_blobs("bytes", indices=[2, 5])] == [b"xx", b"x" * 5]
    _both(ours, theirs, lambda d: d.drop_columns(["bytes"]))


def test_non_nullable_fields_as_pylance_records_them(tmp_path):
    ours, theirs = _copies(tmp_path, "2.2")
    _both(ours, theirs, lambda d: d.alter_columns({"path": "a", "nullable": False}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "t", "name": "tt"}))
    _both(ours, theirs, lambda d: d.add_columns({"b": "a * 2", "one": "1"}))  # not nullable, as a is not
    _both(ours, theirs, lambda d: d.add_columns({"c": "tt"}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "b", "nullable": False, "data_type": pa.int32()}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "a", "nullable": True, "data_type": pa.int32()}))
    _both(ours, theirs, lambda d: d.drop_columns(["tt"]))


def _nested_copies(tmp_path: Path, version: str) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    n = 9
    inner = pa.StructArray.from_arrays(
        [pa.array(range(n), pa.int32()), pa.array([f"q{i}" for i in range(n)])], ["p", "q"]
    )
    s = pa.StructArray.from_arrays(
        [pa.array(range(n), pa.int64()), pa.array([f"y{i}" if i % 4 else None for i in range(n)]), inner],
        ["x", "y", "in"],
        mask=pa.array([i == 4 for i in range(n)]),
    )
    lance.write_dataset(
        pa.table({"k": range(n), "s": s}), theirs, data_storage_version=version, max_rows_per_file=4
    )
    lance.dataset(theirs).delete("k = 2")
    shutil.copytree(theirs, ours)
    return ours, theirs


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_nested_casts_match_pylance(tmp_path, version):
    ours, theirs = _nested_copies(tmp_path, version)
    _both(ours, theirs, lambda d: d.alter_columns({"path": "s.y", "data_type": pa.large_string()}))
    _both(ours, theirs, lambda d: d.alter_columns({"path": "s.in.p", "data_type": pa.int64(), "name": "pp"}))
    _both(
        ours,
        theirs,
        lambda d: d.alter_columns(
            {"path": "s.x", "data_type": pa.int32()}, {"path": "k", "data_type": pa.int32()}
        ),
    )
    _both(ours, theirs, lambda d: d.drop_columns(["s.in.q"]))
    _both(ours, theirs, lambda d: d.add_columns({"b": "k + 1"}))
    lt.dataset(ours).compact_files()
    lance.dataset(theirs).optimize.compact_files()
    assert_tables_equal(lt.dataset(ours).to_table(), lance.dataset(theirs).to_table())
    assert_tables_equal(lance.dataset(ours).to_table(), lance.dataset(theirs).to_table())


def test_nested_casts_are_refused_on_format_2_0(tmp_path):
    # pylance casts it, but its own result does not read back (its 2.0 reader runs out of
    # columns for the struct): refused, naming the column and the reason
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    s = pa.StructArray.from_arrays([pa.array([1, 2], pa.int64()), pa.array(["a", "b"])], ["x", "y"])
    lance.write_dataset(pa.table({"s": s}), ours, data_storage_version="2.0")
    shutil.copytree(ours, theirs)
    with pytest.raises(lt.SchemaChangeError, match=r"'s\.x'.*2\.1 or later"):
        lt.dataset(ours).alter_columns({"path": "s.x", "data_type": pa.int32()})
    assert lt.dataset(ours).version == 1
    lance.dataset(theirs).alter_columns({"path": "s.x", "data_type": pa.int32()})
    with pytest.raises(Exception, match="column indices"):
        lance.dataset(theirs).to_table()


def test_pylance_legacy_nested_cast_reads_and_we_write_it_the_same_way(tmp_path):
    ours, theirs = _nested_copies(tmp_path, "legacy")
    _both(ours, theirs, lambda d: d.alter_columns({"path": "s.in.p", "data_type": pa.int64()}))
    # the structs above the cast field are tombstones in the older files, as pylance lists them
    for uri in (ours, theirs):
        files = [f.fields for fr in lance.dataset(uri).get_fragments() for f in fr.data_files()]
        assert files[:2] == [[0, -2, 2, 3, -2, 5, 6], [1, 4, 7]], files
    assert_tables_equal(lt.dataset(theirs).to_table(), lance.dataset(theirs).to_table())
    assert_tables_equal(
        lt.dataset(theirs).to_table(filter="s.x > 4"), lance.dataset(theirs).to_table(filter="s.x > 4")
    )
    # a second nested cast (pylance 14's own panics on legacy files): pylance reads ours
    lt.dataset(ours).alter_columns({"path": "s.y", "data_type": pa.large_string()})
    lt.dataset(ours).add_columns({"b": "k + 1"})
    lt.dataset(ours).compact_files()
    assert_tables_equal(lt.dataset(ours).to_table(), lance.dataset(ours).to_table())
    assert lance.dataset(ours).schema.field("s").type.field("y").type == pa.large_string()


def test_merge_columns_reading_only_system_columns_matches_pylance(tmp_path: Path) -> None:
    """A UDF that reads only ``_rowid``/``_rowaddr`` (no data column) gets them, as in pylance."""
    results = []
    for mod, name in ((lt, "ours"), (lance, "pylance")):
        uri = tmp_path / name
        mod.write_dataset(pa.table({"a": range(10)}), uri, max_rows_per_file=4)
        mod.dataset(uri).delete("a = 5")
        ds = mod.dataset(uri)
        frags, schema = [], None
        for frag in ds.get_fragments():
            udf = lambda b: pa.record_batch({"rid": b["_rowid"], "addr": b["_rowaddr"]})  # noqa: E731
            metadata, schema = frag.merge_columns(udf, columns=["_rowid", "_rowaddr"])
            frags.append(metadata)
        merge = mod.LanceOperation.Merge(frags, schema)
        results.append(mod.LanceDataset.commit(uri, merge, read_version=ds.version).to_table())
    assert results[0].equals(results[1])


def test_drops_keep_fragments_whose_files_keep_fields_and_drop_emptied_files(tmp_path):
    ours, theirs = _copies(tmp_path, "2.2")
    for uri in (ours, theirs):  # more fragments, then a column in files of its own
        lance.write_dataset(lance.dataset(uri).to_table().slice(0, 3), uri, mode="append")
    _both(ours, theirs, lambda d: d.add_columns({"b": "a * 2"}))
    _both(ours, theirs, lambda d: d.drop_columns(["t"]))  # its files keep other fields
    _both(ours, theirs, lambda d: d.drop_columns(["b"]))  # its own files go
    _both(ours, theirs, lambda d: d.alter_columns({"path": "a", "name": "a2"}))

    def files(uri: str) -> list[list[list[int]]]:
        return [[f.fields for f in fr.data_files()] for fr in lance.dataset(uri).get_fragments()]

    assert files(ours) == files(theirs)
    assert all(len(fr) == 1 for fr in files(ours))
