"""Config, table/schema/field metadata, ``insert`` and ``truncate_table`` against pylance 14: the same
calls on copies of one dataset return the same values, commit the same ``UpdateConfig`` (or Delete,
Append) transactions, and each library reads back and keeps changing the other's result."""

from __future__ import annotations

import shutil
import warnings

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CommitConflictError, FieldNotFoundError

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop


def _copies(tmp_path, stable: bool = False) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    t = pa.table(
        {"id": pa.array(range(6), pa.int64()), "st": pa.array([{"a": i} for i in range(6)])},
        metadata={"k0": "v0"},
    )
    lance.write_dataset(t, ours, max_rows_per_file=4, enable_stable_row_ids=stable)
    shutil.copytree(ours, theirs)
    return ours, theirs


def _op(uri: str) -> object:
    ds = lance.dataset(uri)
    op = ds.read_transaction(ds.version).operation

    def umap(m):
        return None if m is None else (sorted(m.updates.items(), key=str), m.replace)

    if type(op).__name__ == "UpdateConfig":
        fields = {k: umap(v) for k, v in (op.field_metadata_updates or {}).items()}
        return (
            umap(op.config_updates),
            umap(op.table_metadata_updates),
            umap(op.schema_metadata_updates),
            fields,
        )
    return repr(op)


def _state(uri: str) -> tuple:
    ds = lance.dataset(uri)
    return ds.version, ds.config(), ds.metadata, ds.schema_metadata, ds.schema, ds.to_table()


CALLS = [
    ("update_metadata", ({"a": "1", "b": "2"},), {}),
    ("update_metadata", ({"a": None, "zz": None},), {}),
    ("update_metadata", ({"c": "3", "d": None},), {"replace": True}),
    ("update_config", ({"x": "1", "y": "2"},), {}),
    ("update_config", ({"x": None},), {}),
    ("delete_config_keys", (["y", "nope"],), {}),
    ("update_config", ({"q": "9"},), {"replace": True}),
    ("update_schema_metadata", ({"s1": "x"},), {}),
    ("update_schema_metadata", ({"s2": "y"},), {"replace": True}),
    ("update_field_metadata", ({"id": {"f": "1"}, "st.a": {"g": "2"}},), {}),
    ("update_field_metadata", ({"id": {"h": "1"}},), {"replace": True}),
    ("replace_schema_metadata", ({"r": "1"},), {}),
    ("replace_field_metadata", ("id", {"r": "2"}), {}),
    ("update_config", ({},), {}),
]


def test_metadata_and_config_calls_match_pylance(tmp_path):
    ours, theirs = _copies(tmp_path)
    mine, ref = lt.dataset(ours), lance.dataset(theirs)
    for name, args, kwargs in CALLS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = getattr(mine, name)(*args, **kwargs)
            mine = lt.dataset(ours)
        with warnings.catch_warnings(record=True) as expected_warnings:
            warnings.simplefilter("always")
            expected = getattr(ref, name)(*args, **kwargs)
        assert got == expected, name
        assert [w.category for w in caught] == [w.category for w in expected_warnings], name
        assert _op(ours) == _op(theirs), name
        assert _state(ours) == _state(theirs), name
        assert mine.config() == ref.config()
        assert mine.metadata == ref.metadata and mine.schema_metadata == ref.schema_metadata
        assert mine.schema == ref.schema
    # each keeps changing the other's result
    lance.dataset(ours).update_config({"p": "1"})
    lt.dataset(theirs).update_config({"p": "1"})
    lance.dataset(ours).update_field_metadata({"st": {"m": "1"}})
    lt.dataset(theirs).update_field_metadata({"st": {"m": "1"}})
    assert _state(ours)[1:] == _state(theirs)[1:]


def test_bad_metadata_arguments(tmp_path):
    ours, _ = _copies(tmp_path)
    ds = lt.dataset(ours)
    with pytest.raises(FieldNotFoundError, match="nope") as err:
        ds.update_field_metadata({"nope": {"a": "1"}})
    assert isinstance(err.value, OSError) and "st.a" in str(err.value)
    with pytest.raises(OSError):
        lance.dataset(ours).update_field_metadata({"nope": {"a": "1"}})
    for call in (
        lambda d: d.update_metadata({"a": 1}),
        lambda d: d.update_config({1: "a"}),
        lambda d: d.delete_config_keys("abc"),
    ):
        with pytest.raises(TypeError):
            call(ds)
        with pytest.raises(TypeError):
            call(lance.dataset(ours))
    assert lt.dataset(ours).version == 1


def test_concurrent_config_changes_follow_the_resolver(tmp_path):
    ours, _ = _copies(tmp_path)
    a, b = lt.dataset(ours), lt.dataset(ours)
    a.update_config({"x": "1"})
    b.update_config({"y": "2"})  # other keys: rebased
    assert lance.dataset(ours).config() == {"x": "1", "y": "2"}
    c = lt.dataset(ours)
    lt.dataset(ours).update_config({"x": "3"})
    with pytest.raises(CommitConflictError):
        c.update_config({"x": "4"})  # the same key: refused
    d = lt.dataset(ours)
    lt.dataset(ours).update_schema_metadata({"m": "1"})
    with pytest.raises(CommitConflictError):
        d.update_schema_metadata({"n": "2"})
    assert lance.dataset(ours).config() == {"x": "3", "y": "2"}


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_ids"])
def test_truncate_and_insert_match_pylance(tmp_path, stable):
    ours, theirs = _copies(tmp_path, stable)
    for uri in (ours, theirs):
        lance.dataset(uri).update_config({"keep": "1"})
    extra = pa.table({"id": pa.array([7, 8], pa.int64()), "st": pa.array([{"a": 7}, {"a": 8}])})
    for lib, uri in ((lt, ours), (lance, theirs)):
        ds = lib.dataset(uri)
        assert ds.truncate_table() is None
    assert _op(ours) == _op(theirs)
    assert _state(ours) == _state(theirs)
    for lib, uri in ((lt, ours), (lance, theirs)):
        assert lib.dataset(uri).insert(extra) is None
    assert _state(ours) == _state(theirs)
    assert (
        lance.dataset(ours)
        .to_table(with_row_id=True)
        .equals(lance.dataset(theirs).to_table(with_row_id=True))
    )
    for lib, uri in ((lt, ours), (lance, theirs)):
        lib.dataset(uri).insert(extra, mode="overwrite")
    assert _state(ours)[1:] == _state(theirs)[1:]
    # each keeps writing the other's
    lance.dataset(ours).truncate_table()
    lt.dataset(theirs).truncate_table()
    assert lance.dataset(ours).count_rows() == lt.dataset(theirs).count_rows() == 0
