"""The Spark data source on a real local Spark session: reads, writes, options, failures, concurrency."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

import lance_table as lt

pytestmark = pytest.mark.spark


def _rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array(ids * 0.5),
            "s": pa.array([f"s{i}" if i % 7 else None for i in ids.tolist()]),
            "tags": pa.array([[f"t{i % 3}"] * (i % 3) for i in ids.tolist()], pa.list_(pa.string())),
            "point": pa.StructArray.from_arrays(
                [pa.array(ids % 10, pa.int32()), pa.array(ids * 2.0)], names=["a", "b"]
            ),
        }
    )


def _read(spark, uri: str, **options: str) -> pa.Table:
    reader = spark.read.format("lance_table")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(uri).toArrow()


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by("id")


def _spark_view(table: pa.Table) -> pa.Table:
    """What a table looks like after Spark (string columns may come back large)."""
    from lance_table.spark.types import spark_arrow_schema, spark_schema

    target = spark_arrow_schema(spark_schema(table.schema))
    return pa.Table.from_batches([b.cast(target) for b in table.to_batches()], schema=target)


def _same(actual: pa.Table, expected: pa.Table) -> None:
    actual = _sorted(actual)
    expected = _spark_view(_sorted(expected))
    actual = pa.Table.from_batches(
        [b.cast(expected.schema) for b in actual.to_batches()], schema=expected.schema
    )
    assert_tables_equal(actual, expected, check_metadata=False)


def test_spark_reads_what_lance_table_wrote(spark, tmp_path):
    uri = str(tmp_path / "ds")
    table = _rows(0, 3000)
    lt.write_dataset(table, uri, max_rows_per_file=700)
    _same(_read(spark, uri), table)


def test_spark_reads_what_pylance_wrote(spark, tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    table = _rows(0, 2000)
    lance.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=600)
    lance.dataset(uri).delete("id % 5 = 0")
    expected = table.filter(pc.not_equal(pc.modulo(table["id"], 5), 0))
    _same(_read(spark, uri), expected)  # deletions honoured


def test_spark_writes_and_both_libraries_read(spark, tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    table = _rows(0, 2500)
    spark.createDataFrame(table.to_pandas()).repartition(3).write.format("lance_table").mode(
        "overwrite"
    ).save(uri)
    ds = lt.dataset(uri)
    assert ds.version == 1 and len(ds.get_fragments()) == 3
    _same(ds.to_table(), table)
    _same(lance.dataset(uri).to_table(), table)
    spark.createDataFrame(_rows(5000, 100).to_pandas()).write.format("lance_table").mode("append").save(uri)
    assert lt.dataset(uri).count_rows() == 2600 and lance.dataset(uri).count_rows() == 2600
    spark.createDataFrame(_rows(9000, 10).to_pandas()).write.format("lance_table").mode("overwrite").save(uri)
    assert sorted(lt.dataset(uri).to_table()["id"].to_pylist()) == list(range(9000, 9010))
    assert lt.dataset(uri).versions()[-1]["operation"] == "overwrite"


def test_types_round_trip(spark, tmp_path):
    uri = str(tmp_path / "types")
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "b": pa.array([True, None, False]),
            "i8": pa.array([1, -2, None], pa.int8()),
            "i16": pa.array([1, -2, None], pa.int16()),
            "i32": pa.array([1, -2, None], pa.int32()),
            "f32": pa.array([1.5, None, -2.0], pa.float32()),
            "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50")], pa.decimal128(10, 2)),
            "d": pa.array([dt.date(2024, 1, 2), None, dt.date(1970, 1, 1)]),
            "ts": pa.array(
                [dt.datetime(2024, 1, 2, 3, 4, 5, 6), None, dt.datetime(2000, 1, 1)],
                pa.timestamp("us", "UTC"),
            ),
            "ntz": pa.array(
                [dt.datetime(2024, 1, 2, 3, 4, 5), None, dt.datetime(2000, 1, 1)], pa.timestamp("us")
            ),
            "bin": pa.array([b"\x00\x01", None, b""]),
            "arr": pa.array([[1, 2], None, []], pa.list_(pa.int32())),
            "nested": pa.array([[{"k": "a"}], [], None], pa.list_(pa.struct([("k", pa.string())]))),
        }
    )
    lt.write_dataset(table, uri)
    got = _read(spark, uri)
    _same(got, table)
    # and back through Spark's writer
    out = str(tmp_path / "types2")
    spark.read.format("lance_table").load(uri).write.format("lance_table").mode("overwrite").save(out)
    _same(lt.dataset(out).to_table(), table)


def test_unsigned_and_nanosecond_types_are_widened(spark, tmp_path):
    uri = str(tmp_path / "ds")
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "u64": pa.array([2**63 + 5, 0], pa.uint64()),
            "u8": pa.array([255, 0], pa.uint8()),
            "ns": pa.array([1_000_001_234, None], pa.timestamp("ns", "UTC")),
        }
    )
    lt.write_dataset(table, uri)
    rows = spark.read.format("lance_table").load(uri).orderBy("id").collect()
    assert rows[0]["u64"] == decimal.Decimal(2**63 + 5) and rows[0]["u8"] == 255
    assert rows[0]["ns"] == dt.datetime(1970, 1, 1, 0, 0, 1, 1, tzinfo=None) or rows[0]["ns"].microsecond == 1


def test_maps_cannot_be_written_to_2_0(spark, tmp_path):
    df = spark.createDataFrame([(1, {"a": 1})], "id long, m map<string,int>")
    with pytest.raises(Exception, match="map"):
        df.write.format("lance_table").mode("overwrite").option("data_storage_version", "2.0").save(
            str(tmp_path / "m")
        )
    assert not (tmp_path / "m" / "_versions").exists()


def test_read_options(spark, tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 1000), uri, max_rows_per_file=400)
    lt.dataset(uri).tags.create("first", 1)
    lt.write_dataset(_rows(1000, 500), uri, mode="append")
    lt.dataset(uri).delete("id < 100")
    assert _read(spark, uri).num_rows == 1400
    assert _read(spark, uri, version="1").num_rows == 1000
    assert _read(spark, uri, tag="first").num_rows == 1000
    asof = lt.dataset(uri).versions()[1]["timestamp"].isoformat()
    assert _read(spark, uri, asof=asof).num_rows == 1500
    got = _read(spark, uri, columns="s,id", filter="id >= 1490 AND s IS NOT NULL")
    assert got.column_names == ["s", "id"]
    assert sorted(got["id"].to_pylist()) == [i for i in range(1490, 1500) if i % 7]
    df = spark.read.format("lance_table").option("max_rows_per_partition", "150").load(uri)
    assert df.rdd.getNumPartitions() == sum(-(-n // 150) for n in (400, 400, 200, 500))
    assert df.count() == 1400
    assert _read(spark, uri, batch_size="7").num_rows == 1400
    user = spark.read.format("lance_table").schema("id long").load(uri)
    assert user.columns == ["id"] and user.count() == 1400
    with pytest.raises(Exception, match="version"):
        _read(spark, uri, version="1", tag="first")
    # Delta's and the JVM connector's names, in any case; a misspelled option names itself
    assert _read(spark, uri, versionAsOf="1").num_rows == 1000
    assert _read(spark, uri, TIMESTAMPASOF=asof).num_rows == 1500
    with pytest.raises(Exception, match=r"'verison'.*known options: path, version"):
        _read(spark, uri, verison="1")
    with pytest.raises(Exception, match="given twice"):
        _read(spark, uri, version="1", versionAsOf="1")
    writer = spark.createDataFrame([(1,)], "id long").write.format("lance_table").mode("append")
    with pytest.raises(Exception, match="unknown option 'block_sise'"):
        writer.option("block_sise", "1").save(uri)
    assert lt.dataset(uri).count_rows() == 1400


def _scan_rows(df) -> int:
    """How many rows the source's scan handed Spark in the last query run on ``df``."""
    plan = df._jdf.queryExecution().executedPlan()
    if "Adaptive" in plan.getClass().getSimpleName():
        plan = plan.executedPlan()
    leaves = plan.collectLeaves()
    scans = [leaves.apply(i) for i in range(leaves.size()) if "BatchScan" in leaves.apply(i).nodeName()]
    assert len(scans) == 1, plan.toString()
    return int(scans[0].metrics().apply("numOutputRows").value())


