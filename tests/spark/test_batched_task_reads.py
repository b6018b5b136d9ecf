"""A task's share of many small fragments is read as batches of fragments (as a scan reads them):
the rows, their order, deletions, filters and system columns are those pylance reads."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
from lance_table.spark.source import LanceTableDataSource

lance = pytest.importorskip("lance")


@pytest.fixture(scope="module")
def many_small(tmp_path_factory: pytest.TempPathFactory) -> str:
    """120 fragments of 25 rows written by pylance (2.2), some rows deleted."""
    uri = str(tmp_path_factory.mktemp("batched") / "ds")
    rng = np.random.default_rng(5)
    n = 3000
    table = pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "x": pa.array(rng.random(n), mask=rng.random(n) < 0.1),
            "name": pa.array([f"name-{i % 37}" if i % 11 else None for i in range(n)]),
        }
    )
    lance.write_dataset(table, uri, max_rows_per_file=25, data_storage_version="2.2")
    lance.dataset(uri).delete("id % 7 = 3 OR (id >= 500 AND id < 525)")  # a whole fragment too
    return uri


def _task_rows(uri: str, options: dict[str, str]) -> pa.Table:
    source = LanceTableDataSource({"path": uri, **options})
    reader = source.reader(source.schema())
    task = pickle.loads(pickle.dumps(reader))
    batches = [b for p in reader.partitions() for b in task.read(p)]
    return pa.Table.from_batches(batches)


@pytest.mark.parametrize(
    ("options", "columns", "where", "system"),
    [
        ({}, ["id", "x", "name"], None, False),
        ({"columns": "name,id,_rowid,_rowaddr"}, ["name", "id"], None, True),
        (
            {"columns": "id,name,_rowaddr", "filter": "x > 0.5 OR id < 40"},
            ["id", "name"],
            "x > 0.5 OR id < 40",
            True,
        ),
    ],
    ids=["all", "system", "filter"],
)
def test_task_reads_of_many_small_fragments_match_pylance(many_small, options, columns, where, system):
    got = _task_rows(many_small, {**options, "batch_size": "700"})
    expected = lance.dataset(many_small).to_table(
        columns=columns,
        filter=where,
        with_row_id=system and "_rowid" in got.column_names,
        with_row_address=system,
    )
    assert got.num_rows == expected.num_rows
    for name in expected.column_names:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name


def test_a_count_of_many_small_fragments_reads_no_columns(many_small):
    got = _task_rows(many_small, {"columns": ""})
    assert got.num_rows == lance.dataset(many_small).count_rows()


def test_small_fragments_are_joined_and_large_ones_sliced(tmp_path):
    """Spark gets batches of at most ``batch_size`` rows: a large fragment's rows in slices of that
    size, the rows of a run of small fragments joined into one batch, deletions left out, all in
    pylance's order."""
    uri = str(tmp_path / "ds")
    ids = iter(range(10**6))

    def rows(n: int) -> pa.Table:
        return pa.table({"id": pa.array([next(ids) for _ in range(n)], pa.int64())})

    lance.write_dataset(rows(3000), uri, data_storage_version="2.2")
    for _ in range(20):
        lance.write_dataset(rows(10), uri, mode="append")
    lance.write_dataset(rows(3000), uri, mode="append")
    lance.dataset(uri).delete("id % 97 = 5")
    source = LanceTableDataSource({"path": uri, "batch_size": "1000", "max_rows_per_partition": "100000"})
    reader = source.reader(source.schema())
    (partition,) = reader.partitions()
    batches = list(pickle.loads(pickle.dumps(reader)).read(partition))
    expected = lance.dataset(uri).to_table().column("id").to_pylist()
    assert pa.Table.from_batches(batches).column("id").to_pylist() == expected
    assert all(b.num_rows <= 1000 for b in batches)
    small = [b for b in batches if 3000 <= b.column(0)[0].as_py() < 3200]
    assert [b.num_rows for b in small] == [sum(3000 <= i < 3200 for i in expected)]
    assert len(batches) == 7


def test_a_large_fragment_is_read_in_large_ranges_and_handed_on_in_slices(tmp_path, monkeypatch):
    """A task reads a large fragment READ_CHUNK_ROWS rows at a time (each read of a range costs
    a fixed amount beside its rows) and hands Spark slices of what it decoded, not copies."""
    from lance_table.spark import read as spark_read
    from lance_table.table.scan import READ_CHUNK_ROWS

    uri = str(tmp_path / "ds")
    n = READ_CHUNK_ROWS + 40_000
    lance.write_dataset(pa.table({"id": np.arange(n, dtype=np.int64)}), uri, data_storage_version="2.2")
    ranges = []
    real = spark_read.scan_tasks

    def spy(tasks, *args):
        ranges.extend((lo, hi) for _, lo, hi in tasks)
        return real(tasks, *args)

    monkeypatch.setattr(spark_read, "scan_tasks", spy)
    monkeypatch.setattr(spark_read, "planning_cores", lambda: 1)  # one task reads it all
    source = LanceTableDataSource({"path": uri, "batch_size": "65536"})
    reader = source.reader(source.schema())
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    assert ranges == [(0, READ_CHUNK_ROWS), (READ_CHUNK_ROWS, n)]
    assert pa.Table.from_batches(batches).column("id").to_pylist() == list(range(n))
    assert [b.num_rows for b in batches] == [65536] * (READ_CHUNK_ROWS // 65536) + [40_000]
    first, second = (b.column(0) for b in batches[:2])
    assert second.buffers()[1].address == first.buffers()[1].address  # slices of one decoded buffer
    assert second.offset == first.offset + 65536
