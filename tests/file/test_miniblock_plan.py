"""Mini-block chunk plans of values sized by their count alone (plain fixed-width values, as
every float column and list of floats): planned at once, they are the chunks the chunk-by-chunk
planner makes, whatever the levels beside them (so the files stay byte for byte the same)."""

from __future__ import annotations

import numpy as np
import pytest

from lance_table.file.v2_1 import miniblock_encode
from lance_table.file.v2_1.miniblock_encode import _Planner
from lance_table.file.v2_1.value_kinds import FixedValues, Leaf


def _values(n: int, bits: int, per_value: int, bitmap: bool) -> FixedValues:
    table = np.zeros((n * per_value, bits // 8), np.uint8)
    bitmaps = [(per_value, np.ones(n * per_value, bool))] if bitmap else []
    return FixedValues(
        None,
        1 + len(bitmaps),
        bits // 8 * per_value,
        leaf=Leaf(bits, table=table),
        bitmaps=bitmaps,
        per_value=per_value,
    )


def _plans(planner: _Planner, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list]:
    at_once = planner.plan()
    with monkeypatch.context() as m:
        m.setattr(_Planner, "uniform_plan", lambda self: None)
        one_by_one = planner.plan()
    return at_once, one_by_one


@pytest.mark.parametrize("large", [False, True], ids=["2.1", "2.2"])
@pytest.mark.parametrize(
    ("bits", "per_value", "bitmap"),
    [
        (32, 1, False),
        (64, 1, False),
        (8, 1, False),
        (128, 1, False),
        (32, 4, False),
        (32, 1, True),
        (16, 3, True),
    ],
)
@pytest.mark.parametrize("levels", ["none", "defs", "lists", "long-lists"])
@pytest.mark.parametrize("n", [3, 1000, 1024, 5000, 40_001])
def test_plan_at_once_is_the_chunk_by_chunk_plan(monkeypatch, large, bits, per_value, bitmap, levels, n):
    rng = np.random.default_rng(n + bits)
    values = _values(n, bits, per_value, bitmap)
    if levels == "none":
        planner = _Planner(values, n, 0, None, False, False, large)
    elif levels == "defs":
        planner = _Planner(values, n, n, None, False, True, large)
    else:
        # lists: each value one level, and null or empty lists (levels without a value) between
        gaps = rng.integers(0, 3 if levels == "lists" else 40, n) * (rng.random(n) < 0.2)
        positions = np.cumsum(gaps + 1) - 1
        num = int(positions[-1]) + 1 + int(rng.integers(0, 3))
        visible = np.zeros(num, bool)
        visible[positions] = True
        planner = _Planner(values, n, num, visible, True, True, large)
    at_once, one_by_one = _plans(planner, monkeypatch)
    assert at_once == one_by_one


def test_values_sized_by_more_than_their_count_are_planned_one_by_one():
    assert miniblock_encode.MAX_LOG_VALUES == 12
    values = _values(10_000, 32, 1, False)
    assert _Planner(values, 10_000, 0, None, False, False, True).aimed_chunk() == 1024
    values.count_sized = False  # type: ignore[misc]
    assert _Planner(values, 10_000, 0, None, False, False, True).aimed_chunk() is None