def test_filter_pushdown_after_register(spark, tmp_path):
    """Pushed filters cut the rows the scan hands Spark, and later queries on the same DataFrame
    (which Spark 4.3 runs with the read it planned last) still see exactly their own rows. Each
    kind of filter is checked without Spark in test_pushdown.py."""
    import lance_table.spark as lts

    uri = str(tmp_path / "ds")
    table = _rows(0, 1000)
    lt.write_dataset(table, uri, max_rows_per_file=400)
    with pytest.warns(UserWarning, match="filtered copy"):
        lts.register(spark, pushdown=True)
    try:
        assert spark.conf.get(lts.PUSHDOWN_CONF) == "true"
        df = spark.read.format("lance_table").load(uri)
        query = df.filter("id = 17")
        assert query.toArrow()["s"].to_pylist() == ["s17"]
        assert _scan_rows(query) == 1  # the source applied the filter: one row left the scan
        assert df.count() == 1000  # a later query without filters: every row
        mixed = df.filter("s LIKE 's29%' AND id % 2 = 0").toArrow()  # pushed, and one left to Spark
        assert sorted(mixed["id"].to_pylist()) == [290, 292, 296, 298]  # s294 is null (294 % 7 == 0)
        # Why pushdown is opt-in: in one query, Spark 4.3 runs the read one scan of a DataFrame
        # planned (with its pushed filters) for every scan of it, and no task can tell them apart.
        from pyspark import __version__ as spark_version

        union = df.filter("id < 10").union(df).count()
        if spark_version.startswith("4.3."):
            assert union == 20, union  # not 1010: the unfiltered side lost its rows
    finally:
        lts.register(spark)
        spark.conf.set(lts.PUSHDOWN_CONF, "false")


