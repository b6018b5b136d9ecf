"""Scans after deletes (rows deleted here and there, and whole ranges) read what pylance reads of
the same dataset: batches, offset and limit, row ids, filters, counts; on datasets either library
wrote and deleted from."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt

ROWS = 7000


def _table() -> pa.Table:
    ids = np.arange(ROWS, dtype=np.int64)
    words = np.array(["red", "green", "blue", "amber"], dtype=object)
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array((ids * 7919 % 1000) / 1000.0, mask=ids % 11 == 0),
            "cat": pa.array(words[ids % 4], pa.string(), mask=ids % 17 == 0),
            "text": pa.array([f"text-{i * 31 % 977}" for i in ids.tolist()]),
        }
    )


@pytest.fixture(scope="module", params=["2.0", "2.2"])
def datasets(request, tmp_path_factory):
    """Per writer, the dataset it wrote (two fragments) after the other library deleted every
    tenth row and a range from it."""
    root = tmp_path_factory.mktemp("delscan")
    out = {}
    for writer, deleter in (("ours", lance), ("pylance", lt)):
        uri = str(root / f"{writer}-{request.param}")
        write = lt.write_dataset if writer == "ours" else lance.write_dataset
        write(_table(), uri, max_rows_per_file=5000, data_storage_version=request.param)
        deleter.dataset(uri).delete("id % 10 = 0")
        deleter.dataset(uri).delete("id >= 2100 AND id < 3300")
        out[writer] = uri
    return out


@pytest.fixture(autouse=True)
def _small_ranges(monkeypatch):
    from lance_table.table import scan

    monkeypatch.setattr(scan, "READ_CHUNK_ROWS", 1500)  # a fragment is read in several ranges
    monkeypatch.setattr(scan, "TABLE_RANGE_ROWS", 1500)


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_scans_after_deletes_match_pylance(datasets, writer):
    uri = datasets[writer]
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    expected = theirs.to_table()
    assert_tables_equal(ours.to_table(), expected)
    batches = list(ours.to_batches(batch_size=700))
    assert all(b.num_rows <= 700 for b in batches)
    assert_tables_equal(pa.Table.from_batches(batches), expected)
    assert_tables_equal(ours.to_table(offset=1234, limit=2100), theirs.to_table(offset=1234, limit=2100))
    got, want = ours.to_table(with_row_id=True), theirs.to_table(with_row_id=True)
    assert got.column("_rowid").equals(want.column("_rowid").cast(pa.uint64()))
    predicate = "x > 0.3 AND id % 3 = 1"
    assert_tables_equal(
        ours.to_table(filter=predicate, columns=["id", "cat"]),
        theirs.to_table(filter=predicate, columns=["id", "cat"]),
    )
    assert ours.count_rows() == theirs.count_rows() == expected.num_rows
    assert ours.count_rows(filter="cat = 'red'") == theirs.count_rows(filter="cat = 'red'")


def test_batches_of_misaligned_chunks_are_sliced_to_size():
    from lance_table.table.scan import batches_of

    table = pa.table(
        {
            "a": pa.chunked_array([pa.array(range(0, 4)), pa.array(range(4, 11))]),
            "b": pa.chunked_array([pa.array([f"s{i}" for i in range(7)]), pa.array(["t"] * 4)]),
            "c": pa.chunked_array([pa.array(np.arange(11.0))]),
        }
    )
    batches = list(batches_of(table, 3))
    assert [b.num_rows for b in batches] == [3, 3, 3, 2]
    assert pa.Table.from_batches(batches).equals(table.combine_chunks())
