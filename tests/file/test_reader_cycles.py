"""A dropped file reader is freed at once, by reference counting: none of the objects a reader
holds (its metadata, column list, field tree) refer to each other in a cycle. A scan of
thousands of small files keeps a reader per file; objects in cycles would wait for the garbage
collector, which walks every live object each time it runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pyarrow as pa
import pytest
from lance.file import LanceFileWriter

from lance_table.file import write_table
from lance_table.file.reader import LanceFileReader


@pytest.fixture
def collector_paused() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _table() -> pa.Table:
    n = 300
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "s": pa.array([f"v{i % 7}" for i in range(n)]),
            "st": pa.array([{"a": i, "b": [i, i + 1]} for i in range(n)]),
            "l": pa.array([[str(i)] * (i % 3) for i in range(n)]),
        }
    )


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_a_dropped_reader_leaves_no_garbage_cycles(tmp_path, version, writer, collector_paused):
    path = str(tmp_path / "f.lance")
    table = _table()
    if writer == "lance_table":
        write_table(path, table, version=version)
    else:
        with LanceFileWriter(path, table.schema, version=version) as w:
            w.write_batch(table)
    gc.collect()  # (what the write left)
    reader = LanceFileReader(path)
    got = reader.read_all()
    assert got.equals(table)
    assert reader.take([3, 1]).column("id").to_pylist() == [3, 1]
    del reader, got
    assert gc.collect() == 0  # nothing was left for the collector