def _wait_for_tasks(spark, group: str, timeout: float = 60.0) -> None:
    """Wait until every task of the jobs run in job group ``group`` has ended.

    Spark fails a job (and the write calls ``abort()``) without waiting for its running tasks.
    """
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while True:
        jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
        stages = [tracker.getStageInfo(s) for job in jobs if job is not None for s in job.stageIds]
        if all(st is None or st.numActiveTasks == 0 for st in stages):
            return
        assert time.monotonic() < deadline, f"tasks of job group {group} still running"
        time.sleep(0.05)


def test_failed_task_leaves_dataset_and_files_untouched(spark, tmp_path):
    from pyspark.sql.functions import col, udf
    from pyspark.sql.types import LongType

    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 100), uri)
    before = sorted(p.name for p in (Path(uri) / "data").iterdir())

    @udf(LongType())
    def explode(x):
        if x == 77:
            raise ValueError("boom")
        return x

    def files(directory: Path) -> list[str]:
        return sorted(p.name for p in directory.iterdir()) if directory.exists() else []

    sc = spark.sparkContext
    sc.setJobGroup("failing-writes", "writes with a failing task")
    try:
        other = Path(uri + "_other")
        df = spark.range(0, 200, numPartitions=4).select(explode(col("id")).alias("id"))
        with pytest.raises(Exception, match="boom"):
            df.selectExpr("id", "id * 0.5 as x").write.format("lance_table").mode("append").save(str(other))
        _wait_for_tasks(spark, "failing-writes")  # tasks still running after the failure must not leave files
        assert files(other / "_versions") == [] and files(other / "data") == []
        bad = spark.createDataFrame(_rows(100, 50).to_pandas()).repartition(4)
        failing = bad.withColumn("id", explode(col("id") - 23))
        with pytest.raises(Exception, match="boom"):
            failing.write.format("lance_table").mode("append").save(uri)
        _wait_for_tasks(spark, "failing-writes")
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        sc.setLocalProperty("spark.job.interruptOnCancel", None)
    assert lt.dataset(uri).version == 1 and lt.dataset(uri).count_rows() == 100
    assert sorted(p.name for p in (Path(uri) / "data").iterdir()) == before


