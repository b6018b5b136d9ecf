"""merge_insert against pylance 14: the same merge on copies of one dataset (legacy, 2.0, 2.2,
with and without stable row ids) gives the same rows, statistics and row ids; pylance keeps writing
our result; errors are pylance's kinds; indexed rows stay correctly indexed."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import (
    InputTypeError,
    MergeInsertError,
    MergeSourceError,
    UnsupportedOperationError,
)

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

FORMATS = [("legacy", False), ("2.0", False), ("2.2", False), ("2.0", True), ("2.2", True)]
SORT = [("id", "ascending"), ("v", "ascending")]


def _target() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2, 3, None, 5, 6, 7, 8, 9], pa.int64()),
            "v": ["a", "b", "c", "d", "e", "f", "g", "h", "i"],
            "x": [1.0, 2, 3, 4, 5, 6, 7, 8, 9],
        }
    )


def _source() -> pa.Table:
    # 2, 3 match; 7, 8, 9 match the whole last fragment; None and 10 (twice) match nothing
    return pa.table(
        {
            "id": pa.array([2, 3, None, 10, 10, 7, 8, 9], pa.int64()),
            "v": ["B", "C", "N", "J", "J2", "G", "H", "I"],
            "x": [0.5, 30, 0, 100, 101, 70, 80, 90],
        }
    )


def _copies(tmp_path, fmt: str, stable: bool, table: pa.Table | None = None) -> tuple[str, str]:
    kw = {"max_rows_per_file": 3, "data_storage_version": fmt}
    if stable:
        kw["enable_stable_row_ids"] = True
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(table if table is not None else _target(), theirs, **kw)
    shutil.copytree(theirs, ours)
    return ours, theirs


def _rows(uri: str, stable: bool) -> pa.Table:
    return lance.dataset(uri).to_table(with_row_id=stable).sort_by(SORT)


CLAUSES = {
    "upsert": lambda b: b.when_matched_update_all().when_not_matched_insert_all(),
    "replace": lambda b: (
        b.when_matched_update_all().when_not_matched_insert_all().when_not_matched_by_source_delete()
    ),
    "conditional": lambda b: b.when_matched_update_all("source.x > target.x").when_not_matched_insert_all(),
    "insert_only": lambda b: b.when_not_matched_insert_all(),
    "matched_delete": lambda b: b.when_matched_delete(),
    "delete_by_source": lambda b: b.when_not_matched_by_source_delete("x > 4"),
    "update_only": lambda b: b.when_matched_update_all(),
}


@pytest.mark.parametrize(("fmt", "stable"), FORMATS)
@pytest.mark.parametrize("clauses", sorted(CLAUSES))
def test_same_result_as_pylance(tmp_path, fmt, stable, clauses):
    ours, theirs = _copies(tmp_path, fmt, stable)
    expected = CLAUSES[clauses](lance.dataset(theirs).merge_insert("id")).execute(_source())
    got = CLAUSES[clauses](lt.dataset(ours).merge_insert("id")).execute(_source())
    assert got == expected
    assert _rows(ours, stable).equals(_rows(theirs, stable))  # row ids too, with stable row ids
    assert lance.dataset(ours).schema == lance.dataset(theirs).schema
    ours_txn = lance.dataset(ours).read_transaction(2)
    theirs_txn = lance.dataset(theirs).read_transaction(2)
    assert type(ours_txn.operation) is type(theirs_txn.operation)
    assert sorted(ours_txn.operation.removed_fragment_ids) == sorted(
        theirs_txn.operation.removed_fragment_ids
    )
    assert sorted(f.id for f in ours_txn.operation.updated_fragments) == sorted(
        f.id for f in theirs_txn.operation.updated_fragments
    )
    assert ours_txn.operation.fields_for_preserving_frag_bitmap == (
        theirs_txn.operation.fields_for_preserving_frag_bitmap
    )
    # pylance keeps writing ours; we keep writing pylance's
    for uri in (ours, theirs):
        lance.write_dataset(
            pa.table({"id": pa.array([100], pa.int64()), "v": ["z"], "x": [1.0]}), uri, mode="append"
        )
        lance.dataset(uri).delete("id = 10")
        lt.dataset(uri).merge_insert("id").when_matched_update_all().execute(
            pa.table({"id": pa.array([100, 1], pa.int64()), "v": ["zz", "A"], "x": [2.0, 1.5]})
        )
    assert _rows(ours, stable).equals(_rows(theirs, stable))
    assert lt.dataset(ours).to_table().sort_by(SORT).equals(lance.dataset(ours).to_table().sort_by(SORT))


@pytest.mark.parametrize(("fmt", "stable"), [("2.0", False), ("2.2", True)])
def test_several_key_columns(tmp_path, fmt, stable):
    ours, theirs = _copies(tmp_path, fmt, stable)
    src = pa.table({"id": pa.array([2, 3, 4], pa.int64()), "v": ["b", "X", "d"], "x": [9.0, 9, 9]})
    clauses = CLAUSES["upsert"]
    assert clauses(lt.dataset(ours).merge_insert(["id", "v"])).execute(src) == clauses(
        lance.dataset(theirs).merge_insert(["id", "v"])
    ).execute(src)
    assert _rows(ours, stable).equals(_rows(theirs, stable))


def test_sources_of_every_kind_and_column_subsets(tmp_path):
    ours, theirs = _copies(tmp_path, "2.2", True)
    src = pa.table({"v": ["B", "K"], "id": pa.array([2, 11], pa.int64())})  # no `x`, other order
    kinds = [
        src,
        src.to_batches()[0],
        src.to_pandas(),
        pa.RecordBatchReader.from_batches(src.schema, src.to_batches()),
    ]
    for data in kinds:
        expected = CLAUSES["upsert"](lance.dataset(theirs).merge_insert("id")).execute(data)
        if isinstance(data, pa.RecordBatchReader):
            data = pa.RecordBatchReader.from_batches(src.schema, src.to_batches())
        assert CLAUSES["upsert"](lt.dataset(ours).merge_insert("id")).execute(data) == expected
        assert _rows(ours, True).equals(
            _rows(theirs, True)
        )  # missing `x`: kept when updated, null when inserted
    gen = (b for b in src.to_batches())
    assert CLAUSES["upsert"](lt.dataset(ours).merge_insert("id")).execute(gen, schema=src.schema) == {
        "num_inserted_rows": 0,
        "num_updated_rows": 2,
        "num_deleted_rows": 0,
    }


def test_empty_source_commits_an_empty_update(tmp_path):
    ours, theirs = _copies(tmp_path, "2.2", False)
    empty = _source().slice(0, 0)
    assert CLAUSES["replace"](lt.dataset(ours).merge_insert("id")).execute(empty) == CLAUSES["replace"](
        lance.dataset(theirs).merge_insert("id")
    ).execute(empty)
    assert lance.dataset(ours).version == lance.dataset(theirs).version == 2
    assert _rows(ours, False).equals(_rows(theirs, False))


def test_duplicate_matched_keys_are_an_error_like_pylance(tmp_path):
    ours, theirs = _copies(tmp_path, "2.2", False)
    dup = pa.table({"id": pa.array([2, 2, 11], pa.int64()), "v": ["B", "B2", "K"], "x": [1.0, 2, 3]})
    with pytest.raises(OSError, match="multiple source rows match the same target row"):
        CLAUSES["upsert"](lance.dataset(theirs).merge_insert("id")).execute(dup)
    with pytest.raises(
        MergeSourceError, match=r"multiple source rows match the same target row on \(id = 2\)"
    ) as e:
        CLAUSES["upsert"](lt.dataset(ours).merge_insert("id")).execute(dup)
    assert isinstance(e.value, OSError)
    with pytest.raises(MergeSourceError):
        lt.dataset(ours).merge_insert("id").when_matched_delete().execute(dup)
    assert lt.dataset(ours).version == 1
    assert sorted(p.name for p in (tmp_path / "ours" / "data").iterdir()) == sorted(
        p.name for p in (tmp_path / "theirs" / "data").iterdir()
    )  # nothing of ours left behind
    # duplicates that match nothing are inserted, as pylance inserts them; insert-only ignores matches
    for clauses in ("insert_only",):
        assert CLAUSES[clauses](lt.dataset(ours).merge_insert("id")).execute(dup) == CLAUSES[clauses](
            lance.dataset(theirs).merge_insert("id")
        ).execute(dup)
    assert _rows(ours, False).equals(_rows(theirs, False))


def test_matched_fail_and_configuration_errors(tmp_path):
    ours, theirs = _copies(tmp_path, "2.2", False)
    with pytest.raises(OSError, match="found matching row"):
        lance.dataset(theirs).merge_insert("id").when_matched_fail().when_not_matched_insert_all().execute(
            _source()
        )
    with pytest.raises(MergeSourceError, match="found matching row with key values: id = 2"):
        lt.dataset(ours).merge_insert("id").when_matched_fail().when_not_matched_insert_all().execute(
            _source()
        )
    assert lt.dataset(ours).version == 1
    new = pa.table({"id": pa.array([50], pa.int64()), "v": ["n"], "x": [5.0]})
    assert lt.dataset(ours).merge_insert("id").when_matched_fail().when_not_matched_insert_all().execute(
        new
    ) == {
        "num_inserted_rows": 1,
        "num_updated_rows": 0,
        "num_deleted_rows": 0,
    }
    ds = lt.dataset(ours)
    with pytest.raises(MergeInsertError, match="not configured to change the data") as e:
        ds.merge_insert("id").execute(new)
    assert isinstance(e.value, ValueError)
    with pytest.raises(ValueError, match="requires join keys"):
        ds.merge_insert()
    with pytest.raises(MergeInsertError, match="'nope' does not exist"):
        ds.merge_insert("nope")
    with pytest.raises(MergeSourceError, match="unexpected=\\['extra'\\]") as e:
        ds.merge_insert("id").when_matched_update_all().execute(new.append_column("extra", pa.array([1])))
    assert isinstance(e.value, OSError)
    with pytest.raises(MergeSourceError, match="`id` should have type int64 but type was int32"):
        ds.merge_insert("id").when_matched_update_all().execute(
            new.set_column(0, "id", pa.array([50], pa.int32()))
        )
    with pytest.raises(InputTypeError):
        ds.merge_insert("id").when_matched_update_all().execute(42)
    with pytest.raises(UnsupportedOperationError, match="rewrite_columns"):
        ds.merge_insert("id").write_mode("rewrite_columns")
    with pytest.raises(lt.BasePathError, match="'b' not found"):
        ds.merge_insert("id").when_not_matched_insert_all().target_bases(["b"]).execute(new)
    builder = (
        ds.merge_insert("id").use_index(False).conflict_retries(3).retry_timeout(dt.timedelta(seconds=5))
    )
    assert builder.write_mode("rewrite_rows") is builder
    assert "on=[id]" in builder.when_matched_update_all().explain_plan()


def test_primary_key_from_the_schema(tmp_path):
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), False, metadata={"lance-schema:unenforced-primary-key": "true"}),
            pa.field("v", pa.string()),
        ]
    )
    uri = str(tmp_path / "pk")
    lance.write_dataset(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema), uri)
    src = pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=schema)
    assert lt.dataset(uri).merge_insert().when_matched_update_all().when_not_matched_insert_all().execute(
        src
    ) == {
        "num_inserted_rows": 1,
        "num_updated_rows": 1,
        "num_deleted_rows": 0,
    }
    assert lance.dataset(uri).to_table().sort_by("id").to_pydict() == {"id": [1, 2, 3], "v": ["a", "B", "c"]}


@pytest.mark.parametrize("stable", [False, True])
def test_execute_uncommitted_commits_with_pylance_and_with_us(tmp_path, stable):
    ours, theirs = _copies(tmp_path, "2.2", stable)
    txn, stats = CLAUSES["upsert"](lt.dataset(ours).merge_insert("id")).execute_uncommitted(_source())
    assert stats == CLAUSES["upsert"](lance.dataset(theirs).merge_insert("id")).execute(_source())
    assert lt.dataset(ours).version == 1
    assert isinstance(txn, lt.Transaction) and txn.read_version == 1
    assert isinstance(txn.operation, lt.LanceOperation.Update)
    lt.Dataset.commit(ours, txn.operation, read_version=txn.read_version)
    assert _rows(ours, stable).equals(_rows(theirs, stable))


def test_handle_moves_to_the_merged_version(tmp_path):
    ours, _ = _copies(tmp_path, "2.2", False)
    ds = lt.dataset(ours)
    CLAUSES["upsert"](ds.merge_insert("id")).execute(_source())
    assert lt.dataset(ours).version == ds.version == 2


def test_source_larger_than_the_memory_limit_spills(tmp_path):
    n = 20_000
    table = pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "v": pa.array([f"r{i}" for i in range(n)]),
            "x": np.arange(n) * 1.0,
        }
    )
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(table, theirs, max_rows_per_file=1000, enable_stable_row_ids=True)
    shutil.copytree(theirs, ours)
    ids = np.arange(n // 2, n + n // 2)
    src = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"s{i}" for i in ids]), "x": ids * 2.0})
    reader = pa.RecordBatchReader.from_batches(src.schema, src.to_batches(max_chunksize=1000))
    builder = CLAUSES["replace"](lt.dataset(ours).merge_insert("id")).memory_limit(32 * 1024)  # 10 key passes
    got = builder.execute(reader)
    assert got == CLAUSES["replace"](lance.dataset(theirs).merge_insert("id")).execute(src)
    mine, ref = _rows(ours, True), _rows(theirs, True)
    assert mine.drop_columns(["_rowid"]).equals(ref.drop_columns(["_rowid"]))
    # updated rows keep their row ids; inserted rows get the same new ids (in pylance's join order)
    assert mine["_rowid"].to_numpy()[: n // 2].tolist() == list(range(n // 2, n))
    assert ref["_rowid"].to_numpy()[: n // 2].tolist() == list(range(n // 2, n))
    assert sorted(mine["_rowid"].to_pylist()) == sorted(ref["_rowid"].to_pylist())
    # the ambiguity check holds across key passes too
    dup = pa.concat_tables([src.slice(0, 5), src.slice(n - 5, 5), src.slice(2, 1)])
    with pytest.raises(MergeSourceError, match="multiple source rows"):
        CLAUSES["upsert"](lt.dataset(ours).merge_insert("id")).memory_limit(64).execute(
            pa.RecordBatchReader.from_batches(dup.schema, dup.to_batches(max_chunksize=3))
        )


@pytest.mark.parametrize("stable", [False, True])
def test_pylance_indices_stay_correct(tmp_path, stable):
    n = 3000
    table = pa.table(
        {
            "id": pa.array(np.arange(n), pa.int64()),
            "v": pa.array([str(i % 7) for i in range(n)]),
            "x": np.arange(n) * 1.0,
        }
    )
    ours, theirs = (str(tmp_path / "ours"), str(tmp_path / "theirs"))
    for uri in (ours, theirs):
        lance.write_dataset(table, uri, max_rows_per_file=1000, enable_stable_row_ids=stable)
        lance.dataset(uri).create_scalar_index("id", "BTREE")
        lance.dataset(uri).create_scalar_index("v", "BITMAP")
    ids = np.arange(2000, 3500)  # the whole last fragment and more
    src = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(["u"] * ids.size), "x": ids * 10.0})
    CLAUSES["upsert"](lance.dataset(theirs).merge_insert("id")).execute(src)
    CLAUSES["upsert"](lt.dataset(ours).merge_insert("id")).execute(src)
    mine, ref = lance.dataset(ours), lance.dataset(theirs)

    def coverage(ds):
        return sorted(
            (d.name, sorted(sorted(seg.fragment_ids) for seg in d.segments)) for d in ds.describe_indices()
        )

    assert coverage(mine) == coverage(ref)  # rewritten rows left unindexed, as pylance leaves them
    for flt in ("id >= 1990 and id < 2010", "id = 2999", "id > 3400", "v = 'u'", "v = '3'"):
        indexed = mine.to_table(filter=flt).sort_by("id")
        assert indexed.equals(mine.to_table(filter=flt, use_scalar_index=False).sort_by("id"))
        assert indexed.equals(ref.to_table(filter=flt).sort_by("id"))


def test_a_source_past_the_limit_is_read_back_from_a_temporary_file():
    from lance_table.table.operations.merge_source import read_source

    ids = np.arange(5000)
    src = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([str(i) for i in ids])})
    reader = pa.RecordBatchReader.from_batches(src.schema, src.to_batches(max_chunksize=100))
    with read_source(reader, None, src.schema, ("id",), "mem", limit=1024) as source:
        assert source.spilled and source.table.equals(src)
        spill = source._spill_dir
        assert len(list(source.key_ranges(("id",), 1600))) == 50  # 100 keys (8 bytes + index) a range
    assert not os.path.exists(spill)
    with read_source(src, None, src.schema, ("id",), "mem", limit=1 << 30) as source:
        assert not source.spilled


@pytest.mark.parametrize(
    "keys",
    [
        pa.array([5, 1, None, 3, 4, 2], pa.int32()),  # dense integers: a lookup table
        pa.array([5, 1_000_000_007, None, -(2**40), 4, 2], pa.int64()),  # sparse: a hash lookup
        pa.array(["e", "a", None, "c", "d", "b"]),  # strings: a hash lookup
        pa.array([2**63 + 5, 1, None, 3, 4, 2], pa.uint64()),
        pa.array([1, 1, 2, 3, 3, 4], pa.int64()),  # ascending, repeated: one source row, two targets
    ],
    ids=["dense", "sparse", "strings", "uint64", "repeated"],
)
@pytest.mark.parametrize("duplicates", [False, True], ids=["unique", "duplicates"])
def test_every_kind_of_key(tmp_path, keys, duplicates):
    target = pa.table({"k": keys, "v": pa.array(range(6), pa.int64())})
    ours, theirs = _copies(tmp_path, "2.2", True, target)
    # four source rows match target rows; a new key (twice with duplicates: both are inserted)
    src_keys = pa.concat_arrays([keys.take(pa.array([1, 5, 3])), keys.take(pa.array([2]))])
    new = pa.array(["z"] if pa.types.is_string(keys.type) else [77], keys.type)
    src_keys = pa.concat_arrays([src_keys, *([new, new] if duplicates else [new])])
    src = pa.table({"k": src_keys, "v": pa.array(range(100, 100 + len(src_keys)), pa.int64())})
    clauses = CLAUSES["replace"]
    assert clauses(lt.dataset(ours).merge_insert("k")).execute(src) == clauses(
        lance.dataset(theirs).merge_insert("k")
    ).execute(src)
    assert lance.dataset(ours).to_table().sort_by("v").equals(lance.dataset(theirs).to_table().sort_by("v"))


def test_data_storage_version_of_the_new_files(tmp_path):
    ours, theirs = _copies(tmp_path, "2.0", False)
    for uri, mod in ((ours, lt), (theirs, lance)):
        CLAUSES["upsert"](mod.dataset(uri).merge_insert("id")).data_storage_version("2.0").execute(_source())
    assert _rows(ours, False).equals(_rows(theirs, False))
    with pytest.raises(ValueError, match="another family"):
        lt.dataset(ours).merge_insert("id").data_storage_version("legacy")
    with pytest.raises(ValueError, match="bogus"):
        lt.dataset(ours).merge_insert("id").data_storage_version("bogus")
    with pytest.raises(UnsupportedOperationError, match="mix formats"):  # pylance writes 2.1 files here
        lt.dataset(ours).merge_insert("id").data_storage_version("2.1")


def test_analyze_plan_runs_without_committing_or_leaving_files(tmp_path):
    ours, _ = _copies(tmp_path, "2.2", False)
    before = sorted(p.name for p in (tmp_path / "ours" / "data").iterdir())
    text = CLAUSES["replace"](lt.dataset(ours).merge_insert("id")).analyze_plan(_source())
    assert text.startswith("MergeInsert: elapsed=")
    assert "num_inserted_rows=3" in text and "num_updated_rows=5" in text and "num_deleted_rows=4" in text
    assert lt.dataset(ours).version == 1
    assert sorted(p.name for p in (tmp_path / "ours" / "data").iterdir()) == before
    assert not (tmp_path / "ours" / "_deletions").exists() or not any(
        (tmp_path / "ours" / "_deletions").iterdir()
    )


def test_more_updated_and_inserted_rows_than_one_write_batch(tmp_path):
    from lance_table.table.operations.merge_plan import WRITE_BATCH_ROWS

    n = WRITE_BATCH_ROWS + 5000
    table = pa.table({"id": pa.array(np.arange(n), pa.int64()), "x": np.arange(n) * 1.0})
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(table, theirs, max_rows_per_file=20_000, enable_stable_row_ids=True)
    shutil.copytree(theirs, ours)
    ids = np.arange(n + WRITE_BATCH_ROWS + 10)[::-1]  # every row updated, as many again inserted
    src = pa.table({"id": pa.array(ids, pa.int64()), "x": ids * 3.0})
    for uri, mod in ((ours, lt), (theirs, lance)):
        CLAUSES["upsert"](mod.dataset(uri).merge_insert("id")).execute(src)
    mine = lance.dataset(ours).to_table(with_row_id=True).sort_by("id")
    ref = lance.dataset(theirs).to_table(with_row_id=True).sort_by("id")
    assert mine.drop_columns(["_rowid"]).equals(ref.drop_columns(["_rowid"]))
    assert mine["_rowid"].to_numpy()[:n].tolist() == list(range(n))  # updated rows keep their ids
    assert ref["_rowid"].to_numpy()[:n].tolist() == list(range(n))
    assert sorted(mine["_rowid"].to_pylist()) == sorted(ref["_rowid"].to_pylist())


def test_every_pylance_builder_method_with_its_parameters():
    import inspect

    from lance_table.table.operations.merge_insert import MergeInsertBuilder

    theirs = sys.modules["lance.dataset"].MergeInsertBuilder
    names = [n for n in dir(theirs) if not n.startswith("_") and not n.endswith("_batches")]
    assert {"when_matched_update_all", "execute_uncommitted", "conflict_retries"} <= set(names)
    pairs = [(getattr(theirs, n), getattr(MergeInsertBuilder, n)) for n in names]
    pairs.append((lance.LanceDataset.merge_insert, lt.LanceDataset.merge_insert))
    for their, our in pairs:
        try:
            yours = inspect.signature(their).parameters
        except ValueError:  # a method of the extension module without a signature
            continue
        mine = inspect.signature(our).parameters
        assert set(yours) <= set(mine), (our, sorted(set(yours) - set(mine)))
        positional = [n for n, p in yours.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert [n for n in mine if n in positional] == positional, our


@pytest.mark.parametrize(("fmt", "stable"), [("2.0", False), ("2.2", True)])
def test_nested_and_list_columns(tmp_path, rows, fmt, stable):
    target = rows(0, 300)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(
        target, theirs, max_rows_per_file=100, data_storage_version=fmt, enable_stable_row_ids=stable
    )
    shutil.copytree(theirs, ours)
    src = rows(250, 100, seed=3).select(
        ["id", "x", "tags", "v"]
    )  # no `s`: kept when updated, null when inserted
    clauses = CLAUSES["replace"]
    assert clauses(lt.dataset(ours).merge_insert("id")).execute(src) == clauses(
        lance.dataset(theirs).merge_insert("id")
    ).execute(src)
    assert lance.dataset(ours).to_table().sort_by("id").equals(lance.dataset(theirs).to_table().sort_by("id"))
    assert lt.dataset(theirs).to_table().sort_by("id").equals(lance.dataset(theirs).to_table().sort_by("id"))
