"""A write task joins Spark's small Arrow batches (``maxRecordsPerBatch`` rows each) into larger
ones before encoding them (:func:`write.coalesced`): the rows, their order and what pylance reads
are those Spark sent."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
import lance_table as lt
from lance_table.spark.types import spark_arrow_schema, spark_schema
from lance_table.spark.write import LanceTableWriter, coalesced

lance = pytest.importorskip("lance")


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(2)
    ids = np.arange(n, dtype=np.int64)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4)
    return pa.table(
        {
            "id": ids,
            "x": pa.array(rng.random(n), mask=rng.random(n) < 0.1),
            "s": pa.array([f"s{i}" if i % 7 else None for i in ids.tolist()]),
            "vec": vec,
        }
    )


def _spark_batches(table: pa.Table, rows: int) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """``table`` as Spark hands it to a write task: in its Arrow schema, ``rows`` rows a batch."""
    schema = spark_arrow_schema(spark_schema(table.schema))
    return schema, [b.cast(schema) for b in table.to_batches(max_chunksize=rows)]


def test_small_batches_are_joined_in_order():
    table = pa.table({"a": np.arange(1000), "s": [str(i) for i in range(1000)]})
    batches = table.to_batches(max_chunksize=30)
    empty = batches[0].slice(0, 0)
    out = list(coalesced([empty, *batches[:5], empty, *batches[5:]], rows=100))
    assert [b.num_rows for b in out] == [120] * 8 + [40]
    assert pa.Table.from_batches(out).equals(table)


def test_byte_bound_and_large_batches():
    table = pa.table({"s": ["x" * 1000] * 50})
    # batches with buffers of their own, as Spark sends them (a slice counts its parent's buffers)
    small = [pa.record_batch({"s": ["x" * 1000] * 5}) for _ in range(10)]
    # 5 rows are about 5 kB: the byte bound closes a join after two batches
    out = list(coalesced(small, rows=10**6, max_bytes=8000))
    assert [b.num_rows for b in out] == [10] * 5
    assert pa.Table.from_batches(out).equals(table)
    big = table.to_batches()[0]
    (alone,) = coalesced([big], rows=10)
    assert alone is big  # a batch that reaches the bound alone is not copied
    assert list(coalesced([])) == []


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_a_task_of_many_small_batches_writes_what_pylance_reads(tmp_path, version):
    table = _table(25_000)
    schema, batches = _spark_batches(table, 100)
    uri = str(tmp_path / "ds")
    writer = LanceTableWriter(uri, None, schema, True, data_storage_version=version)
    message = writer.write(iter(batches))
    writer.commit([message])
    assert len(message.fragments) == 1
    expected = pa.Table.from_batches(batches).cast(lt.dataset(uri).schema)
    assert lance.dataset(uri).to_table().equals(expected)
    assert lt.dataset(uri).to_table().equals(expected)


@pytest.mark.spark
def test_spark_write_of_small_arrow_batches(spark, tmp_path):
    table = _table(6000)
    uri = str(tmp_path / "ds")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "70")
    try:
        df = spark.createDataFrame(table.to_pandas()).coalesce(1)
        df.write.format("lance_table").mode("overwrite").option("data_storage_version", "2.2").save(uri)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    got = lance.dataset(uri).to_table().sort_by("id")
    assert got.num_rows == 6000
    assert got["id"].to_pylist() == list(range(6000))
    assert got["s"].to_pylist() == table["s"].to_pylist()
    assert got["x"].to_pylist() == table["x"].to_pylist()
    assert [list(v) for v in got["vec"].to_pylist()] == table["vec"].to_pylist()
