"""Deletes over fragments larger than a read range: matching rows are found range by range (on
threads) as positions; scans after the delete read the live rows of each range as a masked span."""

from __future__ import annotations

import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import make_rows
from helpers import assert_tables_equal

import lance_table as lt


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_delete_over_ranges_matches_pylance(tmp_path, monkeypatch, version):
    from lance_table.table import scan
    from lance_table.table.operations import delete

    monkeypatch.setattr(delete, "READ_CHUNK_ROWS", 150)  # a fragment spans many ranges
    monkeypatch.setattr(delete, "TABLE_RANGE_ROWS", 150)
    monkeypatch.setattr(scan, "READ_CHUNK_ROWS", 150)
    lance.write_dataset(
        make_rows(0, 2000), tmp_path / "theirs", max_rows_per_file=700, data_storage_version=version
    )
    shutil.copytree(tmp_path / "theirs", tmp_path / "ours")
    # sparse single rows, then whole runs (touching the range edges), then one more row per run
    for predicate in ("id % 10 = 3", "id >= 140 AND id < 460", "id % 7 = 1", "id < 5"):
        lt.dataset(tmp_path / "ours").delete(predicate)
        lance.dataset(tmp_path / "theirs").delete(predicate)
    ours, theirs = lt.dataset(tmp_path / "ours"), lance.dataset(tmp_path / "theirs")
    expected = theirs.to_table()
    assert_tables_equal(ours.to_table(), expected)
    assert_tables_equal(lance.dataset(tmp_path / "ours").to_table(), expected)
    assert ours.count_rows() == expected.num_rows
    got = ours.to_table(columns=["id"], with_row_address=True)
    want = theirs.to_table(columns=["id"], with_row_address=True)
    assert got.column("_rowaddr").equals(want.column("_rowaddr").cast(pa.uint64()))
    # a range whose every row is gone, and a fragment emptied by the delete
    lt.dataset(tmp_path / "ours").delete("id >= 700 AND id < 1400")
    lance.dataset(tmp_path / "theirs").delete("id >= 700 AND id < 1400")
    assert_tables_equal(
        lt.dataset(tmp_path / "ours").to_table(), lance.dataset(tmp_path / "theirs").to_table()
    )
    assert len(lt.dataset(tmp_path / "ours").get_fragments()) == 2


def test_delete_over_many_fragments_evaluated_together_matches_pylance(tmp_path, monkeypatch):
    # 2.0 fragments are not read as a batch: their predicate columns are read one by one and
    # evaluated together, in several evaluations here
    from lance_table.table.operations import delete

    monkeypatch.setattr(delete, "EVALUATE_ROWS", 700)
    lance.write_dataset(
        make_rows(0, 3000), tmp_path / "theirs", max_rows_per_file=300, data_storage_version="2.0"
    )
    shutil.copytree(tmp_path / "theirs", tmp_path / "ours")
    ids = ", ".join(str(i) for i in range(5, 3000, 290))
    for predicate in (
        "id % 10 = 3",  # evaluated by Arrow
        f"id IN ({ids})",  # by numpy
        "id >= 300 AND id < 600",  # a whole fragment
        "id % 3 = 0 AND id < 2000",
        "id < 0",  # nothing
    ):
        lt.dataset(tmp_path / "ours").delete(predicate)
        lance.dataset(tmp_path / "theirs").delete(predicate)
    expected = lance.dataset(tmp_path / "theirs").to_table(with_row_address=True)
    assert_tables_equal(lt.dataset(tmp_path / "ours").to_table(with_row_address=True), expected)
    assert_tables_equal(lance.dataset(tmp_path / "ours").to_table(with_row_address=True), expected)


def test_arrow_deletion_files_small_and_compressed_read_by_pylance(tmp_path):
    # few offsets go uncompressed, at least COMPRESS_FROM zstd-compressed (both Arrow: under 5000)
    from lance_table.table.deletion import COMPRESS_FROM

    lt.write_dataset(make_rows(0, 4000), tmp_path / "ds", max_rows_per_file=2000)
    lt.dataset(tmp_path / "ds").delete("id IN (1, 7, 1999)")
    lt.dataset(tmp_path / "ds").delete(f"id >= 2000 AND id < {2000 + COMPRESS_FROM + 5}")
    frags = lance.dataset(tmp_path / "ds").get_fragments()
    assert [f.metadata.deletion_file.file_type for f in frags] == ["array", "array"]
    assert [f.count_rows() for f in frags] == [1997, 2000 - COMPRESS_FROM - 5]
    assert_tables_equal(lance.dataset(tmp_path / "ds").to_table(), lt.dataset(tmp_path / "ds").to_table())


def _signed_rows(n: int) -> pa.Table:
    """Integers of both signs (int32 with nulls and its extremes, int64's extremes) and floats."""
    rng = np.random.default_rng(11)
    i32 = rng.integers(-60, 61, n).astype(np.int32)
    i32[:2] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max]
    i64 = np.arange(n, dtype=np.int64) - n // 2
    i64[:2] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max]
    return pa.table(
        {
            "i32": pa.array(i32, mask=rng.random(n) < 0.1),
            "i64": pa.array(i64),
            "f": pa.array(rng.integers(-20, 21, n) / 4, mask=rng.random(n) < 0.1),
        }
    )


@pytest.mark.parametrize("writer", ["pylance", "lance_table"])
def test_remainder_deletes_match_pylance(tmp_path, writer):
    # x % d = k deletes (numpy evaluates integer ones): negative dividends keep their sign, nulls
    # never match, floats go through Arrow; each library reads the other's deletion files
    (lance if writer == "pylance" else lt).write_dataset(
        _signed_rows(3000), tmp_path / "theirs", max_rows_per_file=1000, data_storage_version="2.2"
    )
    shutil.copytree(tmp_path / "theirs", tmp_path / "ours")
    for predicate in (
        "i64 % 10 = -3",
        "i32 % 7 = 0",
        "i32 % -4 = 1",
        "f % 1.5 = 0",
        "i64 % 9 != 0 AND i64 > 1000",
        "i32 % 5 < -2",
    ):
        lt.dataset(tmp_path / "ours").delete(predicate)
        lance.dataset(tmp_path / "theirs").delete(predicate)
        expected = lance.dataset(tmp_path / "theirs").to_table(with_row_address=True)
        assert_tables_equal(lt.dataset(tmp_path / "ours").to_table(with_row_address=True), expected)
        assert_tables_equal(lance.dataset(tmp_path / "ours").to_table(with_row_address=True), expected)
        assert_tables_equal(lt.dataset(tmp_path / "theirs").to_table(with_row_address=True), expected)


def test_remainder_by_zero_fails_the_delete_as_pylance(tmp_path):
    # pylance's delete raises an OSError; so does ours (a FilterError too), and nothing is committed
    lt.write_dataset(_signed_rows(50), tmp_path / "ds")
    with pytest.raises(OSError, match=r"(?i)divide by zero"):
        lance.dataset(tmp_path / "ds").delete("i64 % 0 = 0")
    with pytest.raises(lt.errors.FilterEvaluationError, match="divide by zero") as raised:
        lt.dataset(tmp_path / "ds").delete("i64 % 0 = 0")
    assert isinstance(raised.value, OSError)
    assert lt.dataset(tmp_path / "ds").version == 1
