"""merge_insert and update on datasets with blob columns (blob pages of 2.0 and 2.1, blob v2 of
2.2, a dedicated sidecar too), with and without stable row ids: the same call on copies of one
dataset gives pylance's rows, blobs and statistics; pylance keeps writing our result, and we
keep writing a dataset pylance created and merged into."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

import lance_table as lt

lance = pytest.importorskip("lance")
blob_api = pytest.importorskip("lance.blob")
pytestmark = pytest.mark.interop

BIG = 4 * 1024 * 1024 + 17  # past the 4 MiB threshold: its own sidecar file in 2.2


def _schema(fmt: str) -> pa.Schema:
    blob = (
        blob_api.blob_field("b")
        if fmt == "2.2"
        else pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    )
    return pa.schema([pa.field("id", pa.int64()), pa.field("x", pa.int32()), blob])


def _blobs(fmt: str, values: list[bytes | None]) -> pa.Array:
    if fmt == "2.2":
        return blob_api.blob_array(values)
    return pa.array(values, pa.large_binary())


def _table(fmt: str, ids: list[int], x: list[int], values: list[bytes | None]) -> pa.Table:
    return pa.table(
        [pa.array(ids, pa.int64()), pa.array(x, pa.int32()), _blobs(fmt, values)], schema=_schema(fmt)
    )


def _target(fmt: str) -> pa.Table:
    values: list[bytes | None] = [bytes([i]) * (i * 300 + 1) for i in range(10)]
    values[3] = b"\x03" * (BIG if fmt == "2.2" else 5000)
    values[6] = None
    return _table(fmt, list(range(10)), list(range(10)), values)


def _merge(fmt: str, kind: str) -> pa.Table:
    if kind == "all_columns":  # 2, 3 (the big blob), 4 updated with new blobs; 20 inserted
        return _table(fmt, [2, 3, 4, 20], [50] * 4, [b"new" * (i + 1) for i in range(4)])
    # a source without the blob column: the matched rows keep their blobs (3's is the big one)
    return pa.table({"id": pa.array([3, 6, 7, 20], pa.int64()), "x": pa.array([7] * 4, pa.int32())})


CLAUSES = {
    "upsert": lambda b: b.when_matched_update_all().when_not_matched_insert_all(),
    "conditional": lambda b: b.when_matched_update_all("source.x > target.x"),
    "delete": lambda b: b.when_matched_delete(),
    "by_source": lambda b: b.when_not_matched_by_source_delete("id > 8").when_not_matched_insert_all(),
}


def _state(uri: str) -> tuple[list[dict[str, object]], list[bytes | None]]:
    ds = lance.dataset(uri)
    rows = ds.to_table(columns=["id", "x"], with_row_id=True).to_pylist()
    blobs = ds.take_blobs("b", indices=list(range(len(rows))))
    theirs = [f.readall() if f is not None else None for f in blobs]
    ours = lt.dataset(uri).take_blobs("b", indices=list(range(len(rows))))
    assert [f.readall() if f is not None else None for f in ours] == theirs
    return rows, theirs


def _copies(tmp_path, fmt: str, stable: bool, creator: object) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    creator.write_dataset(  # type: ignore[attr-defined]
        _target(fmt), theirs, max_rows_per_file=4, data_storage_version=fmt, enable_stable_row_ids=stable
    )
    shutil.copytree(theirs, ours)
    return ours, theirs


# (format, stable row ids, who creates the dataset)
CASES = [("2.0", False, "pylance"), ("2.1", True, "ours"), ("2.2", False, "ours"), ("2.2", True, "pylance")]


# every clause on 2.2 (blob v2, sidecars); the upserts on the blob pages of 2.0 and 2.1
MERGES = [
    (*case, clauses, source)
    for case in CASES
    for clauses, source in [
        ("upsert", "all_columns"),
        ("upsert", "no_blobs"),
        ("conditional", "no_blobs"),
        ("delete", "no_blobs"),
        ("by_source", "all_columns"),
    ]
    if case[0] == "2.2" or clauses == "upsert"
]


@pytest.mark.parametrize(("fmt", "stable", "creator", "clauses", "source"), MERGES)
def test_merge_insert_with_blobs_as_pylance(tmp_path, fmt, stable, creator, clauses, source):
    ours, theirs = _copies(tmp_path, fmt, stable, lt if creator == "ours" else lance)
    data = _merge(fmt, source)
    got = CLAUSES[clauses](lt.dataset(ours).merge_insert("id")).execute(data)
    want = CLAUSES[clauses](lance.dataset(theirs).merge_insert("id")).execute(data)
    assert got == want
    assert _state(ours) == _state(theirs)
    # pylance keeps writing ours (and we keep writing the copy pylance merged into)
    more = _table(fmt, [2, 30], [-1, -1], [b"again", b"x" * 70_000])
    lance.dataset(ours).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        more
    )
    lt.dataset(theirs).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        more
    )
    assert _state(ours) == _state(theirs)
    lance.dataset(ours).optimize.compact_files()
    lt.dataset(theirs).compact_files()
    assert sorted(_state(ours)[1], key=repr) == sorted(_state(theirs)[1], key=repr)


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable"])
def test_update_with_blobs_keeps_the_big_blob(tmp_path, stable):
    ours, theirs = _copies(tmp_path, "2.2", stable, lance)
    assert lt.dataset(ours).update({"x": "x + 100"}, "id < 5") == lance.dataset(theirs).update(
        {"x": "x + 100"}, "id < 5"
    )
    assert _state(ours) == _state(theirs)
    assert len([b for b in _state(ours)[1] if b is not None and len(b) == BIG]) == 1


@pytest.mark.parametrize("source", ["all_columns", "no_blobs"])
def test_merge_insert_with_legacy_blobs_as_pylance(tmp_path, source):
    # pylance 14's take_blobs fails on legacy files: the blobs are compared as we read them
    ours, theirs = _copies(tmp_path, "legacy", False, lance)
    data = _merge("legacy", source)
    got = CLAUSES["upsert"](lt.dataset(ours).merge_insert("id")).execute(data)
    assert got == CLAUSES["upsert"](lance.dataset(theirs).merge_insert("id")).execute(data)
    for columns in (["id", "x"], None):
        mine = lance.dataset(ours).to_table(columns=["id", "x"]) if columns else lt.dataset(ours).to_table()
        other = (
            lance.dataset(theirs).to_table(columns=["id", "x"]) if columns else lt.dataset(theirs).to_table()
        )
        assert mine.equals(other)
