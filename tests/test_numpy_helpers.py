"""lance_table._numpy: helpers that must return exactly what numpy's own functions return."""

from __future__ import annotations

import numpy as np
import pytest

from lance_table._numpy import sorted_unique


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.bool_])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1702, 50_000])
def test_sorted_unique_is_numpy_unique(dtype: type, n: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.integers(0, 100 if n < 100 else n // 3, n).astype(dtype)
    got = sorted_unique(values)
    want = np.unique(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_sorted_unique_extremes_and_order() -> None:
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    values = np.array([hi, -1, lo, -1, 0, 0], np.int64)
    np.testing.assert_array_equal(sorted_unique(values), [lo, -1, 0, hi])
    np.testing.assert_array_equal(sorted_unique(np.array([5, 5, 5], np.uint16)), [5])


def test_sorted_unique_other_dtypes_as_numpy() -> None:
    floats = np.array([2.0, np.nan, 1.0, np.nan, 2.0])
    got, want = sorted_unique(floats), np.unique(floats)
    np.testing.assert_array_equal(got, want)  # (one NaN, as numpy folds them)
    assert got.size == 3
    np.testing.assert_array_equal(sorted_unique([3, 1, 3]), [1, 3])  # (sequences become arrays)
