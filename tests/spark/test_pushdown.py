"""Filter pushdown driven as Spark drives it (no Spark session): every filter Spark can push is
applied with Spark's meaning, every filter is handed back to Spark, and filters pushed for one
query are not applied by the tasks of a later query that reuses the planned read."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_table as lt

pytest.importorskip("pyspark")

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from lance_table.spark.source import PushdownDataSource


def _table() -> pa.Table:
    ids = np.arange(300)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array(ids * 0.5),
            "s": pa.array([f"s{i}" if i % 7 else None for i in ids.tolist()]),
        }
    )


def _read(reader) -> pa.Table:
    """Every row the reader yields, as Spark's tasks would read its partitions."""
    batches = [b for part in reader.partitions() for b in reader.read(part)]
    return pa.Table.from_batches(batches).select(["id"])


CASES = [
    ([EqualTo(("id",), 17)], lambda t: pc.equal(t["id"], 17)),
    ([EqualNullSafe(("s",), "s8")], lambda t: pc.equal(t["s"], "s8")),
    (
        [GreaterThan(("id",), 290), LessThan(("x",), 147.0)],
        lambda t: pc.and_(pc.greater(t["id"], 290), pc.less(t["x"], 147.0)),
    ),
    (
        [GreaterThanOrEqual(("id",), 10), LessThanOrEqual(("id",), 12)],
        lambda t: pc.and_(pc.greater_equal(t["id"], 10), pc.less_equal(t["id"], 12)),
    ),
    ([In(("id",), (1, 5, 299))], lambda t: pc.is_in(t["id"], pa.array([1, 5, 299]))),
    ([IsNull(("s",)), LessThan(("id",), 50)], lambda t: pc.and_(pc.is_null(t["s"]), pc.less(t["id"], 50))),
    ([IsNotNull(("s",)), LessThan(("id",), 8)], lambda t: pc.and_(pc.is_valid(t["s"]), pc.less(t["id"], 8))),
    ([StringStartsWith(("s",), "s29")], lambda t: pc.starts_with(t["s"], "s29")),
    ([StringEndsWith(("s",), "99")], lambda t: pc.ends_with(t["s"], "99")),
    ([StringContains(("s",), "12")], lambda t: pc.match_substring(t["s"], "12")),
    ([Not(GreaterThanOrEqual(("id",), 10))], lambda t: pc.less(t["id"], 10)),
]


@pytest.mark.parametrize(("filters", "mask"), CASES, ids=[str(c[0]) for c in CASES])
def test_pushed_filters_select_what_spark_would_and_go_back_to_spark(tmp_path, filters, mask):
    table = _table()
    uri = str(tmp_path / "ds")
    lt.write_dataset(table, uri, max_rows_per_file=100)
    source = PushdownDataSource({"path": uri})
    reader = source.reader(source.schema())
    handed_back = list(reader.pushFilters(filters))
    assert [id(f) for f in handed_back] == [id(f) for f in filters]  # Spark re-applies them all
    got = _read(reader)
    expected = table.filter(mask(table))
    assert sorted(got["id"].to_pylist()) == sorted(expected["id"].to_pylist())
    assert got.num_rows < table.num_rows  # the source dropped rows itself


def test_filters_the_source_cannot_apply_are_left_to_spark(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_table(), uri)
    source = PushdownDataSource({"path": uri})
    reader = source.reader(source.schema())
    ts = EqualTo(("id",), dt.datetime(2024, 1, 1))  # its meaning depends on the session time zone
    assert list(reader.pushFilters([ts])) == [ts]
    assert _read(reader).num_rows == 300
