"""What a commit of hand-built fragments accepts and refuses, against pylance on copies of one dataset.

pylance resolves a data file's columns by the metadata's field ids and column indices, not by the
names the file gives them: a file whose columns are named otherwise, lacks fields or holds more
lands, and both libraries read the same rows from it. What pylance refuses at commit is refused with
an ``OSError`` (:class:`FragmentMetadataError`); what pylance lands but cannot read (another type,
another row count, a column outside the file) is refused here with a typed error, before anything
is written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import lance.fragment
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter

import lance_table as lt
from lance_table import errors
from lance_table.fragment import DataFile, FragmentMetadata

pytestmark = pytest.mark.interop

BASE = pa.table({"a": pa.array([1, 2], pa.int64()), "b": ["x", "y"]})
INT, TEXT = pa.array([3, 4], pa.int64()), pa.array(["p", "q"])


def _commit_both(tmp_path: Path, version: str, file: pa.Table, fields: list[int], columns: list[int]):
    """Write ``file`` into copies of one dataset, commit it as an Append with these ids and column
    indices with each library; return each side's outcome: the error, or the dataset; when both
    landed, the tables both read (compared: each library reads each dataset the same)."""
    seed = tmp_path / "seed"
    lance.write_dataset(BASE, seed, data_storage_version=version)
    with LanceFileWriter(str(seed / "data" / "hand.lance"), file.schema, version=version) as writer:
        writer.write_batch(file)
    major, minor = (int(x) for x in version.split("."))
    out = []
    for name, lib, meta, data_file in (
        ("ours", lt, FragmentMetadata, DataFile),
        ("theirs", lance, lance.fragment.FragmentMetadata, lance.fragment.DataFile),
    ):
        uri = tmp_path / name
        shutil.copytree(seed, uri)
        frag = meta(id=0, files=[data_file("hand.lance", fields, columns, major, minor)], physical_rows=2)
        try:
            lib.LanceDataset.commit(str(uri), lib.LanceOperation.Append([frag]), read_version=1)
        except Exception as exc:
            assert lt.dataset(uri).version == 1  # a refused commit writes nothing
            out.append(exc)
            continue
        out.append(uri)
    if all(isinstance(o, Path) for o in out):  # both landed: both libraries read each the same
        tables = [lt.dataset(out[0]).to_table(), lance.dataset(out[1]).to_table()]
        assert tables[0].equals(tables[1]) and tables[0].equals(lance.dataset(out[0]).to_table())
        return tables
    return out


@pytest.mark.parametrize("version", ["2.0", "2.1"])
@pytest.mark.parametrize(
    ("case", "file", "fields", "columns", "b"),
    [
        ("other names", pa.table({"x": INT, "y": TEXT}), [0, 1], [0, 1], ["x", "y", "p", "q"]),
        ("a field missing", pa.table({"a": INT}), [0], [0], ["x", "y", None, None]),
        (
            "a field id the schema lacks",
            pa.table({"a": INT, "b": TEXT, "c": [1.0, 2.0]}),
            [0, 1, 2],
            [0, 1, 2],
            None,
        ),
        ("a column not listed", pa.table({"a": INT, "b": TEXT, "c": [1.0, 2.0]}), [0, 1], [0, 1], None),
        ("columns in another order", pa.table({"b": TEXT, "a": INT}), [1, 0], [0, 1], None),
        ("no column indices: nulls", pa.table({"a": INT, "b": TEXT}), [0, 1], [], ["x", "y", None, None]),
    ],
)
def test_fragments_pylance_lands_land_and_read_alike(tmp_path, version, case, file, fields, columns, b):
    ours, theirs = _commit_both(tmp_path, version, file, fields, columns)
    assert isinstance(ours, pa.Table) and isinstance(theirs, pa.Table), (ours, theirs)
    assert ours.column("b").to_pylist() == (b or ["x", "y", "p", "q"])


@pytest.mark.parametrize("version", ["2.0", "2.1"])
@pytest.mark.parametrize("columns", [[0], [0, 1, 2]], ids=["fewer", "more"])
def test_column_indices_not_as_many_as_ids_are_refused_as_pylance_does(tmp_path, version, columns):
    file = pa.table({"a": INT, "b": TEXT, "c": [1.0, 2.0]})
    ours, theirs = _commit_both(tmp_path, version, file, [0, 1], columns)
    assert isinstance(theirs, OSError)
    assert isinstance(ours, errors.FragmentMetadataError) and isinstance(ours, OSError)
    assert "hand.lance" in str(ours)


def test_a_leaf_without_a_column(tmp_path):
    """2.1+: refused, as pylance does; 2.0: the field reads as nulls in both."""
    ours, theirs = _commit_both(tmp_path / "v21", "2.1", pa.table({"a": INT, "b": TEXT}), [0, 1], [0, -1])
    assert isinstance(theirs, OSError) and isinstance(ours, errors.FragmentMetadataError)
    assert "'b'" in str(ours)
    ours, theirs = _commit_both(tmp_path / "v20", "2.0", pa.table({"a": INT, "b": TEXT}), [0, 1], [0, -1])
    assert ours.column("b").to_pylist() == ["x", "y", None, None]


@pytest.mark.parametrize(
    ("file", "columns", "error"),
    [
        (pa.table({"a": ["3", "4"], "b": TEXT}), [0, 1], errors.SchemaError),  # another type
        (pa.table({"a": pa.array([3, 4], pa.int32()), "b": TEXT}), [0, 1], errors.SchemaError),
        (pa.table({"a": INT, "b": TEXT}), [1, 0], errors.CorruptFileError),  # the columns swapped
        (pa.table({"a": INT, "b": TEXT}), [0, 5], errors.CorruptFileError),  # outside the file
    ],
    ids=["string for int64", "int32 for int64", "swapped", "out of range"],
)
def test_what_would_read_wrong_is_refused(tmp_path, file, columns, error):
    """pylance lands these, then fails to read the dataset; here the commit is refused."""
    ours, theirs = _commit_both(tmp_path, "2.1", file, [0, 1], columns)
    assert isinstance(ours, error), ours
    assert isinstance(theirs, Path)  # (pylance lands it)


def test_a_field_added_later_does_not_take_an_id_a_data_file_lists(tmp_path):
    _commit_both(tmp_path, "2.1", pa.table({"a": INT, "b": TEXT, "c": [1.0, 2.0]}), [0, 1, 2], [0, 1, 2])
    ds = lt.dataset(tmp_path / "ours")
    ds.add_columns({"d": "a * 10"})
    assert ds.to_table().column("d").to_pylist() == [10, 20, 30, 40]
    assert lance.dataset(tmp_path / "ours").to_table().equals(ds.to_table())


def test_an_overwrite_that_renames_the_columns_lands(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(BASE, uri)
    frags = lt.fragment.write_fragments(pa.table({"a": INT, "b": TEXT}), str(uri))
    renamed = pa.schema([("key", pa.int64()), ("text", pa.string())])
    lt.LanceDataset.commit(str(uri), lt.LanceOperation.Overwrite(renamed, frags), read_version=1)
    expected = pa.table({"key": INT, "text": TEXT})
    assert lt.dataset(uri).to_table().equals(expected)
    assert lance.dataset(uri).to_table().equals(expected)
