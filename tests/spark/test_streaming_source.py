"""The Structured Streaming source on a real local Spark session, over a dataset that other writers
(lance_table and pylance) append to while the query runs."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.spark


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def _collected(spark, name: str) -> pa.Table:
    return spark.table(name).toArrow().sort_by("id")


def _check(table: pa.Table, ids: list[int]) -> None:
    assert table["id"].to_pylist() == ids  # sorted: no loss, no duplicates
    assert table["name"].to_pylist() == [f"n{i}" for i in ids]


def test_source_follows_appends_bounds_batches_and_stops_at_changes(spark, tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 100), uri, max_rows_per_file=30)  # version 1: four fragments
    lance.write_dataset(_rows(100, 50), uri, mode="append")  # version 2

    # The table as of the start (150 rows) comes first, at most 70 rows per micro-batch.
    q = (
        spark.readStream.format("lance_table")
        .option("maxRowsPerTrigger", "70")
        .load(uri)
        .writeStream.format("memory")
        .queryName("follow")
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        q.processAllAvailable()
        _check(_collected(spark, "follow"), list(range(150)))
        # Other writers append while the query runs: versions 3 (three fragments) and 4.
        lt.write_dataset(_rows(150, 100), uri, mode="append", max_rows_per_file=40)
        lance.write_dataset(_rows(250, 50), uri, mode="append")
        q.processAllAvailable()
        _check(_collected(spark, "follow"), list(range(300)))
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        assert sum(sizes) == 300 and max(sizes) <= 70

        # A version that deletes rows stops the query, naming the version and its operation.
        lt.dataset(uri).delete("id < 10")  # version 5
        with pytest.raises(Exception, match=r"version 5 .*Delete"):
            q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is not None and "skipChangeCommits" in str(q.exception())

    # From version 3 on, passing over the delete, 50 rows a micro-batch, into another dataset;
    # then restarted from its checkpoint after one more append: every row once.
    lt.write_dataset(_rows(300, 20), uri, mode="append")  # version 6
    copy, ck = str(tmp_path / "copy"), str(tmp_path / "ck")

    def pipeline() -> None:
        (
            spark.readStream.format("lance_table")
            .option("startingVersion", "3")
            .option("skipChangeCommits", "true")
            .option("maxRowsPerTrigger", "50")
            .load(uri)
            .writeStream.format("lance_table")
            .option("checkpointLocation", ck)
            .trigger(availableNow=True)
            .start(copy)
        ).awaitTermination()

    pipeline()
    _check(lt.dataset(copy).to_table().sort_by("id"), list(range(150, 320)))
    assert lt.dataset(copy).version == 4  # 170 rows: 50 + 50 + 50 + 20 (micro-batches split versions)
    lt.write_dataset(_rows(320, 30), uri, mode="append")  # version 7
    pipeline()
    _check(lt.dataset(copy).to_table().sort_by("id"), list(range(150, 350)))


def test_a_bad_streaming_option_fails_the_query_naming_it(spark, tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 10), uri)
    q = (
        spark.readStream.format("lance_table")
        .option("maxRowsPerTrigger", "0")
        .load(uri)
        .writeStream.format("memory")
        .queryName("bad_option")
        .trigger(availableNow=True)
        .start()
    )
    try:
        with pytest.raises(Exception, match="'maxRowsPerTrigger' must be positive"):
            q.awaitTermination()
    finally:
        q.stop()
