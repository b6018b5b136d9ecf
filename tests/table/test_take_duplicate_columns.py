"""``take`` with a column named twice, as pylance answers it: a data column once, a system column
as often as named; a scan refuses both (as pylance does)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_table
from lance_table.errors import SchemaError

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.interop


def test_take_duplicate_columns_as_pylance(tmp_path) -> None:
    path = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": range(100), "b": range(100)}), path, max_rows_per_file=30)
    ours, theirs = lance_table.dataset(path), lance.dataset(path)
    for columns in (["_rowid", "_rowid"], ["a", "a"], ["a", "_rowid", "a"], ["_rowaddr", "b", "_rowaddr"]):
        assert ours.take([1, 45, 99], columns=columns) == theirs.take([1, 45, 99], columns=columns)
    with pytest.raises(SchemaError, match="more than once"):
        ours.to_table(columns=["a", "a"])
