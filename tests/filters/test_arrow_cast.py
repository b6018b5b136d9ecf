"""``arrow_cast(x, 'Type')`` in projections, filters and ``add_columns``, and ``add_columns`` of
``CAST(NULL AS type)``, compared with pylance on copies of the same data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table
from lance_table.errors import FilterError
from lance_table.filters.arrow_types import parse_arrow_type

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop

_TYPES = [
    "Int32",
    "UInt8",
    "Float16",
    "Float32",
    "Utf8",
    "LargeUtf8",
    "Boolean",
    "Date32",
    "Decimal128(10, 2)",
    "Timestamp(Nanosecond, None)",
    'Timestamp(Second, Some("UTC"))',
    'Timestamp(µs, "UTC")',
    "Timestamp(ms)",
    "Time64(Nanosecond)",
    "Duration(Second)",
]


def _copies(tmp_path: Path, version: str = "stable") -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    data = pa.table({"a": list(range(10)), "s": [str(i) for i in range(10)]})
    lance.write_dataset(data, theirs, max_rows_per_file=5, data_storage_version=version)
    shutil.copytree(theirs, ours)
    return ours, theirs


def test_projection_and_filter_match_pylance(tmp_path: Path) -> None:
    ours, theirs = _copies(tmp_path)
    mine, other = lance_table.dataset(ours), lance.dataset(theirs)
    columns = {f"c{i}": f"arrow_cast(a, '{t}')" for i, t in enumerate(_TYPES)}
    assert mine.to_table(columns=columns) == other.to_table(columns=columns)
    filters = ["arrow_cast(a, 'Utf8') = '3'", "arrow_cast(s, 'Int64') > 6"]
    filters.append("arrow_cast(NULL, 'Int32') IS NULL")
    for sql in filters:
        assert mine.to_table(filter=sql) == other.to_table(filter=sql), sql


def test_type_names() -> None:
    assert parse_arrow_type("FixedSizeList(4, Float32)") == pa.list_(pa.float32(), 4)
    assert parse_arrow_type("FixedSizeList(4 x Float32)") == pa.list_(pa.float32(), 4)
    assert parse_arrow_type("List(nullable Int64)") == pa.list_(pa.int64())
    assert parse_arrow_type("LargeList(Utf8)") == pa.large_list(pa.string())
    assert parse_arrow_type("Dictionary(Int32, Utf8)") == pa.dictionary(pa.int32(), pa.string())
    assert parse_arrow_type("FixedSizeBinary(16)") == pa.binary(16)
    for bad in ["int32", 'Struct("x": Int32)', "Int32)", "Timestamp(Hour)", ""]:
        with pytest.raises(FilterError, match="arrow_cast"):
            parse_arrow_type(bad)


def test_bad_arguments_are_typed_errors(tmp_path: Path) -> None:
    ours, _ = _copies(tmp_path)
    ds = lance_table.dataset(ours)
    for sql in ["arrow_cast(a)", "arrow_cast(a, s)", "arrow_cast(a, 'int32')"]:
        with pytest.raises(FilterError):
            ds.to_table(filter=f"{sql} IS NULL")


@pytest.mark.parametrize("version", ["stable", "legacy"])
def test_add_all_null_columns_as_pylance(tmp_path: Path, version: str) -> None:
    cases = [
        {"b": "CAST(NULL AS INT)"},  # pylance changes only the schema (stable), writing no file
        {"b": "NULL"},
        {"b": "CAST(NULL AS INT)", "c": "a"},
        {"b": "arrow_cast(NULL, 'FixedSizeList(4, Float32)')"},
    ]
    for i, exprs in enumerate(cases):
        ours, theirs = _copies(tmp_path / f"{i}", version)
        mine, other = lance_table.dataset(ours), lance.dataset(theirs)
        mine.add_columns(exprs)
        other.add_columns(exprs)
        assert mine.schema == other.schema, exprs
        assert [len(f.data_files()) for f in mine.get_fragments()] == [
            len(f.data_files()) for f in other.get_fragments()
        ], exprs
        assert mine.to_table() == other.to_table(), exprs
        # and each library reads the other's result
        assert lance_table.dataset(theirs).to_table() == lance.dataset(ours).to_table(), exprs
