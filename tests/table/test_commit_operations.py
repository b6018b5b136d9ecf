"""LanceOperation Merge, Update, Project, UpdateConfig and DataReplacement committed through
``LanceDataset.commit``: each committed by lance_table and by pylance (the oracle) on copies of one
dataset, both results read by both libraries and compared, transactions read back by both; the
conflict rules of every pair of operations raced on both libraries; bad input refused with nothing
changed."""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from pathlib import Path
from typing import Any

import lance
import lance.file
import lance.fragment
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal
from lance.schema import LanceSchema as PylanceSchema

import lance_table as lt
from lance_table.fragment import DataFile, write_fragments

pytestmark = pytest.mark.interop


def _table(n: int = 10) -> pa.Table:
    return pa.table({"a": pa.array(range(n), pa.int64()), "b": pa.array([f"s{i}" for i in range(n)])})


def _create(uri: Path, n: int = 10) -> None:
    lance.write_dataset(_table(n), uri, max_rows_per_file=5)


def _copies(tmp_path: Path) -> tuple[Path, Path]:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _create(ours)
    shutil.copytree(ours, theirs)
    return ours, theirs


def _ours(op: Any) -> Any:
    """pylance's operation as lance_table's (same class name and fields; pylance's fragment
    metadata and schemas are taken as they are)."""
    if isinstance(op, lance.LanceOperation.UpdateMap):
        return lt.LanceOperation.UpdateMap(op.updates, op.replace)
    if isinstance(op, dict):
        return {k: _ours(v) for k, v in op.items()}
    if isinstance(op, list):
        return [_ours(v) for v in op]
    if not dataclasses.is_dataclass(op) or type(op).__module__ == "lance.fragment":
        return op  # fragment metadata and data files are taken as pylance gives them
    cls = getattr(lt.LanceOperation, type(op).__name__)
    return cls(**{f.name: _ours(getattr(op, f.name)) for f in dataclasses.fields(op)})


def _commit_both(ours: Path, theirs: Path, op: Any, read_version: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        lance.LanceDataset.commit(theirs, op, read_version=read_version)
    lt.LanceDataset.commit(ours, _ours(op), read_version=read_version)


def _same_result(ours: Path, theirs: Path) -> None:
    """Both libraries read the same table, schema and config from both datasets, and both read
    the same last transaction."""
    expected = lance.dataset(theirs)
    for ds in (lance.dataset(ours), lt.dataset(ours)):
        assert ds.version == expected.version
        assert ds.schema == expected.schema
        assert_tables_equal(ds.to_table(), expected.to_table())
    assert lance.dataset(ours).config() == expected.config()
    mine = lance.dataset(ours).read_transaction(expected.version)
    oracle = expected.read_transaction(expected.version)
    assert type(mine.operation).__name__ == type(oracle.operation).__name__
    assert repr(_without_paths(mine.operation)) == repr(_without_paths(oracle.operation))
    back = lt.dataset(ours).read_transaction(expected.version)
    assert type(back.operation).__name__ == type(oracle.operation).__name__
    assert back.uuid == mine.uuid and back.read_version == mine.read_version


def _without_paths(op: Any) -> str:
    """An operation's text without the random names of data and deletion files."""
    import re

    text = repr(op)
    text = re.sub(r"path='[^']*'", "path=_", text)
    text = re.sub(r"file_size_bytes=\d+", "file_size_bytes=_", text)
    return text


def _merge_op(uri: Path, preserves_nullability: bool = False) -> Any:
    frags, schema = [], None
    for frag in lance.dataset(uri).get_fragments():
        new, schema = frag.merge_columns(
            lambda b: pa.record_batch([pc.multiply(b["a"], 2)], ["c"]), columns=["a"]
        )
        frags.append(new)
    return lance.LanceOperation.Merge(frags, schema, preserves_nullability=preserves_nullability)


def test_merge_adds_a_column(tmp_path: Path) -> None:
    ours, theirs = _copies(tmp_path)
    op = _merge_op(ours)
    shutil.rmtree(theirs)
    shutil.copytree(ours, theirs)  # the new column's files exist in both copies
    _commit_both(ours, theirs, op, 1)
    _same_result(ours, theirs)
    assert lt.dataset(ours).to_table()["c"].to_pylist() == [2 * i for i in range(10)]


def test_merge_with_a_pyarrow_schema_keeps_the_ids_of_existing_columns(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    op = _merge_op(uri)
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.int64())])
    with pytest.deprecated_call():  # (a pyarrow schema is deprecated in pylance's Merge too)
        merge = lt.LanceOperation.Merge(op.fragments, schema)
    lt.LanceDataset.commit(uri, merge, read_version=1)
    assert [(f.name(), f.id()) for f in lt.dataset(uri).lance_schema.fields()] == [
        ("a", 0),
        ("b", 1),
        ("c", 2),
    ]
    assert lance.dataset(uri).to_table()["c"].to_pylist() == [2 * i for i in range(10)]


