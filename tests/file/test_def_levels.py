"""Definition levels of a page's entries (:func:`levels.def_levels`): the level table applied to
the entry codes, with the shortcut for pages where every entry is defined down to the leaf (a
nullable list column without nulls, as Spark writes every column). Files with such pages and
with mixed ones read back in pylance as written."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.v2_1 import levels, repdef

LAYERS = [
    [repdef.NULLABLE_ITEM, repdef.NULLABLE_LIST],
    [repdef.ALL_VALID_ITEM, repdef.NULL_AND_EMPTY_LIST],
    [repdef.NULLABLE_ITEM, repdef.EMPTYABLE_LIST, repdef.NULLABLE_ITEM],
]


@pytest.mark.parametrize("kinds", LAYERS)
def test_all_defined_entries_are_level_zero(kinds):
    lut = levels._def_lut(kinds)
    codes = np.zeros(1000, np.uint8)
    got = levels.def_levels(codes, kinds)
    assert got is not None
    assert got.dtype == lut.dtype
    np.testing.assert_array_equal(got, np.zeros(1000, lut.dtype))
    got[0] = 7  # a fresh array: the shared table is untouched
    assert levels._def_lut(kinds)[0] == 0


@pytest.mark.parametrize("kinds", LAYERS)
def test_mixed_entries_take_their_table_levels(kinds):
    lut = levels._def_lut(kinds)
    rng = np.random.default_rng(3)
    codes = rng.integers(0, lut.size, 5000).astype(np.uint8)
    got = levels.def_levels(codes, kinds)
    assert got is not None
    assert got.dtype == lut.dtype
    np.testing.assert_array_equal(got, np.array([lut[c] for c in codes.tolist()], lut.dtype))


def test_layers_without_nulls_or_empties_have_no_levels():
    kinds = [repdef.ALL_VALID_ITEM, repdef.ALL_VALID_LIST]
    assert levels.def_levels(np.zeros(10, np.uint8), kinds) is None


@pytest.mark.parametrize("with_nulls", [False, True], ids=["no-nulls", "nulls"])
def test_nullable_lists_round_trip_with_pylance(tmp_path: Path, with_nulls: bool):
    n = 20_000
    rng = np.random.default_rng(11)
    items = pa.array(
        rng.random(n * 4, dtype=np.float32), mask=(rng.random(n * 4) < 0.05) if with_nulls else None
    )
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * 4)
    vec = pa.ListArray.from_arrays(offsets, items, mask=pa.array(rng.random(n) < 0.1) if with_nulls else None)
    table = pa.table({"id": np.arange(n, dtype=np.int64), "vec": vec})
    ours = str(tmp_path / "ours")
    lt.write_dataset(table, ours, data_storage_version="2.2")
    assert lance.dataset(ours).to_table().equals(table)
    theirs = str(tmp_path / "theirs")
    lance.write_dataset(table, theirs, data_storage_version="2.2")
    assert lt.dataset(theirs).to_table().equals(table)