@pytest.mark.parametrize("backend", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_tasks_that_outlive_an_abort_delete_their_own_files(request, tmp_path, backend):
    """Spark calls abort() as soon as a job has failed; tasks still running must not leave files.

    Driven without Spark, in the orders seen on a busy machine: a task that starts after abort(),
    one that starts a new file after it, and one whose last file is completed after abort() listed
    (on S3 a file appears only when its upload completes).
    """
    from lance_table.spark.types import spark_arrow_schema, spark_schema
    from lance_table.spark.write import LanceTableWriter
    from lance_table.storage import open_storage

    options = request.getfixturevalue("s3_options") if backend == "s3" else None
    uri = request.getfixturevalue("s3_uri") if backend == "s3" else str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 100), uri, storage_options=options)
    storage = open_storage(uri, options)
    before = {e.name for e in storage.list_dir("data")}
    batches = _rows(100, 30).to_batches(max_chunksize=10)
    arrow = spark_arrow_schema(spark_schema(batches[0].schema))

    def task(writer: LanceTableWriter, driver_aborts_after: int) -> Iterator[pa.RecordBatch]:
        for i, batch in enumerate(batches):
            if i == driver_aborts_after:
                writer.abort([None])
            yield batch
        if driver_aborts_after == len(batches):
            writer.abort([None])

    for aborts_after, rows_per_file in [(0, 10), (1, 10), (len(batches), 100)]:
        writer = LanceTableWriter(uri, options, arrow, False, max_rows_per_file=rows_per_file)
        with pytest.raises(lt.WriteAbortedError):
            writer.write(task(writer, aborts_after))
        assert {e.name for e in storage.list_dir("data")} == before, (aborts_after, rows_per_file)
    assert lt.dataset(uri, storage_options=options).version == 1


def _written(uri: str, options: dict[str, str] | None) -> tuple[Any, Any]:
    """A Spark writer (driven without Spark) and the commit message of one task it ran."""
    from lance_table.spark.types import spark_arrow_schema, spark_schema
    from lance_table.spark.write import LanceTableWriter

    batch = _rows(100, 30).to_batches()[0]
    writer = LanceTableWriter(uri, options, spark_arrow_schema(spark_schema(batch.schema)), False)
    return writer, writer.write(iter([batch]))


def test_abort_after_a_landed_commit_keeps_files_a_version_references(tmp_path):
    """The write's version landed and an overwrite followed it: abort() must not delete the files
    that the write's version still references."""
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 100), uri)
    writer, message = _written(uri, None)
    writer.commit([message])
    lt.write_dataset(_rows(500, 10), uri, mode="overwrite")
    writer.abort([message])
    assert lt.dataset(uri, version=2).to_table().sort_by("id").equals(_rows(0, 130))


def test_abort_after_a_commit_of_unknown_outcome_deletes_nothing(tmp_path, monkeypatch):
    from lance_table.spark.write import LanceTableWriter

    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 100), uri)
    writer, message = _written(uri, None)
    made = LanceTableWriter._storage

    def failing_storage(self: Any) -> Any:
        storage = made(self)

        def timeout(path: str, data: bytes) -> None:
            raise TimeoutError("the store did not answer")

        storage.put_if_absent = timeout
        return storage

    monkeypatch.setattr(LanceTableWriter, "_storage", failing_storage)
    with pytest.raises(lt.CommitStateUnknownError):
        writer.commit([message])
    monkeypatch.setattr(LanceTableWriter, "_storage", made)
    before = sorted(p.name for p in (tmp_path / "ds" / "data").iterdir())
    writer.abort([message])
    assert sorted(p.name for p in (tmp_path / "ds" / "data").iterdir()) == before
    assert all(Path(uri, f).exists() for f in message.files)


def test_abort_deletes_nothing_when_the_versions_cannot_be_read(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 100), uri)
    writer, message = _written(uri, None)
    for manifest in (tmp_path / "ds" / "_versions").iterdir():
        manifest.write_bytes(b"damaged")
    writer.abort([message])
    assert all(Path(uri, f).exists() for f in message.files)


def test_abort_of_a_failed_commit_deletes_the_write_files(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 100), uri)
    writer, message = _written(uri, None)
    writer.abort([message])
    assert not any(Path(uri, f).exists() for f in message.files)
    assert lt.dataset(uri).to_table().equals(_rows(0, 100))


