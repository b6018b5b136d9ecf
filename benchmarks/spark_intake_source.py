"""A Spark Python data source that yields Arrow batches already in memory (for
``bench_spark_intake.py``): what a read costs beyond decoding, that is the Python worker's
hand-over of the batches and the JVM's intake of them.

Options: ``rows`` (in all), ``columns`` (comma-separated, from the benchmark schema: id, x, cat,
text, vec), ``batch_size`` (rows per batch) and ``partitions``. Each worker builds its rows once,
cast to the Arrow schema Spark expects, and yields slices of them to every later task.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

#: Spark's type of each column of the benchmark schema (``vec`` arrives as a list, as a
#: fixed-size list column does through the lance_table source)
SPARK_TYPES = {"id": "long", "x": "double", "cat": "string", "text": "string", "vec": "array<float>"}

_TABLES: dict[tuple[Any, ...], pa.Table] = {}


def _table(rows: int, columns: list[str]) -> pa.Table:
    rng = np.random.default_rng(1)
    made: dict[str, pa.Array] = {}
    if "id" in columns:
        made["id"] = pa.array(np.arange(rows, dtype=np.int64))
    if "x" in columns:
        made["x"] = pa.array(rng.random(rows))
    if "cat" in columns:
        categories = np.array([f"category-{i:03d}" for i in range(100)], dtype=object)
        made["cat"] = pa.array(categories[rng.integers(0, 100, rows)], pa.string())
    if "text" in columns:
        letters = rng.integers(ord("a"), ord("z") + 1, rows * 20, dtype=np.uint8)
        offsets = pa.py_buffer((np.arange(rows + 1, dtype=np.int32) * 20).tobytes())
        made["text"] = pa.Array.from_buffers(
            pa.string(), rows, [None, offsets, pa.py_buffer(letters.tobytes())]
        )
    if "vec" in columns:
        values = pa.array(rng.random(rows * 16, dtype=np.float32))
        made["vec"] = pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32) * 16), values)
    return pa.table({c: made[c] for c in columns})


class _Part(InputPartition):
    def __init__(self, index: int) -> None:
        self.index = index


class _Reader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: Any) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.rows = int(options["rows"])
        self.columns = options["columns"].split(",")
        self.batch_size = int(options["batch_size"])
        self.parts = int(options.get("partitions", "2"))
        self.target = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[_Part]:
        return [_Part(i) for i in range(self.parts)]

    def read(self, partition: _Part) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        key = (self.rows // self.parts, tuple(self.columns))
        if key not in _TABLES:
            _TABLES.clear()
            _TABLES[key] = _table(self.rows // self.parts, self.columns).cast(self.target).combine_chunks()
        yield from _TABLES[key].to_batches(max_chunksize=self.batch_size)  # slices: no copy


class InMemorySource(DataSource):
    """Batches from memory, in the shape given by the options."""

    @classmethod
    def name(cls) -> str:
        return "bench_in_memory"

    def schema(self) -> str:
        return ", ".join(f"{c} {SPARK_TYPES[c]}" for c in self.options["columns"].split(","))

    def reader(self, schema: Any) -> _Reader:
        return _Reader(self.options, schema)
