"""The 2.2 writer assembles mini-block pages of a few chunks (every page of a small append) in
Python, and the page-wide numpy path assembles the others: both must write the very same bytes.

Each table is written with the few-chunk path on and off (``FEW_CHUNKS = 0``), and the files are
compared byte for byte; one of them is read back by pylance.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from lance_table.file.v2_1 import miniblock_fast, tiny_page
from lance_table.file.writer import LanceFileWriter

ROWS = (1, 2, 3, 7, 8, 100, 129, 1000, 4097)


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(rows)
    nulls = rng.random(rows) < 0.2
    words = np.array(["a", "bb", "ccc", "dddd", "", "ffffff"], dtype=object)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "x": pa.array(rng.random(rows), mask=nulls),
            "i8": pa.array(rng.integers(-100, 100, rows).astype(np.int8)),
            "flag": pa.array(rng.random(rows) < 0.5, mask=nulls),
            "text": pa.array(words[rng.integers(0, 6, rows)], pa.string(), mask=nulls),
            "wide": pa.array([f"value-{v:08d}" for v in rng.integers(0, 1 << 30, rows)], pa.string()),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 16, dtype=np.float32)), 16),
            "fsl": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(rows * 3), mask=rng.random(rows * 3) < 0.2), 3
            ),
        }
    )


def _write(table: pa.Table, version: str) -> bytes:
    sink = io.BytesIO()
    writer = LanceFileWriter(sink, table.schema, version=version)
    writer.write(table)
    writer.close()
    return sink.getvalue()


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_few_chunk_pages_write_the_page_wide_bytes(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # (the small-page shortcut would take the one-chunk pages: test_tiny_pages compares it)
    monkeypatch.setattr(tiny_page, "ENABLED", False)
    tables = [_table(rows) for rows in ROWS]
    few = [_write(t, version) for t in tables]
    monkeypatch.setattr(miniblock_fast, "FEW_CHUNKS", 0)
    wide = [_write(t, version) for t in tables]
    for rows, a, b in zip(ROWS, few, wide):
        assert a == b, f"{rows} rows: the few-chunk path wrote other bytes"


@pytest.mark.interop
def test_pylance_reads_a_small_append_file(tmp_path) -> None:
    lance_file = pytest.importorskip("lance.file")
    table = _table(100)
    path = tmp_path / "small.lance"
    path.write_bytes(_write(table, "2.2"))
    assert lance_file.LanceFileReader(str(path)).read_all().to_table().equals(table)