def test_task_retries_do_not_duplicate_rows(spark, tmp_path):
    uri = str(tmp_path / "ds")

    def fail_first_attempt(batches):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        first = True
        for batch in batches:
            if ctx.attemptNumber() == 0 and ctx.partitionId() == 1 and first:
                yield batch  # some rows go out before the failure
                raise RuntimeError("first attempt dies")
            first = False
            yield batch

    df = spark.range(0, 4000, numPartitions=4).selectExpr("id", "cast(id as string) as s")
    flaky = df.mapInArrow(fail_first_attempt, df.schema)
    flaky.write.format("lance_table").mode("overwrite").option("max_rows_per_file", "300").save(uri)
    ids = lt.dataset(uri).to_table()["id"].to_numpy()
    assert np.array_equal(np.sort(ids), np.arange(4000))
    referenced = {f.metadata.files[0].path for f in lt.dataset(uri).get_fragments()}
    assert {p.name for p in (Path(uri) / "data").iterdir()} == referenced  # the failed attempt left nothing


def test_concurrent_spark_writes_both_land(spark, tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 10), uri)
    errors = []

    def write(start: int) -> None:
        try:
            df = spark.createDataFrame(_rows(start, 500).to_pandas()).repartition(2)
            df.write.format("lance_table").mode("append").save(uri)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s,)) for s in (1000, 2000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ids = sorted(lt.dataset(uri).to_table()["id"].to_pylist())
    assert ids == list(range(10)) + list(range(1000, 1500)) + list(range(2000, 2500))
    assert [v["operation"] for v in lt.dataset(uri).versions()] == ["overwrite", "append", "append"]


def test_reading_old_versions_while_commits_land(spark, tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 2000), uri, max_rows_per_file=200)
    lt.dataset(uri).tags.create("start", 1)
    stop = threading.Event()

    def churn() -> None:
        k = 0
        while not stop.is_set():
            ds = lt.write_dataset(_rows(10_000 + k * 10, 10), uri, mode="append")
            ds.delete(f"id = {k}")
            k += 1

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        for _ in range(3):
            assert sorted(_read(spark, uri, version="1")["id"].to_pylist()) == list(range(2000))
            assert _read(spark, uri, tag="start").num_rows == 2000
    finally:
        stop.set()
        writer.join()
    assert lt.dataset(uri).version > 3


@pytest.mark.s3
def test_spark_on_s3_both_ways(spark, s3_uri, s3_options):
    lance = pytest.importorskip("lance")
    so = json.dumps(s3_options)
    table = _rows(0, 1500)
    lt.write_dataset(table, s3_uri + "/a", storage_options=s3_options, max_rows_per_file=500)
    _same(_read(spark, s3_uri + "/a", storage_options=so), table)
    (
        spark.createDataFrame(table.to_pandas())
        .repartition(2)
        .write.format("lance_table")
        .mode("overwrite")
        .option("storage_options", so)
        .save(s3_uri + "/b")
    )
    _same(lt.dataset(s3_uri + "/b", storage_options=s3_options).to_table(), table)
    _same(lance.dataset(s3_uri + "/b", storage_options=s3_options).to_table(), table)
    schema = lt.dataset(s3_uri + "/b", storage_options=s3_options).schema  # Spark's: int64 a, "element" items
    more = _rows(5000, 10).cast(schema)
    lance.write_dataset(more, s3_uri + "/b", mode="append", storage_options=s3_options)
    assert _read(spark, s3_uri + "/b", storage_options=so).num_rows == 1510


_POINT = pa.struct([("a", pa.int64()), ("b", pa.list_(pa.float64()))])


