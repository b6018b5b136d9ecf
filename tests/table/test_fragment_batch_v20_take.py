"""A few rows of many pylance-written 2.0 fragments read by their byte ranges (see
:mod:`lance_table.file.v2_0.small_take`): the same rows as pylance's takes (shuffled and repeated
indices, nulls, strings, dictionary strings, booleans, vectors in pages of several to a column,
after deletions), and a damaged page named in the error."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.v2_0 import direct as direct20
from lance_table.file.v2_0 import small_take

WORDS = ["alpha", "beta", "gamma-gamma", "delta" * 5, ""]


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    text = [
        None if k else f"{WORDS[i % 5]}-{i}" for i, k in zip(ids.tolist(), (rng.random(n) < 0.2).tolist())
    ]
    cats = [None if k else WORDS[i % 3] for i, k in zip(ids.tolist(), (rng.random(n) < 0.3).tolist())]
    return pa.table(
        {
            "id": ids,
            "small": pa.array(rng.integers(-50, 50, n).astype(np.int32), mask=rng.random(n) < 0.3),
            "x": pa.array(ids * 0.5, mask=rng.random(n) < 0.1),
            "flag": pa.array(rng.random(n) < 0.5, mask=rng.random(n) < 0.2),
            "s": pa.array(text, pa.string()),
            "cat": pa.array(cats, pa.string()),
            "vec": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(16 * n).astype(np.float32)), 16, mask=pa.array(rng.random(n) < 0.1)
            ),
        }
    )


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> str:
    """pylance's 2.0 files: two of 20k rows (vectors in two pages each), then eight of 1000."""
    uri = str(tmp_path_factory.mktemp("v20take") / "ds")
    lance.write_dataset(_rows(0, 40_000, 1), uri, data_storage_version="2.0", max_rows_per_file=20_000)
    lance.write_dataset(_rows(40_000, 8000, 2), uri, mode="append", max_rows_per_file=1000)
    return uri


