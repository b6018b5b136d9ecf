"""Reading one span of rows of 2.1/2.2 pages: the chunks that hold the span are decoded whole and
the rows' levels and values sliced out of them (no per-row gather), for flat and nested pages
alike. Streamed scans and row ranges read this way; the result must equal the data's slice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal, write_file

from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import miniblock, miniblock_nested

pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

ROWS = 30_000


def _table() -> pa.Table:
    rng = np.random.default_rng(21)
    n = ROWS
    holes = rng.random(n) < 0.1
    words = np.array([f"w{i:02d}" for i in range(40)], dtype=object)
    lengths = rng.integers(0, 5, n)
    items = pa.array(rng.integers(-50, 50, int(lengths.sum())).astype(np.int32))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    ints = pa.ListArray.from_arrays(pa.array(offsets), items, mask=pa.array(holes))
    pairs = pa.StructArray.from_arrays(
        [items, pa.array([f"s{v % 7}" for v in items.to_numpy()], pa.string())], names=["a", "b"]
    )
    structs = pa.ListArray.from_arrays(pa.array(offsets), pairs, mask=pa.array(rng.random(n) < 0.05))
    inner = pa.ListArray.from_arrays(
        pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)), pa.array(np.arange(2 * n))
    )
    nested = pa.ListArray.from_arrays(pa.array(np.arange(0, n + 1, dtype=np.int32)), inner)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 3, dtype=np.float32)), 3)
    vec = pa.FixedSizeListArray.from_arrays(vec.values, type=vec.type, mask=pa.array(holes))
    point = pa.StructArray.from_arrays(
        [pa.array(rng.random(n), mask=rng.random(n) < 0.2), pa.array(words[rng.integers(0, 40, n)])],
        names=["x", "name"],
        mask=pa.array(rng.random(n) < 0.1),
    )
    wide = pa.array([bytes([i % 251]) * 300 if i % 9 else None for i in range(n)], pa.binary())
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64) * 5),
            "small": pa.array(rng.integers(0, 100, n).astype(np.int32), mask=holes),
            "cat": pa.array(words[rng.integers(0, 40, n)], pa.string(), mask=rng.random(n) < 0.1),
            "vec": vec,
            "ints": ints,
            "structs": structs,
            "nested": nested,
            "point": point,
            "wide": wide,  # full-zip
        }
    )


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_spans_of_pages_read_as_slices(
    tmp_path: Path, version: str, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table()
    path = tmp_path / "t.lance"
    write_file(path, table, version, writer, batch_rows=7_000)  # ours: several pages per column
    spans: list[str] = []
    flat, nested = miniblock.span_chunks, miniblock_nested._span_rows

    def spy_flat(*args):  # type: ignore[no-untyped-def]
        spans.append("flat")
        return flat(*args)

    def spy_nested(*args):  # type: ignore[no-untyped-def]
        spans.append("nested")
        return nested(*args)

    monkeypatch.setattr(miniblock, "span_chunks", spy_flat)
    monkeypatch.setattr(miniblock_nested, "_span_rows", spy_nested)
    reader = LanceFileReader(path)
    rng = np.random.default_rng(8)
    bounds = [(0, 1), (0, 4095), (1, 4097), (1023, 1025), (ROWS - 1, ROWS), (6_999, 7_001), (12_345, 29_999)]
    bounds += [tuple(sorted(rng.integers(0, ROWS + 1, 2))) for _ in range(12)]
    for lo, hi in bounds:
        if hi > lo:
            assert_tables_equal(reader.read_range(int(lo), int(hi)), table.slice(int(lo), int(hi - lo)))
    assert {"flat", "nested"} <= set(spans)
    # a span followed by other runs takes the row-picking path, and agrees
    idx = np.concatenate([np.arange(100, 5_000), np.arange(9_000, 9_010)])
    assert_tables_equal(reader.take(idx), table.take(pa.array(idx)))


def test_validity_applies_to_slices() -> None:
    """Validity laid over a slice covers the slice's rows, not its parent's first rows."""
    from lance_table.file.arrow import with_validity

    valid = np.array([True, False, True])
    cases = [
        pa.array([1, 2, 3, 4, 5, 6], pa.int32()),
        pa.array(["a", "bb", None, "dddd", "e", "f"]),
        pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.float32)), 2),
        pa.StructArray.from_arrays([pa.array([1, 2, 3, 4, 5, 6])], names=["a"]),
    ]
    for arr in cases:
        part = arr.slice(2, 3)
        got = with_validity(part, valid)
        expected = [v if ok else None for v, ok in zip(part.to_pylist(), valid)]
        assert got.to_pylist() == expected, arr.type
