"""How scans cut fragments into ranges: every row once, in order, in as few ranges as serve."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from lance_table.table import scan


def _ranges(rows: int, batch_size: int, split: int = 1) -> list[tuple[int, int]]:
    frag = SimpleNamespace(physical_rows=rows)
    spec = SimpleNamespace(batch_size=batch_size)
    return scan._row_ranges(frag, spec, split)  # type: ignore[arg-type]


@pytest.mark.parametrize("rows", [0, 1, 1000, scan.READ_CHUNK_ROWS, 3 * scan.READ_CHUNK_ROWS + 5, 10**6])
@pytest.mark.parametrize("batch_size", [100, 1 << 30])
@pytest.mark.parametrize("split", [1, 2, 3, 8])
def test_ranges_cover_the_fragment_in_equal_parts(rows: int, batch_size: int, split: int) -> None:
    got = _ranges(rows, batch_size, split)
    if not rows:
        assert got == []
        return
    assert [lo for lo, _ in got] == [0] + [hi for _, hi in got[:-1]]
    assert got[-1][1] == rows
    sizes = [hi - lo for lo, hi in got]
    assert max(sizes) - min(sizes) <= max(sizes) // 2 + 1
    if batch_size == 100:  # a streamed scan reads at most READ_CHUNK_ROWS rows at a time
        assert all(s <= scan.READ_CHUNK_ROWS for s in sizes)
    else:  # a whole-table scan splits as asked, but never below READ_CHUNK_ROWS rows a range
        assert len(got) == min(split, max(1, rows // scan.READ_CHUNK_ROWS))


def test_fragments_are_split_to_even_out_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "workers", lambda: 2)
    assert [scan.fragment_split(f) for f in range(1, 10)] == [2, 1, 2, 1, 2, 1, 2, 1, 1]
    monkeypatch.setattr(scan, "workers", lambda: 8)
    assert scan.fragment_split(8) == 1 and scan.fragment_split(4) == 2 and scan.fragment_split(1) == 8
    # never many more tasks than that
    assert all(f * scan.fragment_split(f) <= 4 * 8 + f for f in range(1, 40))


@pytest.mark.parametrize("rows", [1, scan.TABLE_RANGE_ROWS, 2 * scan.TABLE_RANGE_ROWS + 7, 10**7])
def test_whole_table_ranges_stay_bounded_whatever_the_batch_size(rows: int) -> None:
    frag = SimpleNamespace(physical_rows=rows)
    spec = SimpleNamespace(batch_size=1 << 30)  # to_table's: the table is built whole anyway
    got = scan._row_ranges(frag, spec, 1, scan.TABLE_RANGE_ROWS)  # type: ignore[arg-type]
    assert [lo for lo, _ in got] == [0] + [hi for _, hi in got[:-1]] and got[-1][1] == rows
    assert all(hi - lo <= scan.TABLE_RANGE_ROWS for lo, hi in got)
    assert len(got) == -(-rows // scan.TABLE_RANGE_ROWS)


def test_to_table_in_many_ranges_matches_pylance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fragment read in several ranges (each page of its columns decoded, and its buffers freed,
    range by range) gives pylance's table."""
    lance = pytest.importorskip("lance")
    import numpy as np
    import pyarrow as pa

    import lance_table

    rng = np.random.default_rng(3)
    n = 5000
    table = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "text": pa.array([f"row-{i}-{'x' * (i % 13)}" for i in range(n)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4),
        }
    )
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri, data_storage_version="2.2")
    monkeypatch.setattr(scan, "TABLE_RANGE_ROWS", 700)
    got = lance_table.dataset(uri).to_table()
    assert got.column("id").num_chunks > 1  # read in ranges
    assert got.equals(lance.dataset(uri).to_table())
