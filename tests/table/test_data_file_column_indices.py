"""A data file's columns are found by the manifest's ``DataFile.fields`` / ``column_indices``, not
by the field ids the file stores (as pylance reads them): a file written on its own (ids 0, 1, ...)
and attached to a dataset whose ids differ (after a dropped column) reads the same in both
libraries, whichever attached it; column indices that do not fit the file are typed errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table
from lance_table.errors import CorruptFileError

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop

VERSIONS = ["2.0", "2.1", "2.2"]


def _dropped(lib: object, path: str, version: str, nested: bool) -> None:
    """A dataset whose ids skip one (``x`` dropped): ``a`` is 1, then ``s`` (a struct) and ``b``."""
    cols = {"x": [0, 0], "a": [1, 2]}
    if nested:
        cols["s"] = pa.array([{"p": 1, "q": "u"}, {"p": 2, "q": None}])
    cols["b"] = ["p", "q"]
    lib.write_dataset(pa.table(cols), path, data_storage_version=version)  # type: ignore[attr-defined]
    lib.dataset(path).drop_columns(["x"])  # type: ignore[attr-defined]


def _rows(nested: bool) -> pa.Table:
    cols = {"a": pa.array(range(10, 16), pa.int64())}
    if nested:
        cols["s"] = pa.array([{"p": i, "q": str(i)} for i in range(6)])
    cols["b"] = [f"r{i}" for i in range(6)]
    return pa.table(cols)


@pytest.mark.parametrize("version", VERSIONS)
def test_file_attached_by_pylance_reads_as_pylance(tmp_path: Path, version: str) -> None:
    # pylance 14's create_from_file records a struct's id in 2.1+ files: nested in 2.0 only
    nested = version == "2.0"
    path = str(tmp_path / "ds")
    _dropped(lance, path, version, nested)
    ds = lance.dataset(path)
    with lance.file.LanceFileWriter(f"{path}/data/own.lance", version=version) as writer:
        writer.write_batch(_rows(nested))
    frag = lance.LanceFragment.create_from_file("own.lance", ds, 0)
    ds = lance.LanceDataset.commit(path, lance.LanceOperation.Append([frag]), read_version=ds.version)
    ours = lance_table.dataset(path)
    assert ours.to_table() == ds.to_table()
    assert ours.to_table().num_rows == 8
    assert ours.to_table(filter="a > 11") == ds.to_table(filter="a > 11")
    assert ours.take([0, 3, 7], columns=["b", "a"]) == ds.take([0, 3, 7], columns=["b", "a"])


@pytest.mark.parametrize("version", VERSIONS)
def test_our_create_from_file_with_other_ids(tmp_path: Path, version: str) -> None:
    path = str(tmp_path / "ds")
    _dropped(lance_table, path, version, nested=True)
    ds = lance_table.dataset(path)
    with lance_table.file.LanceFileWriter(f"{path}/data/own.lance", version=version) as writer:
        writer.write_batch(_rows(nested=True))
    frag = lance_table.fragment.LanceFragment.create_from_file("own.lance", ds, 0)
    ds = lance_table.LanceDataset.commit(
        path, lance_table.LanceOperation.Append([frag]), read_version=ds.version
    )
    assert ds.to_table().slice(2) == _rows(nested=True)
    assert lance.dataset(path).to_table() == ds.to_table()


def test_create_from_file_records_what_pylance_records(tmp_path: Path) -> None:
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    _dropped(lance, theirs, "2.2", nested=False)
    shutil.copytree(theirs, ours)
    files = []
    for lib, path in [(lance, theirs), (lance_table, ours)]:
        with lance.file.LanceFileWriter(f"{path}/data/own.lance") as writer:
            writer.write_batch(_rows(nested=False))
        meta = lib.fragment.LanceFragment.create_from_file("own.lance", lib.dataset(path), 0)
        f = meta.files[0]
        files.append((f.fields, f.column_indices, f.file_major_version, f.file_minor_version))
    assert files[0] == files[1] == ([1, 2], [0, 1], 2, 2)


def _commit_mapped(tmp_path: Path, version: str, column_indices: list[int]) -> str:
    """A dataset with a file (``a``, ``c`` int64; ``b`` string) attached by pylance with
    ``column_indices`` for its fields 0, 1, 2."""
    path = str(tmp_path / f"ds{version}")
    rows = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [7, 8, 9]})
    lance.write_dataset(rows.schema.empty_table(), path, data_storage_version=version)
    with lance.file.LanceFileWriter(f"{path}/data/m.lance", version=version) as writer:
        writer.write_batch(rows)
    major, minor = (2, int(version[-1]))
    data_file = lance.fragment.DataFile("m.lance", [0, 1, 2], column_indices, major, minor)
    frag = lance.fragment.FragmentMetadata(0, [data_file], 3)
    lance.LanceDataset.commit(path, lance.LanceOperation.Append([frag]), read_version=1)
    return path


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_swapped_columns_of_one_type_read_as_pylance(tmp_path: Path, version: str) -> None:
    path = _commit_mapped(tmp_path, version, [2, 1, 0])  # a reads c's column, c reads a's
    got = lance_table.dataset(path).to_table()
    assert got == lance.dataset(path).to_table()
    assert got.column("a").to_pylist() == [7, 8, 9]


@pytest.mark.parametrize(
    ("column_indices", "problem"),
    [([0, 1, 5], "the file has 3 columns"), ([1, 0, 2], "holds string"), ([0, 0, 2], "same column")],
)
def test_column_indices_that_do_not_fit_are_typed_errors(
    tmp_path: Path, column_indices: list[int], problem: str
) -> None:
    path = _commit_mapped(tmp_path, "2.2", column_indices)
    with pytest.raises(CorruptFileError, match=f"data file m.lance: .*{problem}") as info:
        lance_table.dataset(path).to_table()
    assert info.value.path.endswith(".manifest")  # the manifest's mapping is what is wrong
