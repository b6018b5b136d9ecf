"""Legacy (0.1) data files read as part of a dataset take the manifest's schema (names, ids,
nullability) and dictionary values, not the copies inside the file, as pylance does: a rename or a
change of nullability rewrites only the manifest, and the manifest's dictionary is the one the keys
index. Read on their own (no manifest), files keep using their own copies."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.legacy import LegacyFileReader

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop


def _data_file(uri: str) -> Path:
    (path,) = sorted(Path(uri, "data").glob("*.lance"))
    return path


def _struct_table() -> pa.Table:
    st = pa.StructArray.from_arrays(
        [pa.array([1, 2, 3], pa.int64()), pa.array(["x", None, "z"])], names=["a", "t"]
    )
    return pa.table({"id": pa.array([1, 2, 3], pa.int64()), "st": st})


def test_renamed_struct_child_reads_its_values(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(_struct_table(), uri, data_storage_version="legacy")
    lance.dataset(uri).alter_columns({"path": "st.a", "name": "b"})
    theirs = lance.dataset(uri).to_table()
    assert theirs.column("st").to_pylist()[0] == {"b": 1, "t": "x"}
    ours = lt.dataset(uri)
    assert ours.to_table().equals(theirs)
    assert ours.to_table(filter="id > 1").equals(lance.dataset(uri).to_table(filter="id > 1"))
    assert ours.take([2, 0]).equals(lance.dataset(uri).take([2, 0]))
    # the version before the rename still reads with its own names (readers are cached per schema)
    assert lt.dataset(uri, version=1).to_table().equals(_struct_table())
    assert lt.dataset(uri).to_table().equals(theirs)
    # read on its own, the file keeps the names of its schema copy
    assert LegacyFileReader(_data_file(uri)).read_all().equals(_struct_table())


def test_field_made_nullable_reads_empty_strings_as_null(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string(), nullable=False)])
    table = pa.table({"id": [1, 2, 3], "s": ["a", "", "c"]}, schema=schema)
    lance.write_dataset(table, uri, data_storage_version="legacy")
    assert lt.dataset(uri).to_table().column("s").to_pylist() == ["a", "", "c"]
    lance.dataset(uri).alter_columns({"path": "s", "nullable": True})
    theirs = lance.dataset(uri).to_table()
    assert theirs.column("s").to_pylist() == ["a", None, "c"]
    assert lt.dataset(uri).to_table().equals(theirs)
    # (pylance's count says 0 here: it trusts the page statistics, which counted no null)
    assert lt.dataset(uri).count_rows("s IS NULL") == 1
    # the file on its own still says the field is not nullable
    assert LegacyFileReader(_data_file(uri)).read_all().column("s").to_pylist() == ["a", "", "c"]


def test_dictionary_values_come_from_the_manifest(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    d = pa.array(["red", "green", "red", "blue"]).dictionary_encode()
    lance.write_dataset(pa.table({"id": [1, 2, 3, 4], "d": d}), uri, data_storage_version="legacy")
    path = _data_file(uri)
    data = path.read_bytes()
    at = data.index(b"redgreenblue")  # the file's copy of the dictionary values
    path.write_bytes(data[:at] + b"bluxgreyredd" + data[at + 12 :])
    theirs = lance.dataset(uri).to_table()
    assert theirs.column("d").to_pylist() == ["red", "green", "red", "blue"]
    assert lt.dataset(uri).to_table().equals(theirs)
    assert lt.dataset(uri).count_rows("d = 'red'") == 2
    # on its own, the file can only use its own (here damaged) copy
    alone = LegacyFileReader(path).read_all().column("d").to_pylist()
    assert alone == ["blu", "xgrey", "blu", "redd"]
