"""Opening a file parses its footer region once per file, but what its file descriptor says (the
row count, fields, field tree, Arrow schema and the columns of its leaves) is made once for all
the files whose descriptors are the same bytes: the files of a living table. These tests check
that the shared parts really are shared, that each file still reads as pylance reads it, and
that the checks made as each column is first parsed still catch damage."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PylanceFileReader
from lance.file import LanceFileWriter as PylanceFileWriter

from lance_table._proto import file2_pb2
from lance_table.errors import CorruptFileError
from lance_table.file import write_table
from lance_table.file.column_list import ColumnList
from lance_table.file.container import TAIL_READ_SIZE
from lance_table.file.reader import LanceFileReader
from lance_table.storage.io_stats import IOStats, collecting
from lance_table.storage.sources import LocalFileSource


def _table(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "s": pa.array([f"value-{i % 13}" for i in range(start, start + n)]),
            "st": pa.array([{"a": i, "b": [i, i + 1]} for i in range(start, start + n)]),
        }
    )


def _write(path: Path, table: pa.Table, by: str, version: str) -> None:
    if by == "pylance":
        with PylanceFileWriter(str(path), version=version) as writer:
            writer.write_batch(table)
    else:
        write_table(str(path), table, version=version)


def _pylance_rows(path: Path) -> pa.Table:
    return PylanceFileReader(str(path)).read_all().to_table()


@pytest.mark.parametrize("by", ["pylance", "lance_table"])
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_files_of_one_descriptor_share_its_facts(tmp_path: Path, by: str, version: str) -> None:
    paths = [tmp_path / f"{i}.lance" for i in range(3)]
    for i, path in enumerate(paths):
        _write(path, _table(100 * i, 100), by, version)
    readers = [LanceFileReader(str(p)) for p in paths]
    first = readers[0].metadata
    assert first.described is not None
    for path, reader in zip(paths, readers):
        meta = reader.metadata
        assert meta.described is first.described
        assert meta.fields is first.fields
        assert reader.schema is readers[0].schema
        assert [n.id for n in meta.roots] == [n.id for n in first.roots]
        if reader is not readers[0]:
            assert meta.roots is not first.roots  # each file's own list (callers may keep it)
        if version != "2.0":  # a 2.0 file's columns depend on its pages: found file by file
            assert reader._col_of is readers[0]._col_of
        assert reader.read_all().equals(_pylance_rows(path))


def test_another_row_count_is_another_descriptor(tmp_path: Path) -> None:
    a, b = tmp_path / "a.lance", tmp_path / "b.lance"
    _write(a, _table(0, 100), "pylance", "2.2")
    _write(b, _table(0, 101), "pylance", "2.2")
    ra, rb = LanceFileReader(str(a)), LanceFileReader(str(b))
    assert (ra.num_rows, rb.num_rows) == (100, 101)
    assert ra.metadata.described is not rb.metadata.described
    assert ra.metadata.fields is rb.metadata.fields  # (the same schema bytes: one field list)
    assert ra.read_all().equals(_pylance_rows(a))
    assert rb.read_all().equals(_pylance_rows(b))


@pytest.mark.parametrize("by", ["pylance", "lance_table"])
def test_column_metadata_beyond_the_tail_read_first(tmp_path: Path, by: str) -> None:
    """A file whose column metadata does not fit the 64 KiB read first: each column's metadata is
    read on its own, and every column reads as pylance reads it."""
    table = pa.table({f"c{i}": pa.array([i, i + 1, None], pa.int32()) for i in range(3000)})
    path = tmp_path / "wide.lance"
    _write(path, table, by, "2.2")
    reader = LanceFileReader(str(path))
    meta = reader.metadata
    assert meta.size > TAIL_READ_SIZE
    assert reader.read_all().equals(_pylance_rows(path))
    assert reader.read_all(["c2999", "c0"]).equals(_pylance_rows(path).select(["c2999", "c0"]))


def _column_list(values: int, rows_expected: int | None) -> ColumnList:
    col = file2_pb2.ColumnMetadata()
    page = col.pages.add()
    page.length = values
    page.buffer_offsets.append(0)
    page.buffer_sizes.append(8)
    raw = col.SerializeToString()
    region = b"\x00" * 16 + raw
    columns = ColumnList(region, (100, len(raw)), 84, "f.lance", 1000)
    if rows_expected is not None:
        columns.expect_rows([0], rows_expected)
    return columns


def test_rows_of_a_column_checked_when_parsed() -> None:
    assert _column_list(10, 10).value_count(0) == 10
    assert _column_list(10, None).value_count(0) == 10
    with pytest.raises(CorruptFileError, match="column 0 has 10 values for 11 rows"):
        _column_list(10, 11).value_count(0)


def test_rows_of_a_column_parsed_before_checked_when_expected() -> None:
    columns = _column_list(10, None)
    assert columns.value_count(0) == 10
    columns.expect_rows([1], 11)  # another column: nothing to say about column 0
    with pytest.raises(CorruptFileError, match="column 0 has 10 values for 11 rows"):
        columns.expect_rows(frozenset([0]), 11)


def test_local_single_read(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(200)))
    source = LocalFileSource(str(path))
    with collecting(IOStats()) as stats:
        (got,) = source.read_ranges([(10, 20)])
    assert bytes(got) == bytes(range(10, 30))
    assert (stats.iops, stats.bytes_read) == (1, 20)
    with pytest.raises(CorruptFileError, match="outside the file"):
        source.read_ranges([(190, 20)])
    os.truncate(path, 50)  # shorter than when the source was made: a short read is damage
    with pytest.raises(CorruptFileError, match="short read"):
        source.read_ranges([(0, 100)])
