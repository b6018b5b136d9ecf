"""Legacy (0.1) dictionary columns cannot store nulls (their keys have no validity: a null would read
back as the first value, and a column of nothing but nulls gives a file no library reads). Such
writes are refused with a SchemaError before anything is committed, and leave no file behind."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import SchemaError
from lance_table.file.legacy import LegacyFileWriter


def _files(uri: str) -> list[str]:
    return sorted(p.relative_to(uri).as_posix() for p in Path(uri).rglob("*") if p.is_file())


def _table(d: pa.Array, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + len(d)), pa.int64()), "d": d})


def _dictionary(values: list[str | None]) -> pa.Array:
    return pa.array(values, pa.string()).dictionary_encode()


def test_append_of_nulls_is_refused_and_leaves_the_dataset_as_it_was(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(_dictionary(["a", "b", "a"])), uri, data_storage_version="legacy")
    before, rows = _files(uri), lt.dataset(uri).to_table()
    # the first batch is fine (and fills a file of its own), the second holds a null
    good = _table(_dictionary(["c"] * 50), 3).to_batches()[0]
    bad = _table(_dictionary(["x", None, "y"]), 53).to_batches()[0]
    stream = pa.RecordBatchReader.from_batches(good.schema, [good, bad])
    with pytest.raises(SchemaError, match=r"dictionary field 'd' holds 1 null.*legacy"):
        lt.write_dataset(stream, uri, mode="append", max_rows_per_file=50)
    assert _files(uri) == before
    ds = lt.dataset(uri)
    assert ds.version == 1
    assert ds.to_table().equals(rows)


def test_all_null_dictionary_column_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    table = _table(_dictionary([None, None, None]))
    with pytest.raises(SchemaError, match="holds only nulls"):
        lt.write_dataset(table, uri, data_storage_version="legacy")
    assert not Path(uri).exists() or _files(uri) == []
    with pytest.raises(lt.DatasetNotFoundError):
        lt.dataset(uri)
    # newer formats store such columns
    assert lt.write_dataset(table, uri).to_table().column("d").null_count == 3


def test_nested_dictionary_nulls_are_refused_and_null_values_stored(tmp_path: Path) -> None:
    nested = pa.StructArray.from_arrays([_dictionary(["a", None])], names=["d"])
    listed = pa.array([["a"], [None]], pa.list_(pa.string())).cast(
        pa.list_(pa.dictionary(pa.int32(), pa.string()))
    )
    for column in (nested, listed):
        table = pa.table({"c": column})
        with pytest.raises(SchemaError, match="cannot store nulls in dictionary fields"):
            LegacyFileWriter(io.BytesIO(), table.schema).write_batch(table)
    # a key pointing at a null value of the dictionary is stored: the value reads back as null
    keyed = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["a", None]))
    uri = str(tmp_path / "ds")
    ds = lt.write_dataset(_table(keyed), uri, data_storage_version="legacy")
    assert ds.to_table().column("d").to_pylist() == ["a", None, "a"]
