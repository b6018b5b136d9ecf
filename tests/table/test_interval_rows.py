"""A filter that only bounds one integer column (``id = 5``, ``id >= 10 AND id < 20``) is answered
from the column's bitpacked values (``FragmentReader.rows_in_interval``), not from a decoded
column: counts, deletes and the table left by a delete are pylance's on pylance's own files.

The columns cover every bit width class (runs of blocks long enough for the field-by-field
kernel and short runs of changing widths), negative values (blocks of the full width), unsigned
values above the signed range, nulls, and bounds at block (1024) and chunk (4096) edges.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.runs import Runs

lance = pytest.importorskip("lance")

ROWS = 70_000  # 68 blocks: runs long enough for the field-by-field kernel
WIDTHS = (1, 2, 3, 5, 7, 8, 12, 16, 17, 20, 31, 32, 33, 47, 63)


def _table() -> pa.Table:
    rng = np.random.default_rng(28)
    cols: dict[str, pa.Array] = {"id": pa.array(np.arange(ROWS, dtype=np.int64))}
    for w in WIDTHS:
        values = rng.integers(0, 1 << w, ROWS, dtype=np.int64)
        values[::1000] = (1 << w) - 1  # every block at width w
        values[5] = values[70] = 0
        cols[f"w{w}"] = pa.array(values)
    # widths changing block by block (short runs): small and wide blocks alternate
    block = np.arange(ROWS) // 1024
    cols["mixed"] = pa.array(np.where(block % 3 == 0, np.arange(ROWS) % 7, np.arange(ROWS) * 1000 + 3))
    neg = rng.integers(0, 1 << 20, ROWS, dtype=np.int64)  # every 5th block negative: full width
    neg[block % 5 == 0] -= 1 << 19
    neg[3000:3003] = [-7, 3, -1]
    cols["neg"] = pa.array(neg)
    cols["i32"] = pa.array(rng.integers(-(2**31), 2**31, ROWS, dtype=np.int64).astype(np.int32))
    cols["i8"] = pa.array(rng.integers(-128, 128, ROWS).astype(np.int8))
    cols["u16"] = pa.array(rng.integers(0, 2**16, ROWS).astype(np.uint16))
    cols["u64"] = pa.array(rng.integers(0, 2**63, ROWS, dtype=np.int64).astype(np.uint64) * np.uint64(2))
    nullable = np.arange(ROWS, dtype=np.int64) % 5000
    cols["nulls"] = pa.array(nullable, mask=rng.random(ROWS) < 0.2)  # (pylance: out-of-line bitpacking)
    return pa.table(cols)


@pytest.fixture(scope="session")
def pylance_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    path = tmp_path_factory.mktemp("interval") / "ds"
    table = _table()
    lance.write_dataset(table, str(path), data_storage_version="2.2")
    return path, table


def _predicates(table: pa.Table) -> list[str]:
    out = [
        "id = 0",
        "id = 1023",
        "id = 1024",
        "id >= 4095 AND id <= 4097",
        "id BETWEEN 8191 AND 8192",
        "id > 69990",
        "id < 3",
        "id = 70000",
        "id > 10 AND id < 5",
        "id IN (4096)",
        "mixed = 3",
        "mixed >= 1003 AND mixed < 5003",
        "mixed < 2",
        "neg = -7",
        "neg >= -10 AND neg < 10",
        "neg < -524000",
        "neg >= -1 AND neg <= 3",
        "neg > 1048570",
        "i32 < 0",
        "i32 >= -5 AND i32 <= 1000000",
        "i8 = -128",
        "i8 BETWEEN -3 AND 3",
        "u16 >= 65000",
        "u64 > 9223372036854775807",
        "nulls = 7",
        "nulls >= 4990",
        "id IN (5, 1024, 69999, 70000)",
        "id IN (3, 4) AND id > 3",
        "id IN (1, 2, 3) AND id IN (3, 4)",
        "neg IN (-7, 3, -1)",
        "u64 IN (0, 2, 18446744073709551614)",
        "mixed IN (3, 1003, 2)",
    ]
    for w in WIDTHS:
        values = table.column(f"w{w}").to_numpy()
        v = int(values[1234])
        out += [f"w{w} = {v}", f"w{w} = 0", f"w{w} >= {v // 2} AND w{w} < {v}", f"w{w} > {(1 << w) - 3}"]
        out.append(f"w{w} IN ({int(values[7])}, {int(values[60_000])}, {(1 << w) - 1})")
    return out


def test_counts_match_pylance(pylance_files: tuple[Path, pa.Table]) -> None:
    path, table = pylance_files
    ours, theirs = lt.dataset(path), lance.dataset(str(path))
    for pred in _predicates(table):
        assert ours.count_rows(filter=pred) == theirs.count_rows(filter=pred), pred


@pytest.mark.parametrize(
    "pred",
    ["id >= 4095 AND id <= 4097", "w20 > 1000", "neg >= -1 AND neg <= 3", "mixed < 2", "id < 0"],
)
def test_filtered_scans_match_pylance(pylance_files: tuple[Path, pa.Table], pred: str) -> None:
    # few and many matching rows (read alone, or all read and masked), with and without the
    # filter's column in the projection
    path, _ = pylance_files
    ours, theirs = lt.dataset(path), lance.dataset(str(path))
    for columns in (None, ["w7", "mixed"]):
        got = ours.to_table(columns=columns, filter=pred)
        assert got.equals(theirs.to_table(columns=columns, filter=pred)), (pred, columns)


def test_rows_read_off_the_packed_values(pylance_files: tuple[Path, pa.Table]) -> None:
    # pylance's integer columns are inline-bitpacked: every one is answered that way, with the
    # rows of the runs asked for only (a run boundary inside a block, one inside a chunk)
    path, table = pylance_files
    (frag,) = lt.dataset(path)._snapshot.fragment_readers()
    runs = Runs(np.array([1000, 4090, 20_000]), np.array([30, 10, 1]))
    values = table.column("w20").to_numpy()
    picked = runs.positions()
    one = int(values[1010])
    several = ((5, 9), (one, one), (400_000, 500_000))
    for ranges in (((0, 1 << 20),), ((one, one),), ((1000, 300_000),), several):
        got = frag.rows_in_interval("w20", runs, ranges)
        assert got is not None
        inside = np.zeros(picked.size, bool)
        for lo, hi in ranges:
            inside |= (values[picked] >= lo) & (values[picked] <= hi)
        assert np.array_equal(got, picked[inside])


@pytest.fixture(scope="session")
def large_fragment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fragment of more rows than a delete reads at once (it reads it range by range)."""
    path = tmp_path_factory.mktemp("interval_large") / "ds"
    rows = 300_000
    neg = np.arange(rows, dtype=np.int64) % 70_000
    neg[(np.arange(rows) // 1024) % 7 == 0] *= -1
    lance.write_dataset(
        pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "neg": pa.array(neg)}),
        str(path),
        data_storage_version="2.2",
    )
    return path


