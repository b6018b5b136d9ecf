"""Parsing the Spark source's options (no Spark session needed)."""

from __future__ import annotations

import pytest

from lance_table.spark.options import (
    SourceOptions,
    conf_storage_options,
    location_of,
    merge_storage,
    table_options,
    task_storage_options,
    with_location,
)


def test_aliases_and_case() -> None:
    opts = SourceOptions.parse({"PATH": "/x", "versionAsOf": "3", "Batch_Size": "10"})
    assert (opts.path, opts.version, opts.batch_size) == ("/x", 3, 10)
    assert SourceOptions.parse({"path": "/x", "timestampasof": "2024-01-02"}).asof is not None


def test_spark_reserved_table_properties_are_not_ours_to_refuse() -> None:
    opts = SourceOptions.parse({"path": "/x", "owner": "me", "provider": "lance_table", "comment": "c"})
    assert opts.path == "/x"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"path": "/x", "verison": "1"}, "unknown option 'verison'"),
        ({"path": "/x", "version": "1", "VersionAsOf": "2"}, "given twice"),
        ({"path": "/x", "version": "one"}, "must be an integer"),
        ({}, "needs a path"),
    ],
)
def test_bad_options_name_themselves(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourceOptions.parse(options)


def test_catalog_table_options_and_missing_paths() -> None:
    # Spark repeats a table's OPTIONS as option.<key>; a copy of a plain key is no second value.
    opts = SourceOptions.parse(
        {"path": "/x", "version": "2", "option.version": "2", "option.columns": "a,b"}, require_path=False
    )
    assert (opts.version, opts.columns) == (2, ("a", "b"))
    assert SourceOptions.parse({"version": "2"}, require_path=False).path is None
    with pytest.raises(ValueError, match="given twice"):
        SourceOptions.parse({"path": "/x", "version": "2", "option.version": "3"})


def test_storage_options_from_the_spark_conf() -> None:
    conf = {"spark.lance_table.aws_region": "eu-west-1", "spark.lance_table.": "x", "spark.sql.x": "y"}
    assert conf_storage_options(conf) == {"aws_region": "eu-west-1"}
    assert conf_storage_options(conf.items()) == {"aws_region": "eu-west-1"}
    assert task_storage_options() == {}  # outside a Spark task
    assert merge_storage({"a": "1", "b": "1"}, None, {"b": "2"}) == {"a": "1", "b": "2"}
    assert merge_storage(None, {}) is None


def test_a_catalog_table_carries_its_location_but_no_credentials() -> None:
    types = pytest.importorskip("pyspark.sql.types")
    schema = types.StructType(
        [types.StructField("id", types.LongType()), types.StructField("s", types.StringType())]
    )
    given = {
        "path": "file:/d",
        "location": "file:/d",
        "provider": "lance_table",
        "option.version": "3",
        "storage_options": '{"aws_secret_access_key": "k"}',
    }
    carried = table_options(given)
    assert carried == {"version": "3"}
    tagged = with_location(schema, "file:/d", carried)
    assert location_of(tagged) == ("file:/d", {"version": "3"})
    assert "k" not in tagged.json()
    assert location_of(schema) == (None, {})
    assert [f.name for f in tagged.fields] == ["id", "s"]