@pytest.mark.parametrize(
    "arrow_schema",
    [
        pa.schema([("a", pa.int64())]),  # drop b
        pa.schema([("a", pa.int64()), ("b2", pa.string())]),  # rename b
    ],
    ids=["drop", "rename"],
)
def test_project(tmp_path: Path, arrow_schema: pa.Schema) -> None:
    ours, theirs = _copies(tmp_path)
    _commit_both(ours, theirs, lance.LanceOperation.Project(PylanceSchema.from_pyarrow(arrow_schema)), 1)
    _same_result(ours, theirs)


def test_project_swaps_columns_by_field_id(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance.write_dataset(pa.table({"a": [1, 2], "b": ["x", "y"], "b1": ["p", "q"]}), ours)
    shutil.copytree(ours, theirs)
    swapped = PylanceSchema.from_pyarrow(
        pa.schema([("a", pa.int64()), ("b0", pa.string()), ("b", pa.string())])
    )
    _commit_both(ours, theirs, lance.LanceOperation.Project(swapped), 1)
    _same_result(ours, theirs)
    assert lt.dataset(ours).to_table().to_pydict() == {"a": [1, 2], "b0": ["x", "y"], "b": ["p", "q"]}


def test_project_with_our_lance_schema(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    schema = lt.LanceSchema.from_pyarrow(pa.schema([("a", pa.int64())]))
    lt.LanceDataset.commit(uri, lt.LanceOperation.Project(schema), read_version=1)
    assert lance.dataset(uri).schema == pa.schema([("a", pa.int64())])
    assert lance.dataset(uri).to_table()["a"].to_pylist() == list(range(10))


def test_update_config(tmp_path: Path) -> None:
    ours, theirs = _copies(tmp_path)
    M = lance.LanceOperation.UpdateMap
    op = lance.LanceOperation.UpdateConfig(
        config_updates=M({"k1": "v1", "k2": "v2"}),
        table_metadata_updates=M({"owner": "me"}),
        schema_metadata_updates=M({"sm": "1"}),
        field_metadata_updates={1: M({"unit": "m"})},
    )
    _commit_both(ours, theirs, op, 1)
    _same_result(ours, theirs)
    op2 = lance.LanceOperation.UpdateConfig(
        config_updates=M({"k1": None}), schema_metadata_updates=M({"other": "2"}, replace=True)
    )
    _commit_both(ours, theirs, op2, 2)
    _same_result(ours, theirs)
    assert lt.dataset(ours).manifest.config == {"k2": "v2"}
    assert lt.dataset(ours).manifest.table_metadata == {"owner": "me"}
    assert lt.dataset(ours).schema.metadata == {b"other": b"2"}


def _update_op(uri: Path) -> Any:
    ds = lance.dataset(uri)
    updated = ds.get_fragment(0).delete("a = 2")
    new = lance.fragment.write_fragments(pa.table({"a": [2], "b": ["two"]}), uri)
    return lance.LanceOperation.Update(
        removed_fragment_ids=[1], updated_fragments=[updated], new_fragments=new, fields_modified=[1]
    )


def test_update_rewrites_rows(tmp_path: Path) -> None:
    ours, theirs = _copies(tmp_path)
    op = _update_op(ours)
    shutil.rmtree(theirs)
    shutil.copytree(ours, theirs)
    _commit_both(ours, theirs, op, 1)
    _same_result(ours, theirs)
    assert sorted(lt.dataset(ours).to_table().to_pydict()["b"]) == ["s0", "s1", "s3", "s4", "two"]


def test_update_with_fragments_written_by_lance_table(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    updated = lance.dataset(uri).get_fragment(0).delete("a = 2")  # (pylance: LanceFragment.delete)
    new = write_fragments(pa.table({"a": [2], "b": ["two"]}), uri)
    op = lt.LanceOperation.Update(updated_fragments=[updated], new_fragments=new)
    lt.LanceDataset.commit(uri, op, read_version=1)
    table = lance.dataset(uri).to_table().sort_by("a")
    assert table["b"].to_pylist() == ["s0", "s1", "two", *(f"s{i}" for i in range(3, 10))]
    txn = lance.dataset(uri).read_transaction(2)
    assert isinstance(txn.operation, lance.LanceOperation.Update)
    assert [f.id for f in txn.operation.updated_fragments] == [0]


def _merged_dataset(tmp_path: Path) -> Path:
    """A dataset whose column ``c`` is a data file of its own in every fragment."""
    uri = tmp_path / "ds"
    _create(uri)
    lance.LanceDataset.commit(uri, _merge_op(uri), read_version=1)
    return uri


def test_data_replacement(tmp_path: Path) -> None:
    ours = tmp_path / "ours"
    _create(ours)
    merge = _merge_op(ours)
    # a second version of column c for fragment 0, written as the first was (same field id)
    frag0 = lance.dataset(ours).get_fragment(0)
    again, _ = frag0.merge_columns(lambda b: pa.record_batch([pc.add(b["a"], 100)], ["c"]), columns=["a"])
    new_file = next(f for f in again.files if list(f.fields) == [2])
    lance.LanceDataset.commit(ours, merge, read_version=1)
    theirs = tmp_path / "theirs"
    shutil.copytree(ours, theirs)
    lance.LanceDataset.commit(
        theirs,
        lance.LanceOperation.DataReplacement([lance.LanceOperation.DataReplacementGroup(0, new_file)]),
        read_version=2,
    )
    ours_file = DataFile(
        new_file.path,
        list(new_file.fields),
        list(new_file.column_indices),
        new_file.file_major_version,
        new_file.file_minor_version,
        new_file.file_size_bytes,
    )
    lt.LanceDataset.commit(
        ours,
        lt.LanceOperation.DataReplacement([lt.LanceOperation.DataReplacementGroup(0, ours_file)]),
        read_version=2,
    )
    _same_result(ours, theirs)
    assert lt.dataset(ours).to_table()["c"].to_pylist()[:6] == [100, 101, 102, 103, 104, 10]


def test_pylance_commits_are_read_by_lance_table(tmp_path: Path) -> None:
    uri = _merged_dataset(tmp_path)
    lance.LanceDataset.commit(
        uri, lance.LanceOperation.Project(PylanceSchema.from_pyarrow(_table().schema)), 2
    )
    lance.LanceDataset.commit(
        uri, lance.LanceOperation.UpdateConfig(config_updates=lance.LanceOperation.UpdateMap({"x": "y"})), 3
    )
    lance.LanceDataset.commit(uri, _update_op(uri), read_version=4)
    assert_tables_equal(lt.dataset(uri).to_table(), lance.dataset(uri).to_table())
    kinds = [type(t.operation).__name__ for t in lt.dataset(uri).get_transactions(5)]
    assert kinds == ["Update", "UpdateConfig", "Project", "Merge", "Overwrite"]
    # and lance_table keeps writing it
    before = lance.dataset(uri).count_rows()
    lt.write_dataset(_table(3), uri, mode="append")
    assert lance.dataset(uri).count_rows() == lt.dataset(uri).count_rows() == before + 3


# -- conflicts: the same race on both libraries ----------------------------------------------------


def _op(kind: str, uri: Path) -> Any:
    ds = lance.dataset(uri)
    L = lance.LanceOperation
    if kind == "append":
        return L.Append(lance.fragment.write_fragments(pa.table({"a": [100], "b": ["x"]}), uri))
    if kind == "delete":
        return L.Delete([ds.get_fragment(0).delete("a = 1")], [], "a = 1")
    if kind == "update":
        new = lance.fragment.write_fragments(pa.table({"a": [2], "b": ["two"]}), uri)
        return L.Update(updated_fragments=[ds.get_fragment(0).delete("a = 2")], new_fragments=new)
    if kind in ("merge", "merge_nullable"):
        return _merge_op(uri, preserves_nullability=kind == "merge_nullable")
    if kind in ("project", "project_nullable"):
        schema = PylanceSchema.from_pyarrow(pa.schema([("a", pa.int64())]))
        return L.Project(schema, preserves_nullability=kind == "project_nullable")
    if kind == "update_other":  # rows of fragment 1 only
        new = lance.fragment.write_fragments(pa.table({"a": [7], "b": ["seven"]}), uri)
        return L.Update(updated_fragments=[ds.get_fragment(1).delete("a = 7")], new_fragments=new)
    if kind == "config":
        return L.UpdateConfig(config_updates=L.UpdateMap({"k": "v"}))
    if kind == "config_schema":
        return L.UpdateConfig(schema_metadata_updates=L.UpdateMap({"m": "1"}))
    if kind == "config_field":
        return L.UpdateConfig(field_metadata_updates={0: L.UpdateMap({"unit": "m"})})
    if kind == "data_replacement":  # fragment 0's data file (fields a, b) written again
        frag = lance.fragment.write_fragments(
            pa.table({"a": pa.array(range(5), pa.int64()), "b": ["r"] * 5}), uri
        )
        return L.DataReplacement([L.DataReplacementGroup(0, frag[0].files[0])])
    if kind == "restore":
        return L.Restore(1)
    if kind == "rewrite":
        old = ds.get_fragment(0)
        new = lance.fragment.write_fragments(old.to_table(), uri)
        return L.Rewrite([L.RewriteGroup([old.metadata], new)], [])
    if kind == "overwrite":
        return L.Overwrite(_table(2).schema, lance.fragment.write_fragments(_table(2), uri))
    raise KeyError(kind)


def _outcome(commit: Any) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            commit()
    except lt.CommitConflictError as exc:
        return "retry" if exc.retryable else "incompatible"
    except Exception as exc:  # pylance's CommitConflictError
        if type(exc).__name__ != "CommitConflictError":
            raise
        return "retry" if "retry" in str(exc).lower() else "incompatible"
    return "ok"


KINDS = [
    "append",
    "delete",
    "update",
    "update_other",
    "data_replacement",
    "merge",
    "merge_nullable",
    "project",
    "project_nullable",
    "config",
    "config_schema",
    "config_field",
    "rewrite",
    "overwrite",
    "restore",
]


@pytest.mark.parametrize("theirs_kind", KINDS)
def test_conflict_rules_match_pylance(tmp_path: Path, theirs_kind: str) -> None:
    """For each operation committed first, every other operation planned on the same version:
    lance_table accepts, asks to retry, or refuses exactly when pylance does."""
    for mine_kind in KINDS:
        if mine_kind in ("overwrite", "restore"):
            continue  # an overwrite or restore applies to the latest version, whatever came before
        results = {}
        for lib in ("ours", "theirs"):
            uri = tmp_path / f"{theirs_kind}-{mine_kind}-{lib}"
            _create(uri)
            first, second = _op(theirs_kind, uri), _op(mine_kind, uri)
            lance.LanceDataset.commit(uri, first, read_version=1)
            library = lt.LanceDataset if lib == "ours" else lance.LanceDataset
            op = _ours(second) if lib == "ours" else second
            results[lib] = _outcome(lambda lib=library, uri=uri, op=op: lib.commit(uri, op, read_version=1))
        assert results["ours"] == results["theirs"], f"{mine_kind} after {theirs_kind}: {results}"


# -- bad input -------------------------------------------------------------------------------------


def _state(uri: Path) -> tuple[int, set[str]]:
    versions = {str(p.relative_to(uri)) for p in (uri / "_versions").iterdir()}
    return lt.dataset(uri).version, versions


def _refused(uri: Path, op: Any, error: type[Exception], match: str, read_version: int = 1) -> None:
    before = _state(uri)
    with pytest.raises(error, match=match):
        lt.LanceDataset.commit(uri, op, read_version=read_version)
    assert _state(uri) == before
    assert_tables_equal(lt.dataset(uri).to_table(), lance.dataset(uri).to_table())


def test_project_with_unknown_field_ids_is_refused(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    schema = lt.LanceSchema.from_pyarrow(
        pa.schema([("a", pa.int64()), ("b", pa.string()), ("z", pa.int32())])
    )
    _refused(uri, lt.LanceOperation.Project(schema), lt.SchemaError, r"field ids \[2\]")
    retyped = lt.LanceSchema.from_pyarrow(pa.schema([("a", pa.string())]))
    _refused(uri, lt.LanceOperation.Project(retyped), lt.SchemaError, "field id 0")
    with pytest.raises(TypeError, match="LanceSchema"):
        lt.LanceDataset.commit(uri, lt.LanceOperation.Project(pa.schema([("a", pa.int64())])), read_version=1)


def test_merge_with_wrong_field_ids_is_refused(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    op = _merge_op(uri)
    wrong = lt.LanceSchema.from_pyarrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))
    _refused(uri, lt.LanceOperation.Merge(op.fragments, wrong), lt.SchemaError, r"field ids \[2\]")
    retyped = lt.LanceSchema.from_pyarrow(
        pa.schema([("a", pa.string()), ("b", pa.string()), ("c", pa.int64())])
    )
    _refused(uri, lt.LanceOperation.Merge(op.fragments, retyped), lt.SchemaError, "field id 0")
    _refused(uri, lt.LanceOperation.Merge(op.fragments[:1], op.schema), ValueError, "every fragment")


def test_fragments_of_another_dataset_are_refused(tmp_path: Path) -> None:
    uri, other = tmp_path / "ds", tmp_path / "other"
    _create(uri)
    _create(other)
    new = lance.fragment.write_fragments(pa.table({"a": [2], "b": ["two"]}), other)
    op = lt.LanceOperation.Update(updated_fragments=[], new_fragments=new)
    _refused(uri, op, lt.DataFileNotFoundError, new[0].files[0].path)
    _refused(uri, lt.LanceOperation.Update(removed_fragment_ids=[7]), ValueError, r"fragments \[7\]")


def test_a_read_version_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    op = lt.LanceOperation.UpdateConfig(config_updates=lt.LanceOperation.UpdateMap({"k": "v"}))
    _refused(uri, op, lt.VersionNotFoundError, "5", read_version=5)


def test_update_config_of_an_unknown_field_is_refused(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    op = lt.LanceOperation.UpdateConfig(field_metadata_updates={9: lt.LanceOperation.UpdateMap({"k": "v"})})
    _refused(uri, op, lt.SchemaError, r"field ids \[9\]")


def test_overwrite_whose_schema_disagrees_with_its_fragments_is_refused(tmp_path: Path) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    frags = write_fragments(_table(3), uri)
    op = lt.LanceOperation.Overwrite(pa.schema([("a", pa.string()), ("b", pa.string())]), frags)
    _refused(uri, op, lt.SchemaError, "'a'")


def test_data_replacement_of_a_missing_file_is_refused(tmp_path: Path) -> None:
    uri = _merged_dataset(tmp_path)
    op = lt.LanceOperation.DataReplacement(
        [lt.LanceOperation.DataReplacementGroup(0, DataFile("missing.lance", [2], [0], 2, 2))]
    )
    _refused(uri, op, lt.DataFileNotFoundError, "missing.lance", read_version=2)


@pytest.mark.parametrize("name", ["Clone", "CreateIndex", "DataOverlay"])
def test_operations_lance_table_does_not_commit_are_named(tmp_path: Path, name: str) -> None:
    uri = tmp_path / "ds"
    _create(uri)
    op = getattr(lt.LanceOperation, name)()
    with pytest.raises(lt.UnsupportedOperationError, match=name):
        lt.LanceDataset.commit(uri, op, read_version=1)
    assert lt.dataset(uri).version == 1