@pytest.mark.parametrize(
    "pred",
    [
        "id = 12345",
        "id >= 262000 AND id < 263000",
        "id < 1030",
        "id IN (7, 262143, 262144, 299999)",
        "neg = -1025",
        "neg >= 0 AND neg < 3",
    ],
)
def test_delete_then_table_matches_pylance(large_fragment: Path, tmp_path: Path, pred: str) -> None:
    path = large_fragment
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for dst in (ours, theirs):
        shutil.copytree(path, dst, copy_function=os.link)  # a delete writes new files only
    lt.dataset(ours).delete(pred)
    lance.dataset(str(theirs)).delete(pred)
    # then over the rows left (runs with gaps): a range around rows already deleted
    again = "id >= 12000 AND id < 12400 OR id < 0" if "neg" in pred else "id >= 12000 AND id <= 12400"
    lt.dataset(ours).delete(again)
    lance.dataset(str(theirs)).delete(again)
    assert lt.dataset(ours).count_rows(filter="id > 262100") == lance.dataset(str(theirs)).count_rows(
        filter="id > 262100"
    )
    ds = lt.dataset(ours)
    assert ds.to_table().equals(lance.dataset(str(theirs)).to_table())
    assert lance.dataset(str(ours)).to_table().equals(ds.to_table())
