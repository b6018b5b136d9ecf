"""The live rows of a fragment with deletions are worked out once per deletion vector and span,
and kept (with the mask that reads make of them) for every later scan: each open of the version
shares the vector. A later delete makes a new vector, whose scans must never see the old rows."""

from __future__ import annotations

import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.table import fragment as fragment_module

ROWS = 3000


@pytest.fixture(scope="module")
def deleted_twice(tmp_path_factory):
    """A pylance 2.0 dataset with every 10th row deleted, and a copy with more rows deleted."""
    root = tmp_path_factory.mktemp("live-runs")
    ids = np.arange(ROWS, dtype=np.int64)
    table = pa.table({"id": ids, "text": pa.array([f"row-{i}" for i in ids.tolist()])})
    first, second = str(root / "first"), str(root / "second")
    lance.write_dataset(table, first, data_storage_version="2.0", max_rows_per_file=2000)
    lance.dataset(first).delete("id % 10 = 0")
    shutil.copytree(first, second)
    lance.dataset(second).delete("id % 3 = 1")
    return first, second


def _kept_runs() -> dict:
    live = fragment_module._LIVE
    return {key: entry[1] for key in list(live) if (entry := live.get(key)) is not None}


def test_scans_after_a_delete_reuse_the_live_runs_and_read_pylances_rows(deleted_twice):
    first, _ = deleted_twice
    expected = lance.dataset(first).to_table()
    assert_tables_equal(lt.dataset(first).to_table(), expected)
    kept = _kept_runs()
    assert len(kept) >= 2  # one span per fragment at least
    # a second open shares the deletion vectors: the same runs (and their masks) serve its scan
    assert_tables_equal(lt.dataset(first).to_table(), expected)
    after = _kept_runs()
    assert all(after.get(key) is runs for key, runs in kept.items())


def test_a_later_delete_is_never_served_the_earlier_live_rows(deleted_twice):
    first, second = deleted_twice
    lt.dataset(first).to_table()  # the first vector's runs kept
    got = lt.dataset(second).to_table()
    assert_tables_equal(got, lance.dataset(second).to_table())
    assert not np.any(got.column("id").to_numpy() % 3 == 1)
    assert got.num_rows == lance.dataset(second).count_rows()
