"""Parsing the Spark source's options (no Spark session needed)."""

from __future__ import annotations

import pytest

from lance_table.spark.options import SourceOptions


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
