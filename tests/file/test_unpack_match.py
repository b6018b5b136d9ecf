"""``unpack_fields.match``: the positions of FastLanes-packed values in closed intervals, found
without laying the values out in row order, equal those of the unpacked values (every type and
bit width, one interval or several, bounds at the width's edges)."""

from __future__ import annotations

import numpy as np
import pytest

from lance_table.file.compression import bitpacking, unpack_fields


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_match_equals_the_unpacked_values(t: int) -> None:
    rng = np.random.default_rng(t)
    blocks = 3
    for w in range(1, t):
        top = (1 << w) - 1
        values = rng.integers(0, top, blocks * 1024, dtype=np.uint64, endpoint=True)
        values[::97] = top
        values = values.astype(bitpacking.DTYPES[t])
        packed = bitpacking.pack(values, w).reshape(blocks, w, 1024 // t)
        v = int(values[5])
        several = [(0, 1), (v, v), (top - 1, top)]
        cases = [[(v, v)], [(0, 0)], [(top, top)], [(0, top)], [(v // 2, v)], several]
        for ranges in cases:
            want = np.zeros(values.size, bool)
            for lo, hi in ranges:
                want |= (values >= lo) & (values <= hi)
            got = unpack_fields.match(packed, t, w, ranges)
            assert np.array_equal(got, np.flatnonzero(want)), (t, w, ranges)
