"""``update`` against pylance 14: the same update on copies of the same dataset gives the same rows,
row ids, row versions, fragments and Update transaction; each library keeps writing the other's
result; pylance's indexed queries stay right after ours."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import (
    ColumnNotFoundError,
    CommitConflictError,
    FilterError,
    UnsupportedFormatError,
    UpdateError,
)
from lance_table.fragment import write_fragments

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

FORMATS = ["legacy", "2.0", "2.2"]


def _table(n: int = 10) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([float(i) for i in range(n)]),
            "s": pa.array([f"s{i}" if i % 4 else None for i in range(n)]),
            "st": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
            "i8": pa.array([i % 100 for i in range(n)], pa.int8()),
        }
    )


def _copies(tmp_path, fmt: str, stable: bool, n: int = 10, rows_per_file: int = 4) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(
        _table(n),
        ours,
        max_rows_per_file=rows_per_file,
        data_storage_version=fmt,
        enable_stable_row_ids=stable,
    ).delete("id = 0")
    shutil.copytree(ours, theirs)
    return ours, theirs


def _state(uri: str, stable: bool) -> tuple:
    ds = lance.dataset(uri)
    system = ["_row_created_at_version", "_row_last_updated_at_version"] if stable else []
    table = ds.to_table(columns=ds.schema.names + system, with_row_id=True)
    frags = [
        (
            f.fragment_id,
            f.metadata.physical_rows,
            f.metadata.deletion_file.num_deleted_rows if f.metadata.deletion_file else 0,
            [
                (d.fields, d.column_indices, d.file_major_version, d.file_minor_version)
                for d in f.metadata.files
            ],
        )
        for f in ds.get_fragments()
    ]
    txn = ds.read_transaction(ds.version)
    op = txn.operation
    shape = None
    if type(op).__name__ == "Update":
        shape = (
            sorted(op.removed_fragment_ids),
            sorted(f.id for f in op.updated_fragments),
            [(f.physical_rows, f.files[0].fields) for f in op.new_fragments],
            list(op.fields_modified),
            sorted(op.fields_for_preserving_frag_bitmap),
            op.update_mode,
        )
    return table, ds.schema, frags, ds.version, shape


UPDATES = [
    ({"x": "x * 10", "s": "'z'"}, "id >= 3 and id < 6"),
    ({"st": "st", "i8": "i8 + 100"}, None),  # every row; int8 wraps as pylance's does
    ({"id": "id + 1000", "s": "NULL"}, "id % 4 = 1"),
    ({"x": "1"}, "id > 100"),  # nothing matches: a version all the same
    ({"s": "upper(s) || '!'"}, "x < 4"),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_ids"])
@pytest.mark.parametrize("case", range(len(UPDATES)))
def test_update_matches_pylance(tmp_path, fmt, stable, case):
    updates, where = UPDATES[case]
    ours, theirs = _copies(tmp_path, fmt, stable)
    ds = lt.dataset(ours)
    got = ds.update(updates, where)
    expected = lance.dataset(theirs).update(updates, where)
    assert got == expected
    assert _state(ours, stable) == _state(theirs, stable)
    # each keeps writing the other's result: pylance on ours, lance_table on pylance's
    for uri, lib in ((ours, lance), (theirs, lt)):
        ds2 = lib.dataset(uri)
        ds2.update({"x": "x + 0.5"}, where="id % 2 = 1")
        lib.dataset(uri).delete("id = 4")
        lib.write_dataset(_table(3), uri, mode="append")
    assert _state(ours, stable)[:2] == _state(theirs, stable)[:2]


def test_update_keeps_row_ids_and_versions(tmp_path):
    ours, _ = _copies(tmp_path, "2.2", True)
    lt.dataset(ours).update({"x": "-x"}, where="id IN (2, 5, 9)")
    t = lance.dataset(ours).to_table(
        columns=["id", "x", "_row_created_at_version", "_row_last_updated_at_version"], with_row_id=True
    )
    by_id = {r["id"]: r for r in t.to_pylist()}
    for i in (2, 5, 9):
        assert by_id[i]["_rowid"] == i and by_id[i]["x"] == -float(i)
        assert (by_id[i]["_row_created_at_version"], by_id[i]["_row_last_updated_at_version"]) == (1, 3)
    assert (by_id[3]["_row_created_at_version"], by_id[3]["_row_last_updated_at_version"]) == (1, 1)
    assert lt.dataset(ours)._take_rows([5]).to_pydict()["x"] == [-5.0]


def test_update_rewrites_many_fragments_in_bounded_chunks(tmp_path):
    uri = str(tmp_path / "big")
    n = 200_000
    t = pa.table({"id": pa.array(np.arange(n)), "v": pa.array(np.arange(n) * 2.0)})
    lance.write_dataset(t, uri, max_rows_per_file=30_000)
    theirs = str(tmp_path / "theirs")
    shutil.copytree(uri, theirs)
    assert lt.dataset(uri).update({"v": "v + 1"}, "id % 3 = 0") == {"num_rows_updated": 66_667}
    lance.dataset(theirs).update({"v": "v + 1"}, "id % 3 = 0")
    a = lance.dataset(uri).to_table().sort_by("id")
    b = lance.dataset(theirs).to_table().sort_by("id")
    assert a.equals(b)


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_ids"])
@pytest.mark.parametrize("column", ["id", "x"])
def test_indexed_queries_after_update(tmp_path, stable, column):
    ours, theirs = _copies(tmp_path, "2.2", stable, n=40, rows_per_file=8)
    for uri in (ours, theirs):
        ds = lance.dataset(uri)
        ds.create_scalar_index("id", "BTREE")
        ds.create_scalar_index("s", "BITMAP")
    lt.dataset(ours).update({column: f"{column} + 1000", "s": "'new'"}, where="id >= 5 and id < 13")
    lance.dataset(theirs).update({column: f"{column} + 1000", "s": "'new'"}, where="id >= 5 and id < 13")
    from lance_table._proto import table_pb2

    sections = [lt.dataset(u).manifest.index_section for u in (ours, theirs)]
    indices = [table_pb2.IndexSection.FromString(s).indices for s in sections]
    assert [(i.name, i.fragment_bitmap, list(i.fields)) for i in indices[0]] == [
        (i.name, i.fragment_bitmap, list(i.fields)) for i in indices[1]
    ]
    ds = lance.dataset(ours)
    for q in ("id = 6", "id = 1006", "id = 20", "id < 8", "s = 'new'", "s = 's9'", "x > 1000"):
        assert "ScalarIndexQuery" in ds.scanner(filter=q).explain_plan() or q.startswith("x")
        indexed = ds.to_table(filter=q).sort_by("id")
        full = ds.to_table(filter=q, use_scalar_index=False).sort_by("id")
        assert indexed.equals(full), q
        assert indexed.equals(lance.dataset(theirs).to_table(filter=q).sort_by("id")), q


def test_update_errors_change_nothing(tmp_path):
    ours, _ = _copies(tmp_path, "2.2", False)
    ds = lt.dataset(ours)
    before = sorted(p.name for p in (tmp_path / "ours" / "data").iterdir())
    cases = [
        ({"nope": "1"}, None, ColumnNotFoundError),
        ({"x": "nope + 1"}, None, FilterError),
        ({}, None, UpdateError),
        ({"x": "1 +"}, None, FilterError),
        ({"x": "'abc'"}, None, FilterError),
        ({"st.a": "1"}, None, UpdateError),
        ({"x": "1"}, "nope > 1", FilterError),
        ({"x": 1}, None, TypeError),
    ]
    for updates, where, error in cases:
        with pytest.raises(error):
            ds.update(updates, where)
        with pytest.raises(ValueError if error is not TypeError else TypeError):
            lance.dataset(ours).update(updates, where)
    with pytest.raises(UnsupportedFormatError):
        ds.update({"x": "1"}, data_storage_version="2.0")
    # a value that fails on the data (an integer division by zero) leaves no file behind
    with pytest.raises(pa.ArrowInvalid):
        ds.update({"id": "id / 0"}, "id = 3")
    for updates, where in (({"id": "id % 0"}, None), ({"x": "1"}, "id % 0 = 1")):
        for side in (ds, lance.dataset(ours)):  # ours raises what pylance's update raises
            with pytest.raises(OSError):
                side.update(updates, where)
    assert lt.dataset(ours).version == 2
    assert sorted(p.name for p in (tmp_path / "ours" / "data").iterdir()) == before
    assert (
        not (tmp_path / "ours" / "_deletions").exists()
        or len(list((tmp_path / "ours" / "_deletions").iterdir())) == 1
    )


def test_two_updates_of_one_fragment_conflict_and_the_loser_retries(tmp_path):
    uri, _ = _copies(tmp_path, "2.2", True)
    a = lt.dataset(uri)
    b = lt.dataset(uri)
    a.update({"x": "x + 1"}, "id = 1")
    with pytest.raises(CommitConflictError) as err:
        b.update({"x": "x + 100"}, "id = 2", conflict_retries=0)
    assert err.value.retryable
    assert b.update({"x": "x + 100"}, "id = 2") == {"num_rows_updated": 1}  # re-run on the latest
    got = {r["id"]: r["x"] for r in lance.dataset(uri).to_table().to_pylist()}
    assert got[1] == 2.0 and got[2] == 102.0


def test_append_rebases_over_an_update(tmp_path):
    uri, _ = _copies(tmp_path, "2.2", True)
    read_version = lt.dataset(uri).version
    frags = write_fragments(_table(2), uri)  # an append planned before the update commits
    stale = lt.dataset(uri)
    lt.dataset(uri).update({"x": "0"}, "id < 5")
    stale.update({"s": "'late'"}, "id = 9")  # another fragment: rebased, not re-run
    lt.Dataset.commit(uri, lt.LanceOperation.Append(frags), read_version=read_version)
    t = lance.dataset(uri).to_table(with_row_id=True).sort_by("_rowid")
    assert t.num_rows == 11
    assert len(set(t["_rowid"].to_pylist())) == 11
    rows = {r["_rowid"]: r for r in t.to_pylist()}
    assert [rows[i]["x"] for i in range(1, 5)] == [0.0] * 4 and rows[9]["s"] == "late"
    assert [v["operation"] for v in lt.dataset(uri).versions()][-3:] == ["update", "update", "append"]


def test_update_of_a_large_fragment_with_stable_ids(tmp_path):
    n = 300_000  # one fragment read in two pieces
    t = pa.table({"id": pa.array(np.arange(n)), "v": pa.array(np.arange(n) % 1000, pa.int32())})
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(t, ours, enable_stable_row_ids=True)
    shutil.copytree(ours, theirs)
    where = "v = 7 OR id > 299990"
    assert lt.dataset(ours).update({"v": "-v"}, where) == lance.dataset(theirs).update({"v": "-v"}, where)
    assert _state(ours, True)[:4] == _state(theirs, True)[:4]


@pytest.mark.parametrize("fmt", ["2.0", "2.2"])
def test_update_of_a_dataset_with_blobs(tmp_path, fmt):
    blob = pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    t = pa.table(
        [
            pa.array(range(8), pa.int64()),
            pa.array([bytes([i]) * (i * 100 + 1) for i in range(8)], pa.large_binary()),
        ],
        schema=pa.schema([pa.field("id", pa.int64()), blob]),
    )
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(t, ours, max_rows_per_file=3, data_storage_version=fmt)
    shutil.copytree(ours, theirs)
    assert lt.dataset(ours).update({"id": "id + 100"}, "id % 2 = 0") == {"num_rows_updated": 4}
    lance.dataset(theirs).update({"id": "id + 100"}, "id % 2 = 0")
    for uri in (ours, theirs):
        ds = lance.dataset(uri)
        ids = ds.to_table(columns=["id"])["id"].to_pylist()
        blobs = [f.readall() for f in ds.take_blobs("blob", indices=list(range(len(ids))))]
        assert sorted(zip(ids, blobs)) == sorted(
            (i + 100 if i % 2 == 0 else i, bytes([i]) * (i * 100 + 1)) for i in range(8)
        )


def test_update_where_a_pyarrow_expression(tmp_path):
    import pyarrow.compute as pc

    ours, theirs = _copies(tmp_path, "2.2", False)
    where = (pc.field("id") > 5) & (pc.field("x") < 9)
    assert lt.dataset(ours).update({"x": "0"}, where) == lance.dataset(theirs).update({"x": "0"}, where)
    assert _state(ours, False)[:3] == _state(theirs, False)[:3]
