"""Struct and list columns of one fragment with pages of many mini-block chunks, written by
pylance: chunks of one shape (equal value and level counts) and of uneven level counts, lists
with and without empty, null and null-item entries. Scans, projections, takes and scans after
deletes match pylance's on the same files."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.v2_1.byteranges import alternate

ROWS = 20_000


def _table() -> pa.Table:
    ids = np.arange(ROWS)
    names = np.array([f"user-{i}" for i in range(97)])[ids % 97]
    st = pa.StructArray.from_arrays([pa.array(ids * 3), pa.array(names)], ["a", "b"])
    # 0-3 items per row (empty lists), exactly two per row (chunks of equal level counts), and
    # null lists and null items
    offs = np.zeros(ROWS + 1, np.int32)
    np.cumsum(ids % 4, out=offs[1:])
    tags = pa.ListArray.from_arrays(
        pa.array(offs), pa.array(np.array(["x", "y", "z"])[np.arange(offs[-1]) % 3])
    )
    pairs = pa.ListArray.from_arrays(
        pa.array(np.arange(ROWS + 1, dtype=np.int32) * 2), pa.array(np.arange(2 * ROWS))
    )
    items = [None if i % 5 == 2 else f"v{i % 11}" for i in range(offs[-1])]
    lists = pa.ListArray.from_arrays(pa.array(offs), pa.array(items, pa.string()))
    validity = pa.array(ids % 9 != 4)
    holey = pa.ListArray.from_arrays(lists.offsets, lists.values, mask=pa.compute.invert(validity))
    return pa.table({"id": ids, "st": st, "tags": tags, "pairs": pairs, "holey": holey})


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    uri = tmp_path_factory.mktemp(f"nested-big-{request.param}") / "ds"
    lance.write_dataset(_table(), uri, data_storage_version=request.param)
    return uri


def test_scans_and_projections_match_pylance(written: Path) -> None:
    ours, theirs = lt.dataset(written), lance.dataset(written)
    assert ours.to_table().equals(theirs.to_table())
    for col in ("st", "tags", "pairs", "holey"):
        assert ours.to_table(columns=[col]).equals(theirs.to_table(columns=[col])), col


def test_takes_match_pylance(written: Path) -> None:
    ours, theirs = lt.dataset(written), lance.dataset(written)
    idx = np.sort(np.random.default_rng(3).choice(ROWS, 300, replace=False))
    assert ours.take(idx).equals(theirs.take(idx))
    assert ours.take([5, 6, 7, ROWS - 1]).equals(theirs.take([5, 6, 7, ROWS - 1]))


def test_scans_after_deletes_match_pylance(written: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(written, copy)
    lance.dataset(copy).delete("id % 7 = 1 OR id > 19000")
    ours, theirs = lt.dataset(copy), lance.dataset(copy)
    assert ours.to_table().equals(theirs.to_table())
    assert ours.take([0, 10, 500, 9000]).equals(theirs.take([0, 10, 500, 9000]))


@pytest.mark.parametrize("n", [3, 300])
def test_alternating_ranges_join_in_turn(n: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.integers(0, 256, 40 * n, dtype=np.uint8), rng.integers(0, 256, 50 * n, dtype=np.uint8)
    a_starts, b_starts = (
        np.arange(n) * 40 + rng.integers(0, 10, n),
        np.arange(n) * 50 + rng.integers(0, 10, n),
    )
    a_lengths, b_lengths = rng.integers(0, 31, n), rng.integers(0, 41, n) * (rng.random(n) < 0.7)
    want = b"".join(
        bytes(a[s : s + k]) + bytes(b[t : t + m])
        for s, k, t, m in zip(a_starts, a_lengths, b_starts, b_lengths)
    )
    got = alternate(a.data, a_starts, a_lengths, b.data, b_starts, b_lengths)
    assert bytes(got) == want
