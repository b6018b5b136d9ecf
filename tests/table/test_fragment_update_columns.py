"""``LanceFragment.update_columns``: the same call on both libraries, on copies of one dataset, gives
the same fragment shape, fields and offsets; either library's Update commit reads back the same in
both; bad input is the error pylance raises."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest
from pyroaring import BitMap

import lance_table as lt

pytestmark = pytest.mark.interop


def _data() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
            "name": ["a", "b", "c", "d", "e"],
            "s": pa.array([{"x": i, "y": str(i)} for i in range(5)]),
            "v": pa.array([10, 20, 30, 40, 50], pa.int64()),
        }
    )


def _update(lib, uri: Path, data: pa.Table, **kw) -> tuple[object, list[int], bytes]:
    ds = lib.dataset(uri)
    md, fields, offsets = ds.get_fragment(0).update_columns(data, with_offsets=True, **kw)
    op = lib.LanceOperation.Update(updated_fragments=[md], fields_modified=fields)
    lib.LanceDataset.commit(uri, op, read_version=ds.version)
    return md, fields, offsets


@pytest.mark.parametrize(
    ("data", "kw"),
    [
        # by row id (the default), with a nested column and a deleted row that a key names
        (
            pa.table(
                {
                    "_rowid": pa.array([0, 2, 3, 99], pa.uint64()),
                    "s": pa.array([{"x": 7, "y": None}, None, {"x": 9, "y": "z"}, {"x": 0, "y": ""}]),
                    "v": pa.array([None, 300, 400, 0], pa.int64()),
                }
            ),
            {},
        ),
        # by a data column, a key given twice (the last row wins), columns in another order
        (
            pa.table({"name": ["X", "Y", "Z"], "id": pa.array([5, 2, 5], pa.int64())}),
            {"left_on": "id"},
        ),
    ],
    ids=["rowid", "key"],
)
def test_update_columns_matches_pylance(tmp_path: Path, data: pa.Table, kw: dict) -> None:
    uris = {}
    for name in ("ours", "pylance"):
        uri = tmp_path / name
        lance.write_dataset(_data(), uri)
        lance.dataset(uri).delete("id = 4")
        uris[name] = uri
    ours = _update(lt, uris["ours"], data, **kw)
    theirs = _update(lance, uris["pylance"], data, **kw)
    assert ours[1] == theirs[1]
    assert BitMap.deserialize(ours[2]) == BitMap.deserialize(theirs[2])
    assert [f.fields for f in ours[0].files] == [f.fields for f in theirs[0].files]
    expected = lance.dataset(uris["pylance"]).to_table()
    for uri in uris.values():
        assert lt.dataset(uri).to_table().equals(expected)
        assert lance.dataset(uri).to_table().equals(expected)
    assert lance.dataset(uris["ours"]).count_rows("v > 100") == lance.dataset(uris["pylance"]).count_rows(
        "v > 100"
    )


def test_update_columns_twice_drops_the_replaced_file(tmp_path: Path) -> None:
    lance.write_dataset(pa.table({"id": [1, 2], "v": [1, 2]}), tmp_path)
    for value in (5, 6):
        _update(lt, tmp_path, pa.table({"_rowid": pa.array([1], pa.uint64()), "v": [value]}))
    files = lt.dataset(tmp_path).get_fragment(0).data_files()
    assert [f.fields for f in files] == [[0, -2], [1]]
    assert lance.dataset(tmp_path).to_table().to_pydict() == {"id": [1, 2], "v": [1, 6]}


@pytest.mark.parametrize(
    ("data", "kw", "message"),
    [
        (pa.table({"_rowid": pa.array([0], pa.uint64()), "nope": [1]}), {}, "does not exist in left side"),
        (
            pa.table({"_rowid": pa.array([0], pa.uint64()), "_rowaddr": pa.array([0], pa.uint64())}),
            {},
            "cannot be updated",
        ),
        (pa.table({"id": [1], "v": [1]}), {"left_on": "nope"}, "Column nope does not exist"),
        (pa.table({"id": [1], "v": [1]}), {"left_on": "id", "right_on": "zz"}, "Column zz does not exist"),
        (pa.table({"id": pa.array([1], pa.int32()), "v": [1]}), {"left_on": "id"}, "type mismatch"),
        (
            pa.table({"id": [1], "v": pa.array([1], pa.int32())}),
            {"left_on": "id"},
            "int64 in the dataset",
        ),
    ],
)
def test_update_columns_bad_input(tmp_path: Path, data: pa.Table, kw: dict, message: str) -> None:
    lance.write_dataset(pa.table({"id": [1, 2], "v": [1, 2]}), tmp_path)
    for lib in (lt, lance):
        with pytest.raises((ValueError, RuntimeError)):
            lib.dataset(tmp_path).get_fragment(0).update_columns(data, **kw)
    with pytest.raises(lt.errors.SchemaError, match=message):
        lt.dataset(tmp_path).get_fragment(0).update_columns(data, **kw)
    assert len(list((tmp_path / "data").iterdir())) == 1
