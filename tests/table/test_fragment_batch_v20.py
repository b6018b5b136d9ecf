"""Many small 2.0 fragments read as batches (one numpy pass per column over many files): the same
rows, row ids, filters, takes, deletes and compactions as pylance, on files either library wrote,
and the same error as a read fragment by fragment when a file is damaged."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.v2_0 import small_many as small_many20
from lance_table.table import fragment_batch
from lance_table.table.readers import READERS

COLUMNS = ["id", "small", "x", "ts", "flag", "s", "cat", "opt", "rec", "tags", "nums", "vec"]


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    words = ["alpha", "beta", "gamma-gamma", "delta" * 5, ""]
    text = [
        None if k else f"{words[i % 5]}-{i}" for i, k in zip(ids.tolist(), (rng.random(n) < 0.2).tolist())
    ]
    cats = [None if k else words[i % 3] for i, k in zip(ids.tolist(), (rng.random(n) < 0.3).tolist())]
    tags = [None if i % 7 == 3 else [words[(i + j) % 5] for j in range(i % 4)] for i in ids.tolist()]
    nums = [None if i % 5 == 2 else list(range(i % 3)) for i in ids.tolist()]
    return pa.table(
        {
            "id": ids,
            "small": pa.array(rng.integers(-50, 50, n).astype(np.int32), mask=rng.random(n) < 0.3),
            "x": pa.array(ids * 0.5, mask=rng.random(n) < 0.1),
            "ts": pa.array(ids * 1000, pa.timestamp("ms")),
            "flag": pa.array(rng.random(n) < 0.5, mask=rng.random(n) < 0.2),
            "s": pa.array(text, pa.string()),
            "cat": pa.array(cats, pa.string()),
            # all null in some appends
            "opt": pa.array([None] * n if seed % 3 else (ids * 2.0).tolist(), pa.float64()),
            "rec": pa.StructArray.from_arrays([pa.array(ids * 3), pa.array(text, pa.string())], ["a", "b"]),
            "tags": pa.array(tags, pa.list_(pa.string())),
            "nums": pa.array(nums, pa.list_(pa.int64())),
            "vec": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(3 * n).astype(np.float32)), 3, mask=pa.array(rng.random(n) < 0.1)
            ),
        }
    )


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> str:
    """12 appends of 2.0 files alternating between the two libraries, of varying sizes."""
    uri = str(tmp_path_factory.mktemp("v20") / "ds")
    start = 0
    for i in range(12):
        n = [1, 37, 100, 5, 250][i % 5]
        write = lance.write_dataset if i % 2 else lt.write_dataset
        write(_rows(start, n, i), uri, mode="append" if i else "create", data_storage_version="2.0")
        start += n
    return uri


def test_the_2_0_fragments_are_read_as_batches(many: str) -> None:
    frags = lt.dataset(many)._snapshot.fragment_readers()
    for columns in (["id", "x"], COLUMNS):
        plans = fragment_batch.plans(frags, columns)
        assert all(isinstance(p[1], small_many20.FileLayout) for p in plans if p is not None)
        assert plans.count(None) == 0, columns


def test_scans_filters_and_takes_equal_pylance(many: str) -> None:
    ours, theirs = lt.dataset(many), lance.dataset(many)
    assert ours.to_table().equals(theirs.to_table())
    assert ours.to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))
    for col in COLUMNS:
        assert ours.to_table(columns=[col]).equals(theirs.to_table(columns=[col])), col
    for flt in ["id >= 30 AND id < 420", "small > 10", "s LIKE 'beta%'", "x IS NULL", "flag", "cat = 'beta'"]:
        got = ours.to_table(filter=flt, with_row_id=True)
        assert got.equals(theirs.to_table(filter=flt, with_row_id=True)), flt
        cols = ["tags", "rec", "id"]
        assert ours.to_table(columns=cols, filter=flt).equals(theirs.to_table(columns=cols, filter=flt)), flt
    n = theirs.count_rows()
    picks = [*np.random.default_rng(3).choice(n, 100, replace=False).tolist(), 0, n - 1, 0]
    assert ours.take(picks).equals(theirs.take(picks))
    assert ours.take(picks, columns=["nums", "s"]).equals(theirs.take(picks, columns=["nums", "s"]))


def test_deletes_then_scans_equal_pylance(many: str, copy: str, tmp_path: Path) -> None:
    other = str(tmp_path / "other")
    shutil.copytree(many, other)
    lt.dataset(copy).delete("id % 7 = 3 OR small < -40")
    lance.dataset(other).delete("id % 7 = 3 OR small < -40")
    ours, theirs = lt.dataset(copy), lance.dataset(other)
    assert ours.to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))
    flt = "id > 100 AND id < 900"
    assert ours.to_table(filter=flt, with_row_id=True).equals(theirs.to_table(filter=flt, with_row_id=True))
    picks = list(range(0, theirs.count_rows(), 7))
    assert ours.take(picks).equals(theirs.take(picks))
    expected = theirs.to_table()
    lt.dataset(copy).compact_files()  # the fragments' rows read as batches, written as one
    assert len(lance.dataset(copy).get_fragments()) == 1
    assert lance.dataset(copy).to_table().equals(expected)


def test_a_damaged_2_0_file_among_many_is_named(copy: str) -> None:
    ds = lt.dataset(copy)
    ds.to_table()  # the readers (footers) are cached: only the page bytes change below
    frag = ds._snapshot.manifest.fragments[2]  # 100 rows
    reader = READERS.get(ds._snapshot.storage, frag.files[0])
    lay = small_many20.layout(reader, ["s"])
    assert lay is not None
    leaf = lay.columns[0]
    assert isinstance(leaf, small_many20.Leaf) and leaf.key[0] == "binary"
    path = Path(copy) / "data" / frag.files[0].path
    raw = bytearray(path.read_bytes())
    at = leaf.at[0][0]  # the first end offset: past the second (ends that decrease)
    raw[at : at + 8] = (1 << 40).to_bytes(8, "little")
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(copy).to_table()
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(copy).to_table(columns=["s"], filter="id > 3")
