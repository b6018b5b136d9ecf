"""Searching a deletion vector (sorted uint32 offsets) answers what ``np.searchsorted`` answers on
the same offsets as int64, for any integer values: negative, past uint32, scalars and arrays."""

from __future__ import annotations

import numpy as np
import pytest

from lance_table.table.deletion import search_offsets
from lance_table.table.fragment import _any_in, _live_runs
from lance_table.table.row_ids import row_offsets

DELETED = np.array([0, 3, 4, 9, 100, 2**32 - 2, 2**32 - 1], np.uint32)
VALUES = [-(2**40), -1, 0, 1, 3, 4, 5, 9, 10, 99, 100, 101, 2**32 - 2, 2**32 - 1, 2**32, 2**40]


@pytest.mark.parametrize("side", ["left", "right"])
def test_matches_searchsorted_on_int64(side):
    wide = DELETED.astype(np.int64)
    expected = np.searchsorted(wide, np.array(VALUES, np.int64), side)
    got = search_offsets(DELETED, np.array(VALUES, np.int64), side)
    assert got.tolist() == expected.tolist()
    assert search_offsets(DELETED, VALUES, side).tolist() == expected.tolist()
    for value, want in zip(VALUES, expected.tolist()):
        assert int(search_offsets(DELETED, value, side)) == want
    empty = np.zeros(0, np.uint32)
    assert search_offsets(empty, [0, 2**40], side).tolist() == [0, 0]


def test_other_vectors_are_searched_as_they_are():
    wide = DELETED.astype(np.int64)
    assert search_offsets(wide, VALUES).tolist() == np.searchsorted(wide, VALUES).tolist()
    assert search_offsets(DELETED, [0.5, 3.5]).tolist() == [1, 2]


def test_live_rows_around_deleted_offsets():
    deleted = np.array([2, 5, 6, 9], np.uint32)
    runs = _live_runs(deleted, 1, 10)
    assert runs.positions().tolist() == [1, 3, 4, 7, 8]
    assert _any_in(deleted, 6, 9) and not _any_in(deleted, 7, 9) and not _any_in(deleted, 10, 2**33)
    positions = np.array([0, 1, 3, 4, 7, 8, 10], np.int64)
    assert row_offsets(100, deleted, positions).tolist() == [100, 101, 102, 103, 104, 105, 106]
