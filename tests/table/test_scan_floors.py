"""Filters that set a floor on an integer column (``id >= 1000``) skip unpacking the bitpacked
blocks whose bit width keeps every value below it, and still return exactly the matching rows.

Each case compares a filtered scan with the table filtered in memory by Arrow, on 2.1 and 2.2
datasets written by lance_table and by pylance, with and without deleted rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_table as lt
from lance_table.file.compression import bitpacking
from lance_table.filters.bounds import Condition
from lance_table.table import scan, scan_plan

ROWS = 60_000


def _table() -> pa.Table:
    rng = np.random.default_rng(8)
    ids = np.arange(ROWS, dtype=np.int64)  # block widths grow with the ids: 10, 11, ... 16 bits
    # Few distinct values: pylance 2.2 stores them as a dictionary, whose (bitpacked) indices say
    # nothing of the values. The first half's indices are small (1, 2, 3 and 100 come first), and
    # the item at index 0 (100) meets ``label >= 50`` where 1, 2 and 3 do not.
    labels = np.concatenate([rng.choice([100, 1, 2, 3], ROWS // 2), rng.integers(0, 100, ROWS - ROWS // 2)])
    labels[:4] = [100, 1, 2, 3]
    return pa.table(
        {
            "id": pa.array(ids),
            "neg": pa.array(ids - 30_000, pa.int32()),  # negative halves take the full width
            "big": pa.array(ids.astype(np.uint64) + np.uint64(2**63), pa.uint64()),
            "small": pa.array(rng.integers(0, 9, ROWS).astype(np.int16), mask=rng.random(ROWS) < 0.2),
            "label": pa.array(labels),
            "x": pa.array(rng.random(ROWS)),
        }
    )


@pytest.fixture(params=[("ours", "2.2"), ("ours", "2.1"), ("pylance", "2.2"), ("pylance", "2.1")], ids=str)
def dataset(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    writer, version = request.param
    path = tmp_path / "ds"
    table = _table()
    if writer == "pylance":
        lance = pytest.importorskip("lance")
        lance.write_dataset(table, str(path), data_storage_version=version, max_rows_per_file=25_000)
    else:
        lt.write_dataset(table, path, data_storage_version=version, max_rows_per_file=25_000)
    return path


FILTERS = [
    "id >= 40000 AND id < 40050",
    "id >= 1 AND id < 3",
    "id >= 1023 AND id <= 1025",
    "id > 1024 AND id < 1030",
    "id >= 32768 AND id < 32770",
    "id = 59999",
    "id = 512",
    "id >= 59990",
    "id >= 70000",
    "id >= 20000 AND x < 0.01",
    "neg >= 5 AND neg < 9",
    "neg > -3 AND neg < 3",
    "big >= 5 AND id < 100",
    "small >= 4 AND id >= 50000",
    "small = 8",
    "label >= 40 AND id > 58000",
    "label >= 50",
    "label = 49",
]


@pytest.mark.parametrize("deleted", [False, True])
def test_filters_with_a_floor_match_what_arrow_finds(dataset: Path, deleted: bool) -> None:
    table = _table()
    ds = lt.dataset(dataset)
    if deleted:
        ds.delete("id % 7 = 3 OR (id >= 40010 AND id < 40020)")
        ds = lt.dataset(dataset)
        ids = table["id"].to_numpy()
        keep = pa.array(~((ids % 7 == 3) | ((ids >= 40010) & (ids < 40020))))
        table = table.filter(keep)
    for predicate in FILTERS:
        got = ds.to_table(filter=predicate)
        expected = table.filter(_arrow(predicate))  # a null outcome drops the row, as in SQL
        assert got.equals(expected), predicate


def _arrow(predicate: str) -> pc.Expression:
    """The predicate as an Arrow expression (the same one the scan compiles)."""
    expr, _ = scan_plan._compile_filter(predicate, _table().schema)
    return expr


def test_blocks_below_the_floor_are_not_unpacked(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unpacked: list[int] = []  # the bit width of every inline-bitpacked block unpacked
    real = bitpacking.unpack

    def spy(
        words: np.ndarray,
        t: int,
        w: int,
        blocks: int,
        block_at: np.ndarray | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        if block_at is not None:  # blocks of inline bitpacking, each at its own word
            unpacked.extend([w] * blocks)
        return real(words, t, w, blocks, block_at, out)

    monkeypatch.setattr(bitpacking, "unpack", spy)
    ds = lt.dataset(dataset)
    assert ds.to_table(columns=["id"], filter="id >= 0 AND id < 100000").num_rows == ROWS  # no floor
    every = sorted(unpacked)
    unpacked.clear()
    got = ds.to_table(columns=["id"], filter="id >= 40000 AND id < 40050")
    assert got.column("id").to_pylist() == list(range(40000, 40050))
    # blocks of at most 15 bits hold ids below 32768 < 40000; wider ones hold the rest
    assert unpacked and min(unpacked) >= 16
    assert len(unpacked) < len(every) and every.count(16) == unpacked.count(16)


def test_floors_come_from_lower_bounds_with_positive_integer_literals() -> None:
    conds = [
        Condition("a", ">=", 10),
        Condition("a", ">", 12),
        Condition("b", "=", 3),
        Condition("c", ">=", 0),  # nothing below zero to skip
        Condition("d", ">=", -5),
        Condition("e", ">=", 2.5),  # not an integer
        Condition("f", "<", 100),  # an upper bound
        Condition("g", ">=", True),  # a boolean is no integer here
    ]
    assert scan._floors(conds) == {"a": 12, "b": 3}
