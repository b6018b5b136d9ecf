"""Spark SQL over datasets on a real local Spark session: catalog tables (read-only ones and ones
bound to a dataset), CREATE TABLE ... AS SELECT, saveAsTable in every mode, INSERT INTO / OVERWRITE,
temporary views that follow the latest version, a folder attached as a database, S3 credentials
from the Spark conf or OPTIONS, and the README's Spark SQL snippet."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.spark import attach, create_table, register, table_source

pytestmark = pytest.mark.spark

README = Path(__file__).parents[2] / "README.md"


def _rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "s": pa.array([f"s{i}" for i in ids.tolist()], pa.string())}
    )


def _ids(spark, sql: str) -> list[int]:
    return sorted(r[0] for r in spark.sql(sql).collect())


def _lance_ids(uri: str, **kwargs) -> list[int]:
    """The ids pylance reads (the oracle)."""
    lance = pytest.importorskip("lance")
    return sorted(lance.dataset(uri, **kwargs).to_table()["id"].to_pylist())


def test_readme_spark_sql_snippet(spark, tmp_path):
    text = README.read_text()
    section = text[text.index("### Spark SQL") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    root = str(tmp_path)
    exec(snippet, {"spark": spark, "root": root})  # the README's own code
    assert _lance_ids(f"{root}/events.lance") == [1, 2, 3, 4, 11, 12, 13, 14, 20, 30]
    assert _lance_ids(f"{root}/clicks.lance") == [1, 2]
    assert _lance_ids(f"{root}/ids.lance") == [0, 1, 2, 3, 4]
    assert _ids(spark, "SELECT id FROM recent") == _lance_ids(f"{root}/events.lance")
    assert _ids(spark, "SELECT id FROM events WITH ('version' = '1')") == [1, 2, 3]
    assert sorted(r.tableName for r in spark.sql("SHOW TABLES IN lake").collect() if r.namespace) == [
        "clicks",
        "events",
        "ids",
    ]


def test_catalog_tables_read_write_and_save_modes(spark, tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 100), uri, max_rows_per_file=40)
    time.sleep(0.02)
    between = dt.datetime.now(dt.timezone.utc)
    time.sleep(0.02)
    lt.write_dataset(_rows(100, 50), uri, mode="append")
    lance.dataset(uri).tags.create("first", 1)

    # Read-only tables: Spark passes LOCATION as file:/abs; OPTIONS pin a version; WITH per query.
    spark.sql(f"CREATE TABLE sq_ro USING lance_table LOCATION '{uri}'")
    spark.sql(f"CREATE TABLE sq_ro3 USING lance_table LOCATION 'file://{uri}'")
    spark.sql(f"CREATE TABLE sq_v1 USING lance_table OPTIONS (path 'file:{uri}', version '1')")
    full = lance.dataset(uri).to_table()
    got = spark.sql("SELECT * FROM sq_ro").toArrow().sort_by("id")
    assert got["id"].to_pylist() == full["id"].to_pylist()
    assert got["s"].to_pylist() == full["s"].to_pylist()
    assert _ids(spark, "SELECT id FROM sq_ro3") == list(range(150))
    assert _ids(spark, "SELECT id FROM sq_v1") == list(range(100))
    assert _ids(spark, "SELECT id FROM sq_ro WITH ('version' = '1')") == list(range(100))
    assert _ids(spark, "SELECT id FROM sq_ro WITH ('tag' = 'first')") == list(range(100))
    assert _ids(spark, f"SELECT id FROM sq_ro WITH ('asof' = '{between.isoformat()}')") == list(range(100))
    with pytest.raises(Exception, match="create_table"):
        spark.sql("INSERT INTO sq_ro VALUES (1000, 'x')")
    assert _lance_ids(uri) == list(range(150))  # nothing written

    # A table bound to the dataset takes every kind of insert.
    create_table(spark, "sq_rw", uri)
    spark.sql("INSERT INTO sq_rw VALUES (1000, 'a'), (1001, 'b')")
    spark.sql("INSERT INTO sq_rw SELECT id + 2000, s FROM sq_ro WHERE id < 3")
    spark.createDataFrame([(3000, "c")], "id long, s string").write.insertInto("sq_rw")
    expected = [*range(150), 1000, 1001, 2000, 2001, 2002, 3000]
    assert _lance_ids(uri) == expected
    assert _ids(spark, "SELECT id FROM sq_ro") == expected  # the read-only table sees them too
    spark.sql("INSERT OVERWRITE sq_rw SELECT id, s FROM sq_ro WHERE id >= 2000")
    assert _lance_ids(uri) == [2000, 2001, 2002, 3000]
    assert lance.dataset(uri).to_table().sort_by("id")["s"].to_pylist() == ["s0", "s1", "s2", "c"]

    # New datasets: CTAS and saveAsTable through bound sources; save modes act on the table.
    ctas_uri = str(tmp_path / "ctas")
    spark.sql(f"CREATE TABLE sq_ctas USING {table_source(spark, ctas_uri)} AS SELECT id, s FROM sq_ro")
    assert _lance_ids(ctas_uri) == [2000, 2001, 2002, 3000]
    saved = str(tmp_path / "saved")
    source = table_source(spark, saved)
    spark.range(5).write.format(source).saveAsTable("sq_saved")
    with pytest.raises(Exception, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark.range(3).write.format(source).saveAsTable("sq_saved")
    spark.range(3).write.format(source).mode("ignore").saveAsTable("sq_saved")
    assert _lance_ids(saved) == [0, 1, 2, 3, 4]
    spark.range(10, 12).write.format(source).mode("append").saveAsTable("sq_saved")
    assert _lance_ids(saved) == [0, 1, 2, 3, 4, 10, 11]
    spark.range(7, 8).write.format(source).mode("overwrite").saveAsTable("sq_saved")
    assert _lance_ids(saved) == [7]
    assert _ids(spark, "SELECT id FROM sq_saved") == [7]
    # save(uri) in a mode Spark refuses for Python sources: Spark's error names the modes that work.
    with pytest.raises(Exception, match=r"(?s)ErrorIfExists.*Append.*Overwrite"):
        spark.range(3).write.format("lance_table").save(str(tmp_path / "other"))
    with pytest.raises(Exception, match=r"(?s)Ignore.*Append.*Overwrite"):
        spark.range(3).write.format("lance_table").mode("ignore").save(str(tmp_path / "other"))


def test_dataframes_and_temp_views_read_the_latest_version(spark, tmp_path):
    lance = pytest.importorskip("lance")
    empty, two = str(tmp_path / "empty"), str(tmp_path / "two")
    lt.write_dataset(_rows(0, 0), empty)
    # two fragments, two planned tasks (a task per 10 rows: small fragments would share one)
    lt.write_dataset(_rows(0, 20), two, max_rows_per_file=10)

    df = spark.read.format("lance_table").load(empty)
    df.createOrReplaceTempView("sq_empty")
    assert df.count() == 0
    lt.write_dataset(_rows(0, 35), empty, mode="append", max_rows_per_file=10)
    assert _ids(spark, "SELECT id FROM sq_empty") == list(range(35))  # one planned task reads all

    spark.read.format("lance_table").option("max_rows_per_partition", 10).load(two).createOrReplaceTempView(
        "sq_two"
    )
    spark.sql(
        "CREATE TEMP VIEW sq_two_sql USING lance_table "
        f"OPTIONS (path 'file:{two}', max_rows_per_partition '10')"
    )
    spark.sql(f"CREATE TEMP VIEW sq_two_v1 USING lance_table OPTIONS (path '{two}', version '1')")
    assert spark.sql("SELECT count(*) FROM sq_two").first()[0] == 20
    assert spark.sql("SELECT count(*) FROM sq_two_sql").first()[0] == 20
    # Seven fragments now, read by the two tasks planned for two: each row once.
    lt.write_dataset(_rows(20, 50), two, mode="append", max_rows_per_file=10)
    spark.sql("INSERT INTO sq_two_sql VALUES (500, 'x'), (501, 'y')")
    expected = _lance_ids(two)
    assert expected == [*range(70), 500, 501]
    for view in ("sq_two", "sq_two_sql"):
        assert _ids(spark, f"SELECT id FROM {view}") == expected
    assert _ids(spark, "SELECT id FROM sq_two_v1") == list(range(20))  # pinned
    lance.dataset(two).delete("id < 60")
    lance.write_dataset(_rows(900, 3), two, mode="append")
    assert _ids(spark, "SELECT id FROM sq_two") == _lance_ids(two)
    lt.write_dataset(_rows(7, 2), two, mode="overwrite")
    assert _ids(spark, "SELECT id FROM sq_two") == [7, 8]
    assert _ids(spark, "SELECT id FROM sq_two_v1") == list(range(20))


def test_attach_registers_each_dataset_of_a_folder(spark, tmp_path):
    lance = pytest.importorskip("lance")
    root = tmp_path / "lake"
    lt.write_dataset(_rows(0, 10), str(root / "orders.lance"))
    lance.write_dataset(_rows(100, 5), str(root / "users.lance"))
    (root / "notes").mkdir()  # not a table directory
    (root / "empty.lance").mkdir()  # named like one, without a dataset
    (root / "file.lance").write_text("not a folder")
    assert attach(spark, f"file:{root}", database="sq_lake") == ["sq_lake.orders", "sq_lake.users"]
    assert _ids(spark, "SELECT id FROM sq_lake.orders") == list(range(10))
    spark.sql("INSERT INTO sq_lake.users SELECT id + 1000, s FROM sq_lake.orders WHERE id < 2")
    assert _lance_ids(str(root / "users.lance")) == [100, 101, 102, 103, 104, 1000, 1001]
    # Attaching again leaves the tables as they are, and they still work.
    assert attach(spark, str(root), database="sq_lake") == ["sq_lake.orders", "sq_lake.users"]
    assert _ids(spark, "SELECT id FROM sq_lake.users") == [100, 101, 102, 103, 104, 1000, 1001]


@pytest.mark.s3
def test_sql_on_s3_with_storage_options_from_the_conf_or_options(spark, s3_uri, s3_options):
    uri = f"{s3_uri}/events.lance"
    lt.write_dataset(_rows(0, 30), uri, storage_options=s3_options, max_rows_per_file=10)
    s3a = "s3a://" + uri.split("://", 1)[1]
    keys = [f"spark.lance_table.{k}" for k in s3_options]
    try:
        for key, value in zip(keys, s3_options.values(), strict=True):
            spark.conf.set(key, value)
        register(spark)  # the driver's side gets the conf's storage options; tasks read the conf
        spark.sql(f"CREATE TABLE sq_s3 USING lance_table LOCATION '{s3a}'")
        spark.sql(f"CREATE TABLE sq_s3_plain USING lance_table LOCATION '{uri}'")  # s3:// as well
        assert _ids(spark, "SELECT id FROM sq_s3") == list(range(30))
        assert _ids(spark, "SELECT id FROM sq_s3_plain WHERE id < 3") == [0, 1, 2]
        create_table(spark, "sq_s3_rw", uri)
        spark.sql("INSERT INTO sq_s3_rw VALUES (100, 'x')")
        assert _lance_ids(uri, storage_options=s3_options) == [*range(30), 100]
        spark.sql("INSERT OVERWRITE sq_s3_rw SELECT id, s FROM sq_s3 WHERE id < 5")
        assert _ids(spark, "SELECT id FROM sq_s3") == list(range(5))
    finally:
        for key in keys:
            spark.conf.unset(key)
        register(spark)
    # Without the conf: storage options in OPTIONS.
    so = json.dumps(s3_options).replace("'", "\\'")
    spark.sql(f"CREATE TEMP VIEW sq_s3_view USING lance_table OPTIONS (path '{s3a}', storage_options '{so}')")
    assert _ids(spark, "SELECT id FROM sq_s3_view") == list(range(5))
    spark.sql("INSERT INTO sq_s3_view VALUES (7, 'y')")
    assert _lance_ids(uri, storage_options=s3_options) == [0, 1, 2, 3, 4, 7]
    # A catalog table cannot keep them (Spark hands its reads no OPTIONS): refused, saying what works.
    with pytest.raises(Exception, match=r"spark\.lance_table\.<option>"):
        spark.sql(f"CREATE TABLE sq_s3_opts USING lance_table OPTIONS (path '{uri}', storage_options '{so}')")
    create_table(spark, "sq_s3_opts", s3a, storage_options=s3_options)
    assert _ids(spark, "SELECT id FROM sq_s3_opts") == [0, 1, 2, 3, 4, 7]
