"""Legacy page statistics that cannot be true (a minimum above the maximum, a null count above the
row count) never prune pages: the data is fine, only its statistics are damaged, so filtered counts
and scans still return every matching row."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.legacy import LegacyFileReader
from lance_table.table.fragment import READERS

ROWS = 300


def _dataset(tmp_path: Path) -> tuple[str, Path]:
    table = pa.table(
        {
            "i": pa.array(np.arange(ROWS, dtype=np.int64)),
            "s": pa.array([f"v{k % 10}" for k in range(ROWS)]),
            "x": pa.array(np.arange(ROWS, dtype=np.float64) / 4),
        }
    )
    uri = str(tmp_path / "ds")
    lt.write_dataset(table, uri, data_storage_version="legacy")
    (path,) = sorted(Path(uri, "data").glob("*.lance"))
    return uri, path


def _damage(path: Path, column: str, child: str, value: bytes) -> None:
    """Overwrite the first value of the ``child`` statistics page ("null_count", "min_value" or
    "max_value") of data column ``column`` with ``value``."""
    meta = LegacyFileReader(path).metadata
    data_id = next(r.id for r in meta.roots if r.name == column)
    stats = meta.file.stats
    assert stats is not None
    parent = next(f.id for f in stats.fields if f.name == str(data_id))
    stats_id = next(f.id for f in stats.fields if f.parent_id == parent and f.name == child)
    raw = bytearray(path.read_bytes())
    (pos, _length) = struct.unpack_from("<qq", raw, stats.page_table_position + 16 * stats_id)
    raw[pos : pos + len(value)] = value
    path.write_bytes(bytes(raw))
    READERS._items.clear()  # the file changed under its name (never happens outside tests)


@pytest.mark.parametrize(
    ("column", "child", "value", "where"),
    [
        ("i", "min_value", struct.pack("<q", 10_000), "i >= 0"),  # min above max
        ("i", "max_value", struct.pack("<q", -5), "i < 1000"),
        ("x", "min_value", struct.pack("<d", float("nan")), "x <= 10"),  # bounds never hold NaN
        ("s", "null_count", struct.pack("<q", 10**9), "s >= 'v'"),  # more nulls than rows
    ],
)
def test_impossible_statistics_do_not_prune(
    tmp_path: Path, column: str, child: str, value: bytes, where: str
) -> None:
    uri, path = _dataset(tmp_path)
    honest = lt.dataset(uri).count_rows(where)
    assert honest > 0
    _damage(path, column, child, value)
    ds = lt.dataset(uri)
    assert ds.count_rows(where) == honest
    assert ds.to_table(filter=where).num_rows == honest


def test_plausible_statistics_still_prune(tmp_path: Path) -> None:
    uri, _ = _dataset(tmp_path)
    reader = LegacyFileReader(sorted(Path(uri, "data").glob("*.lance"))[0])
    stats = reader.statistics()
    assert stats is not None
    assert all(fs.trusted is not None and fs.trusted.all() for fs in stats.fields.values())
    assert lt.dataset(uri).count_rows("i > 100000") == 0