@pytest.fixture
def used(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each take was read by byte ranges (not handed back to be read the usual way)."""
    seen: list[bool] = []
    real = small_take.read

    def spy(*args: Any) -> Any:
        got = real(*args)
        seen.append(got is not None)
        return got

    monkeypatch.setattr(small_take, "read", spy)
    return seen


def test_takes_equal_pylance(many: str, used: list[bool]) -> None:
    ours, theirs = lt.dataset(many), lance.dataset(many)
    n = theirs.count_rows()
    rng = np.random.default_rng(5)
    picks = rng.choice(n, 400, replace=False)
    for idx in (
        np.sort(picks).tolist(),
        picks.tolist(),  # shuffled
        [*picks[:50].tolist(), *picks[:50].tolist(), 0, n - 1, 0, 19_999, 20_000, 9_999, 10_000],  # repeated
    ):
        assert ours.take(idx).equals(theirs.take(idx))
        for cols in (["s"], ["cat", "flag"], ["vec", "id"], ["x", "small"]):
            assert ours.take(idx, columns=cols).equals(theirs.take(idx, columns=cols)), cols
    assert used and all(used)
    kinds = {leaf.key[0] for frag in ours._snapshot.fragment_readers() for leaf in _leaves(frag)}
    assert {"fixed", "bool", "binary", "vectors"} <= kinds


def _pages(frag: Any, name: str) -> list[tuple[int, small_take.Leaf]]:
    data_file = frag.fragment.files[0]
    node = frag.stored_roots(data_file)[frag.roots[name].id]
    got = small_take.pages(frag._reader(data_file), node)
    assert got is not None
    return got


def _leaves(frag: Any) -> list[small_take.Leaf]:
    return [leaf for name in frag.roots for _, leaf in _pages(frag, name)]


def test_takes_after_deletes_equal_pylance(many: str, copy: str, tmp_path: Path, used: list[bool]) -> None:
    other = str(tmp_path / "other")
    shutil.copytree(many, other)
    lt.dataset(copy).delete("id % 7 = 3 OR small < -40")
    lance.dataset(other).delete("id % 7 = 3 OR small < -40")
    ours, theirs = lt.dataset(copy), lance.dataset(other)
    n = theirs.count_rows()
    idx = np.random.default_rng(8).choice(n, 300, replace=False).tolist()
    assert ours.take(idx).equals(theirs.take(idx))
    assert ours.take(idx, columns=["s", "vec"]).equals(theirs.take(idx, columns=["s", "vec"]))
    assert used and all(used)
    flt = "x < 100 OR cat = 'beta'"
    assert ours.to_table(filter=flt, with_row_id=True).equals(theirs.to_table(filter=flt, with_row_id=True))


@pytest.mark.parametrize("column", ["s", "vec"])
def test_a_damaged_page_is_named(copy: str, column: str) -> None:
    ds = lt.dataset(copy)
    frag = ds._snapshot.fragment_readers()[3]  # a 1000-row file
    leaf = _pages(frag, column)[0][1]
    path = Path(copy) / "data" / frag.fragment.files[0].path
    raw = bytearray(path.read_bytes())
    if column == "s":  # the first end offset: past the second (ends that decrease)
        at = leaf.at[0][0]
        raw[at : at + 8] = (1 << 40).to_bytes(8, "little")
    else:  # the file cut short in the vectors' values
        raw = raw[: leaf.at[-1][0] + 64]
    path.write_bytes(bytes(raw))
    # a few rows of every file, the damaged one's first two among them
    idx = [*range(0, 48_000, 997), 41_000, 41_001]
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(copy).take(idx, columns=[column, "id"])


def test_many_runs_reads_the_span() -> None:
    from lance_table.file.runs import Runs, many_runs

    one_in_ten = Runs(np.arange(0, 20_000, 10, dtype=np.int64), np.ones(2000, np.int64))
    one_in_hundred = Runs(np.arange(0, 20_000, 100, dtype=np.int64), np.ones(200, np.int64))
    assert many_runs(one_in_ten)
    assert not many_runs(one_in_hundred)  # few runs for their span: their ranges are read
    assert not many_runs(Runs(np.arange(0, 60, 2, dtype=np.int64), np.ones(30, np.int64)))


@pytest.mark.parametrize("way", ["batch", "alone"])
def test_dense_filters_equal_pylance(many: str, monkeypatch: pytest.MonkeyPatch, way: str) -> None:
    from lance_table.file import reader as reader_module

    seen: list[bool] = []
    real = reader_module.many_runs

    def spy(runs: Any) -> bool:
        got = real(runs)
        seen.append(got)
        return got

    batched: list[bool] = []
    read = direct20._read

    def spy_batch(*args: Any) -> Any:
        got = read(*args)
        batched.append(got is not None)
        return got

    if way == "alone":  # (files read each by its own reader)
        monkeypatch.setattr(direct20, "MIN_SPAN_BYTES", 1 << 40)
    monkeypatch.setattr(reader_module, "many_runs", spy)
    monkeypatch.setattr(direct20, "_read", spy_batch)
    ours, theirs = lt.dataset(many), lance.dataset(many)
    for flt in ["small > 40", "x < 2000 OR flag", "s LIKE 'beta%'", "small < -45 AND cat IS NULL"]:
        assert ours.to_table(filter=flt).equals(theirs.to_table(filter=flt)), flt
        cols = ["vec", "s", "cat"]
        got = ours.to_table(columns=cols, filter=flt, with_row_id=True)
        assert got.equals(theirs.to_table(columns=cols, filter=flt, with_row_id=True)), flt
    if way == "alone":
        assert any(seen)  # the spans of the 20k-row files read whole
    else:
        assert batched and all(batched)  # their pages read whole, in batches


def test_a_damaged_page_read_by_a_dense_filter_is_named(copy: str) -> None:
    ds = lt.dataset(copy)
    frag = ds._snapshot.fragment_readers()[0]  # a 20k-row file
    leaf = _pages(frag, "vec")[0][1]
    path = Path(copy) / "data" / frag.fragment.files[0].path
    raw = bytearray(path.read_bytes())
    path.write_bytes(bytes(raw[: leaf.at[-1][0] + 64]))  # cut short in the vectors' values
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(copy).to_table(columns=["vec", "id"], filter="small > 40")
