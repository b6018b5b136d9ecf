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
