"""The checks of each column's buffers when a file is opened, and the first-page buffers they keep."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_table._proto import file2_pb2
from lance_table.errors import CorruptFileError
from lance_table.file import write_table
from lance_table.file.column_list import _check_buffers
from lance_table.file.pageio import buffers_of
from lance_table.file.reader import LanceFileReader


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_first_buffers_are_each_columns_first_page(tmp_path, version):
    table = pa.table({"i": np.arange(3000), "s": [f"v{i}" for i in range(3000)]})
    path = tmp_path / "f.lance"
    write_table(path, table, version=version, page_size_bytes=4096)
    meta = LanceFileReader(path).metadata
    assert any(len(c.pages) > 1 for c in meta.columns)  # several pages: only the first is kept
    assert tuple(meta.first_buffers) == tuple(buffers_of(c.pages[0]) for c in meta.columns)
    assert tuple(meta.column_values) == tuple(sum(p.length for p in c.pages) for c in meta.columns)


def _column(pages: list[tuple[list[int], list[int], int]]) -> file2_pb2.ColumnMetadata:
    col = file2_pb2.ColumnMetadata()
    for offsets, sizes, length in pages:
        page = col.pages.add()
        page.buffer_offsets.extend(offsets)
        page.buffer_sizes.extend(sizes)
        page.length = length
    return col


def test_check_buffers_counts_values_and_keeps_the_first_pages_buffers():
    col = _column([([0, 64], [10, 20], 5), ([128], [8], 7)])
    assert _check_buffers(col, "f.lance", 200, 0) == (12, ((0, 10), (64, 20)))
    assert _check_buffers(file2_pb2.ColumnMetadata(), "f.lance", 200, 0) == (0, ())


@pytest.mark.parametrize(
    ("pages", "problem"),
    [
        ([([0], [10, 20], 5)], "column 3 page 0 lists 1 buffer offsets but 2 sizes"),
        ([([0], [10], 5), ([64, 70], [8], 1)], "column 3 page 1 lists 2 buffer offsets but 1 sizes"),
        ([([0, 190], [10, 20], 5)], "column 3 page 0 buffer [190, 210) lies beyond the data"),
        ([([0], [10], 5), ([150], [60], 1)], "column 3 page 1 buffer [150, 210) lies beyond the data"),
        ([([0], [10], 2**62), ([64], [8], 2**62)], "column 3 pages claim more than"),
    ],
)
def test_check_buffers_names_the_page_that_is_wrong(pages, problem):
    with pytest.raises(CorruptFileError, match=problem.replace("[", r"\[").replace(")", r"\)")):
        _check_buffers(_column(pages), "f.lance", 200, 3)


def test_check_buffers_of_the_column_itself():
    col = _column([([0], [10], 5)])
    col.buffer_offsets.extend([180])
    col.buffer_sizes.extend([30])
    with pytest.raises(CorruptFileError, match=r"column 0 buffer \[180, 210\) lies beyond the data"):
        _check_buffers(col, "f.lance", 200, 0)
