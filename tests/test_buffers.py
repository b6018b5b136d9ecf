"""Large decode outputs come from Arrow's memory pool: they behave as plain numpy arrays."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table import _buffers


def test_small_and_large_arrays_are_writable_contiguous_and_of_the_asked_type() -> None:
    for n in (0, 10, _buffers.POOLED_BYTES // 8, _buffers.POOLED_BYTES):
        got = _buffers.empty(n, np.uint64)
        assert got.shape == (n,) and got.dtype == np.uint64
        assert got.flags.c_contiguous and got.flags.writeable
        got[:] = np.arange(n, dtype=np.uint64)
        assert np.array_equal(got, np.arange(n, dtype=np.uint64))


def test_an_arrow_array_made_from_a_pooled_array_keeps_its_values() -> None:
    values = _buffers.empty(100_000, np.int64)
    values[:] = np.arange(100_000)
    arr = pa.Array.from_buffers(pa.int64(), values.size, [None, pa.py_buffer(values)])
    del values
    assert arr.to_numpy().tolist() == list(range(100_000))
