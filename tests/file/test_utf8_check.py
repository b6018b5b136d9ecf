"""Strings that are not valid UTF-8 (a damaged string page) are refused when read, as pylance
refuses them: a typed error naming the file and the column, not an array that fails later."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PylanceFileReader
from lance.file import LanceFileWriter

import lance_table
from lance_table.errors import CorruptFileError
from lance_table.file import utf8
from lance_table.file.reader import LanceFileReader

ROWS = 300


def _table() -> pa.Table:
    return pa.table(
        {
            "i": pa.array(range(ROWS), pa.int64()),
            "s": pa.array([f"hello world {i}" for i in range(ROWS)]),
            "l": pa.array([[f"item {i}", "é"] for i in range(ROWS)], pa.list_(pa.string())),
        }
    )


def _damage(path: Path, text: bytes) -> None:
    data = bytearray(path.read_bytes())
    at = data.find(text)
    assert at >= 0 and data.find(text, at + 1) < 0, f"{text!r} is not stored once as plain bytes"
    data[at] = 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_a_damaged_string_page_is_refused_naming_the_file_and_column(tmp_path: Path, version: str) -> None:
    path = tmp_path / f"strings-{version}.lance"
    lance_table.file.write_table(path, _table(), version=version)
    _damage(path, b"hello world 200")
    with pytest.raises(
        CorruptFileError, match=r"column 's'.* holds strings that are not valid UTF-8"
    ) as info:
        LanceFileReader(path).read_all()
    assert str(path) in str(info.value) and isinstance(info.value, ValueError)
    with pytest.raises(CorruptFileError, match="'s'"):
        LanceFileReader(path).take([3, 200])
    # the rows around it are read: a read checks the strings it returns (pylance's too)
    assert LanceFileReader(path).take([3, 199, 201]).column("s").to_pylist() == [
        "hello world 3",
        "hello world 199",
        "hello world 201",
    ]
    with pytest.raises(ValueError, match="utf-8"):
        PylanceFileReader(str(path)).read_all().to_table()
    assert PylanceFileReader(str(path)).take_rows([3, 199, 201]).to_table().column("s").to_pylist()[0] == (
        "hello world 3"
    )


def test_a_damaged_list_of_strings_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lists.lance"
    lance_table.file.write_table(path, _table(), version="2.2")
    _damage(path, b"item 100")
    with pytest.raises(CorruptFileError, match="column 'l'") as info:
        LanceFileReader(path).read_all(["l"])
    assert str(path) in str(info.value)
    assert LanceFileReader(path).read_all(["i", "s"]).num_rows == ROWS


@pytest.mark.parametrize("version", ["legacy", "2.2"])
def test_a_dataset_read_names_the_damaged_file(tmp_path: Path, version: str) -> None:
    """Small fragments are read as one batch: a damaged one is then read on its own, naming it."""
    uri = tmp_path / "ds"
    table = _table()
    ds = lance_table.write_dataset(table, uri, max_rows_per_file=ROWS // 3, data_storage_version=version)
    files = [f for f in (uri / "data").iterdir() if b"hello world 150" in f.read_bytes()]
    assert len(list((uri / "data").iterdir())) == 3 and len(files) == 1
    _damage(files[0], b"hello world 150")
    with pytest.raises(CorruptFileError, match="not valid UTF-8") as info:
        lance_table.dataset(uri).to_table()
    assert files[0].name in str(info.value)
    assert ds.to_table(columns=["i"]).num_rows == ROWS
    with pytest.raises(ValueError, match=r"(?i)utf-?8"):
        lance.dataset(str(uri)).to_table()


def test_strings_of_every_shape_are_looked_at() -> None:
    bad = pa.Array.from_buffers(
        pa.string(), 2, [None, pa.py_buffer(b"\0\0\0\0\1\0\0\0\2\0\0\0"), pa.py_buffer(b"a\xff")]
    )
    assert utf8.problem_of(bad) is not None
    assert utf8.problem_of(bad.slice(0, 1)) is None  # the damaged value is not among those read
    assert utf8.problem_of(pa.array(["é", "ascii", None, "日本"])) is None
    assert utf8.problem_of(pa.array(["é"], pa.large_string())) is None
    lists = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), bad)
    assert utf8.problem_of(lists) is not None and utf8.problem_of(lists.slice(0, 1)) is None
    assert utf8.problem_of(pa.StructArray.from_arrays([bad], ["s"])) is not None
    assert utf8.problem_of(pa.DictionaryArray.from_arrays(pa.array([0, 0]), bad)) is not None
    assert utf8.problem_of(pa.chunked_array([pa.array(["a"]), bad])) is not None
    assert utf8.problem_of(pa.array([b"\xff"])) is None  # binary values are bytes, not text


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_a_damaged_dictionary_is_refused_where_its_entry_is_read(tmp_path: Path, version: str) -> None:
    """A dictionary page's rows are checked as pylance checks them: in 2.1/2.2 a read of the
    damaged entry is refused, a read of other rows is not (a sound dictionary vouches for its rows
    at no cost); in 2.0 the dictionary is checked whole, so any read of the page is refused. The
    file is pylance's: it picks a dictionary for these strings in 2.0 too."""
    path = tmp_path / f"dictionary-{version}.lance"
    words = ["alphabetical", "betamax", "gammaray"]
    table = pa.table({"c": pa.array([words[i % 3] for i in range(3000)])})
    with LanceFileWriter(str(path), table.schema, version=version) as writer:
        writer.write_batch(table)
    _damage(path, b"gammaray")
    for rows in (None, [2]) if version != "2.0" else (None, [2], [0, 1]):
        with pytest.raises(CorruptFileError, match=r"column ('c'|0).* not valid UTF-8") as info:
            LanceFileReader(path).read_all() if rows is None else LanceFileReader(path).take(rows)
        assert str(path) in str(info.value)
        pylance = PylanceFileReader(str(path))
        with pytest.raises(ValueError, match=r"(?i)utf-?8"):
            (pylance.read_all() if rows is None else pylance.take_rows(rows)).to_table()
    if version != "2.0":
        assert LanceFileReader(path).take([0, 1]).column("c").to_pylist() == words[:2]
        assert PylanceFileReader(str(path)).take_rows([0, 1]).to_table().column("c").to_pylist() == words[:2]
