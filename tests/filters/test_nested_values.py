"""SQL pylance reads that lance_table did not: a field of a computed struct value (``l[1]['x']``,
of a list element) and typed literals with double-quoted text (``TIMESTAMP "..."``), in column
expressions and filters, compared with pylance."""

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


def test_typed_literals_with_double_quoted_text_as_pylance(tmp_path: Path) -> None:
    """``TIMESTAMP "..."`` and ``DATE "..."``: Lance reads the double-quoted text as a string."""
    import datetime as dt

    day = dt.datetime(2021, 1, 1)
    table = pa.table(
        {"t": pa.array([day, day + dt.timedelta(days=2)], pa.timestamp("ms")), "d": [day.date()] * 2}
    )
    lance.write_dataset(table, tmp_path)
    for sql in ('t > TIMESTAMP "2021-01-02 00:00:00"', 'd = DATE "2021-01-01"', "t > TIMESTAMP '2021-01-02'"):
        assert lt.dataset(tmp_path).count_rows(sql) == lance.dataset(tmp_path).count_rows(sql)
    # a double-quoted text elsewhere keeps its meaning
    assert lt.dataset(tmp_path).count_rows('"t" IS NOT NULL') == 2
