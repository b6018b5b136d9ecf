"""A field of a computed struct value (``l[1]['x']``: of a list element) in column expressions and
filters, compared with pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.interop


def test_field_of_a_list_element_matches_pylance(tmp_path: Path) -> None:
    rows = [[{"x": i, "y": i % 2 == 0}] if i != 3 else [] for i in range(5)]
    lance.write_dataset(pa.table({"a": range(5), "ls": rows}), tmp_path)
    for columns in ({"v": "ls[1]['x']"}, {"v": "ls[1]['y']"}, {"v": "ls[2]['x']"}):
        assert (
            lt.dataset(tmp_path)
            .to_table(columns=columns)
            .equals(lance.dataset(tmp_path).to_table(columns=columns))
        )
    sql = "ls[1]['x'] > 1"
    assert lt.dataset(tmp_path).to_table(filter=sql).equals(lance.dataset(tmp_path).to_table(filter=sql))
    with pytest.raises(lt.FilterError, match="zz"):
        lt.dataset(tmp_path).to_table(columns={"v": "ls[1]['zz']"})
