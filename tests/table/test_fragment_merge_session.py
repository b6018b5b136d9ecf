"""``LanceFragment.merge`` (by a column, ``_rowid`` or ``_rowaddr``), ``LanceFragment.open_session``
and ``LanceFragment.create_from_file``, run the same way with pylance on copies of the same data;
the committed results must be equal, and each library reads the other's."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_table
from lance_table.errors import SchemaChangeError

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop


def _copies(tmp_path: Path) -> list[tuple[Any, str]]:
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    ds = lance.write_dataset(pa.table({"a": [str(i) for i in range(10)]}), theirs, max_rows_per_file=4)
    ds.delete("a = '1'")
    shutil.copytree(theirs, ours)
    return [(lance, theirs), (lance_table, ours)]


def _merge_all(lib: Any, path: str) -> pa.Table:
    ds = lib.dataset(path)
    for key, name, shift in [("_rowid", "b", 0), ("_rowaddr", "c", 1)]:
        merged, schema = [], None
        for frag in ds.get_fragments():
            keys = frag.scanner(
                columns=[], **{"with_row_id" if key == "_rowid" else "with_row_address": True}
            )
            table = keys.to_table()
            table = table.add_column(0, name, [[i + shift for i in range(table.num_rows)]])
            meta, schema = frag.merge(table, key)
            merged.append(meta)
        op = lib.LanceOperation.Merge(merged, schema)
        ds = lib.LanceDataset.commit(path, op, read_version=ds.latest_version)
    # by a column, with another key name on the right; unmatched rows get nulls
    first = ds.get_fragments()[0]
    meta, schema = first.merge(pa.table({"k": ["0", "2", "zz"], "d": [5, 6, 7]}), "a", "k")
    rest = [f.metadata for f in ds.get_fragments()[1:]]
    ds = lib.LanceDataset.commit(
        path, lib.LanceOperation.Merge([meta, *rest], schema), read_version=ds.version
    )
    return ds.to_table()


def test_merge_as_pylance(tmp_path: Path) -> None:
    (theirs_lib, theirs), (ours_lib, ours) = _copies(tmp_path)
    expected = _merge_all(theirs_lib, theirs)
    assert _merge_all(ours_lib, ours) == expected
    assert expected.column("d").to_pylist()[:3] == [5, 6, None]
    assert lance.dataset(ours).to_table() == lance_table.dataset(theirs).to_table() == expected


def test_merge_bad_keys(tmp_path: Path) -> None:
    _, (_, ours) = _copies(tmp_path)
    frag = lance_table.dataset(ours).get_fragments()[0]
    with pytest.raises(SchemaChangeError, match="left side"):
        frag.merge(pa.table({"zz": ["0"], "d": [1]}), "zz")
    with pytest.raises(SchemaChangeError, match="right side"):
        frag.merge(pa.table({"a": ["0"], "d": [1]}), "a", "k")
    with pytest.raises(SchemaChangeError, match="already exists"):
        frag.merge(pa.table({"k": ["0"], "a": ["x"]}), "a", "k")


def test_open_session_as_pylance(tmp_path: Path) -> None:
    results = []
    for lib, path in _copies(tmp_path):
        frag = lib.dataset(path).get_fragments()[0]
        with_addr = frag.open_session(columns=["a"], with_row_address=True)
        plain = frag.open_session()
        results.append((with_addr.take([0, 2]), plain.take(range(3)), frag.take([0, 2], columns=["a"])))
    assert results[0] == results[1]
    assert results[1][0].schema.names == ["a", "_rowaddr"]


@pytest.mark.parametrize("version", ["2.0", "stable"])
def test_create_from_file_as_pylance(tmp_path: Path, version: str) -> None:
    # in 2.0 a struct too (pylance 14 records a struct's id in 2.1+ files, which its own commit
    # then refuses); the file's fields take the dataset's ids
    struct = pa.array([{"p": i, "q": str(i)} for i in range(6)])
    rows = pa.table({"a": range(6), "s": struct if version == "2.0" else range(6)})
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    lance.write_dataset(rows, theirs, data_storage_version=version)
    shutil.copytree(theirs, ours)
    results = []
    for lib, path in [(lance, theirs), (lance_table, ours)]:
        ds = lib.dataset(path)
        file_version = "2.0" if version == "2.0" else None
        with lance_table.file.LanceFileWriter(f"{path}/data/from-file.lance", version=file_version) as writer:
            writer.write_batch(rows)
        meta = lib.fragment.LanceFragment.create_from_file("from-file.lance", ds, 0)
        ds = lib.LanceDataset.commit(path, lib.LanceOperation.Append([meta]), read_version=ds.version)
        file = meta.files[0]
        version_of = (file.file_major_version, file.file_minor_version)
        results.append((file.fields, file.column_indices, version_of, meta.physical_rows, ds.to_table()))
    assert results[0] == results[1]
    assert results[1][4] == pa.concat_tables([rows, rows])
    assert lance.dataset(ours).to_table() == lance_table.dataset(theirs).to_table()

    bad = lance_table.dataset(ours)
    with lance_table.file.LanceFileWriter(f"{ours}/data/bad.lance") as writer:
        writer.write_batch(rows.select(["s", "a"]))
    with pytest.raises(OSError, match="different order"):
        lance_table.fragment.LanceFragment.create_from_file("bad.lance", bad, 0)
    with pytest.raises(FileNotFoundError):
        lance_table.fragment.LanceFragment.create_from_file("missing.lance", bad, 0)