def test_spark_reads_a_pylance_default_2_2_dataset(spark, tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds22")
    table = _rows(0, 3000).select(["id", "x", "s"])
    ids = table["id"].to_pylist()
    table = table.append_column(
        "tags", pa.array([[f"t{i % 5}"] * (i % 3) if i % 7 else None for i in ids], pa.list_(pa.string()))
    )
    table = table.append_column(
        "pt", pa.array([{"a": i, "b": [float(i)]} if i % 4 else None for i in ids], _POINT)
    )
    table = table.append_column(
        "m", pa.array([[(f"k{i % 3}", i)] if i % 5 else None for i in ids], pa.map_(pa.string(), pa.int64()))
    )
    lance.write_dataset(table, uri, max_rows_per_file=1000)  # pylance's default format (2.2)
    lance.dataset(uri).delete("id < 10")
    assert lt.dataset(uri).data_storage_version == "2.2"
    _same(_read(spark, uri), table.slice(10))
    _same(_read(spark, uri, version="1"), table)


def test_spark_appends_into_a_pylance_default_2_2_dataset(spark, tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds22w")
    base = _rows(0, 1000).select(["id", "x", "s"])
    lance.write_dataset(base, uri)  # pylance's default format (2.2)
    more = _rows(5000, 700).select(["id", "x", "s"])
    spark.createDataFrame(more.to_pandas()).repartition(2).write.format("lance_table").mode("append").save(
        uri
    )
    ds = lt.dataset(uri)
    assert ds.data_storage_version == "2.2" and ds.version == 2
    files = {(f.file_major_version, f.file_minor_version) for fr in ds.manifest.fragments for f in fr.files}
    assert files == {(2, 2)}
    expected = pa.concat_tables([base, more])
    _same(lance.dataset(uri).to_table(), expected)
    _same(_read(spark, uri), expected)
    # a map column, which 2.0 cannot store, goes into a new 2.2 dataset
    df = spark.createDataFrame([(1, {"a": 1}), (2, {"b": 2})], "id long, m map<string,int>")
    df.write.format("lance_table").mode("overwrite").option("data_storage_version", "2.2").save(uri + "m")
    assert sorted(lance.dataset(uri + "m").to_table()["id"].to_pylist()) == [1, 2]


def test_spark_appends_keep_a_legacy_dataset_legacy(spark, tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "legacy")
    base = _rows(0, 1000).select(["id", "x", "s"])
    lance.write_dataset(base, uri, data_storage_version="legacy")
    more = _rows(5000, 700).select(["id", "x", "s"])
    spark.createDataFrame(more.to_pandas()).repartition(2).write.format("lance_table").mode("append").save(
        uri
    )
    ds = lt.dataset(uri)
    assert ds.data_storage_version == "0.1" and lance.dataset(uri).data_storage_version == "0.1"
    files = {(f.file_major_version, f.file_minor_version) for fr in ds.manifest.fragments for f in fr.files}
    assert files == {(0, 2)}
    # pylance reads what Spark wrote as it reads its own legacy files (strings keep their nulls)
    theirs = lance.dataset(uri).to_table()
    assert theirs.num_rows == 1700
    _same(_read(spark, uri), theirs)


def test_spark_appends_to_legacy_dictionary_columns(spark, tmp_path):
    """Each task extends the dataset's dictionary with its own new values; the commit joins them
    (rewriting the files whose keys disagree) so that every file indexes the manifest's dictionary."""
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "legacy_dict")
    base = pa.table({"id": pa.array([0, 1], pa.int64()), "d": pa.array(["a", "b"]).dictionary_encode()})
    lance.write_dataset(base, uri, data_storage_version="legacy")
    values = ["c", "a", "c", "d", "b", "c", "a", "e", "e", "f", "a", "b"]  # nulls are refused
    rows = [(i + 10, v) for i, v in enumerate(values)]
    rdd = spark.sparkContext.parallelize(rows, 4)  # partitions in order, 3 rows each
    spark.createDataFrame(rdd, "id long, d string").write.format("lance_table").mode("append").save(uri)
    ds = lt.dataset(uri)
    assert ds.data_storage_version == "0.1"
    dictionary = ds.manifest.dictionaries[1].to_pylist()
    assert dictionary[:2] == ["a", "b"] and sorted(dictionary[2:]) == ["c", "d", "e", "f"]

    def decoded(table: pa.Table) -> list[tuple[int, str | None]]:
        return sorted(zip(table["id"].to_pylist(), table["d"].cast(pa.string()).to_pylist()))

    expected = [(0, "a"), (1, "b"), *rows]
    assert decoded(lance.dataset(uri).to_table()) == expected
    assert decoded(ds.to_table()) == expected
    # no file of the write is left behind but those the version references
    referenced = {f.path for frag in ds.manifest.fragments for f in frag.files}
    assert {p.name for p in (tmp_path / "legacy_dict" / "data").iterdir()} == referenced
    # pylance keeps appending with the manifest's dictionary
    more = pa.table(
        {
            "id": pa.array([99], pa.int64()),
            "d": pa.DictionaryArray.from_arrays(pa.array([5], pa.int32()), pa.array(dictionary)),
        }
    )
    lance.write_dataset(more, uri, mode="append")
    assert decoded(lt.dataset(uri).to_table())[-1] == (99, dictionary[5])
