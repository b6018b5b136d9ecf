"""Structs with no leaf below them (``struct<>``): no column stores them, yet every row is kept."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_table.file import write_table
from lance_table.file.reader import LanceFileReader

TABLE = pa.table(
    {
        "s": pa.array([{}, {}, {}], pa.struct([])),
        "n": pa.array([{"a": {}}] * 3, pa.struct([("a", pa.struct([]))])),
        "i": pa.array([1, 2, 3], pa.int64()),
    }
)


def test_our_2_0_file_keeps_the_rows(tmp_path):
    path = tmp_path / "e.lance"
    write_table(path, TABLE)
    reader = LanceFileReader(path)
    assert reader.num_rows == 3
    assert reader.read_all().equals(TABLE)
    assert reader.take([2, 0]).to_pylist() == [TABLE.to_pylist()[2], TABLE.to_pylist()[0]]
    assert reader.read_range(1, 3).equals(TABLE.slice(1, 2))
    assert reader.read_all(columns=["s"]).to_pylist() == [{"s": {}}] * 3


@pytest.mark.interop
def test_pylance_reads_our_empty_structs(tmp_path):
    from lance.file import LanceFileReader as PylanceReader

    path = tmp_path / "e.lance"
    write_table(path, TABLE)
    assert PylanceReader(str(path)).read_all().to_table().equals(TABLE)


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_we_read_pylance_empty_structs_as_pylance_does(tmp_path, version):
    from lance.file import LanceFileReader as PylanceReader
    from lance.file import LanceFileWriter as PylanceWriter

    only = TABLE.select(["s"])
    path = str(tmp_path / f"e{version}.lance")
    writer = PylanceWriter(path, only.schema, version=version)
    writer.write_batch(only)
    writer.close()
    ours = LanceFileReader(path).read_all()
    assert ours.to_pylist() == [{"s": {}}] * 3
    assert ours.equals(PylanceReader(path).read_all().to_table())
    # beside other columns: the rows of the source (pylance 14 itself misreads "i" after two
    # leafless structs in 2.1/2.2 files, so the source is the oracle here)
    path = str(tmp_path / f"m{version}.lance")
    writer = PylanceWriter(path, TABLE.schema, version=version)
    writer.write_batch(TABLE)
    writer.close()
    assert LanceFileReader(path).read_all().equals(TABLE)
