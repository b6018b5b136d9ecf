"""pylance's 2.0 files with list fields (lists of strings, of numbers, of structs, of lists; a
struct holding a list), each file too large to share a batch of joined spans, read as batches
straight into the columns' values (:mod:`direct20`): one read of each file's span, the end
offsets of all the files resolved in one numpy pass. The same rows as pylance's in scans,
projections, filters, takes and after deletions, with nulls, empty lists and null items; a
damaged offsets buffer is reported naming the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_0 import direct as direct20
from lance_table.file.v2_0 import small_layout
from lance_table.table import fragment_batch
from lance_table.table.fragment import FragmentReader

ROWS = 12000
PER_FILE = 2000
LISTS = ["tags", "nums", "recs", "grid", "box"]


def _table() -> pa.Table:
    rng = np.random.default_rng(5)
    ids = np.arange(ROWS, dtype=np.int64)
    words = ["alpha", "beta", "gamma-gamma", "delta" * 5, ""]
    ilist = ids.tolist()
    tags = [
        None if i % 11 == 3 else [None if (i + j) % 13 == 0 else words[(i + j) % 5] for j in range(i % 5)]
        for i in ilist
    ]
    nums = [None if i % 7 == 2 else list(range(i, i + i % 4)) for i in ilist]
    recs = [
        None if i % 9 == 4 else [{"a": i + j, "b": None if j == 1 else words[j % 5]} for j in range(i % 3)]
        for i in ilist
    ]
    grid = [None if i % 6 == 1 else [list(range(j)) if j != 2 else None for j in range(i % 4)] for i in ilist]
    box = pa.StructArray.from_arrays(
        [pa.array(ids * 2), pa.array([None if i % 5 == 0 else words[: i % 4] for i in ilist])], ["n", "l"]
    )
    return pa.table(
        {
            "id": ids,
            "x": pa.array(rng.random(ROWS), mask=rng.random(ROWS) < 0.1),
            "tags": pa.array(tags, pa.list_(pa.string())),
            "nums": pa.array(nums, pa.list_(pa.int64())),
            "recs": pa.array(recs, pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())]))),
            "grid": pa.array(grid, pa.list_(pa.list_(pa.int32()))),
            "box": box,
        }
    )


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> str:
    """6 files of pylance's 2.0, each column one page."""
    uri = str(tmp_path_factory.mktemp("v20lists") / "ds")
    lance.write_dataset(_table(), uri, data_storage_version="2.0", max_rows_per_file=PER_FILE)
    return uri


@pytest.fixture
def copy(many: str, tmp_path: Path) -> str:
    target = str(tmp_path / "ds")
    shutil.copytree(many, target)
    return target


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[object]]:
    """A record of each direct batch (whether it gave the columns, and of how many files) and of
    each fragment read on its own (its columns); files of any size read straight into the
    columns."""
    monkeypatch.setattr(direct20, "MIN_SPAN_BYTES", 0)
    got: dict[str, list[object]] = {"direct": [], "alone": []}
    read = direct20._read

    def spy_read(found: direct20.Found, dtypes: list[pa.DataType]) -> object:
        out = read(found, dtypes)
        got["direct"].append((out is not None, len(found)))
        return out

    alone = FragmentReader.read

    def spy_alone(self: FragmentReader, *args: object, **kwargs: object) -> object:
        got["alone"].append(args[0])
        return alone(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(direct20, "_read", spy_read)
    monkeypatch.setattr(FragmentReader, "read", spy_alone)
    return got


def _batched(calls: dict[str, list[object]]) -> None:
    """The lists were read by direct batches of several files, none fragment by fragment."""
    assert calls["direct"] and all(ok for ok, _ in calls["direct"]), calls  # type: ignore[misc]
    assert any(files > 1 for _, files in calls["direct"]), calls  # type: ignore[misc]
    assert not any(set(LISTS) & set(cols) for cols in calls["alone"]), calls  # type: ignore[call-overload]


def test_each_file_holds_its_lists_in_one_page(many: str) -> None:
    for name in sorted(Path(many, "data").glob("*.lance")):
        lay = small_layout.layout(LanceFileReader(str(name)), ["id", *LISTS])
        assert lay is not None and lay.num_rows == PER_FILE
        assert [type(c).__name__ for c in lay.columns] == ["Leaf", "List", "List", "List", "List", "Struct"]


def test_files_large_enough_are_read_directly_without_patching(
    many: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = []
    read = direct20._read

    def spy(found: direct20.Found, dtypes: list[pa.DataType]) -> object:
        out = read(found, dtypes)
        got.append(out is not None)
        return out

    monkeypatch.setattr(direct20, "MIN_SPAN_BYTES", 16 * 1024)
    monkeypatch.setattr(direct20, "_read", spy)
    assert lt.dataset(many).to_table().equals(lance.dataset(many).to_table())
    assert got and all(got)


@pytest.mark.parametrize(
    "columns", [None, ["tags"], ["nums", "id"], ["recs"], ["grid"], ["box"], ["x", "grid", "tags"]]
)
def test_scans_equal_pylance(many: str, calls: dict[str, list[object]], columns: list[str] | None) -> None:
    got = lt.dataset(many).to_table(columns=columns, with_row_id=True)
    assert got.equals(lance.dataset(many).to_table(columns=columns, with_row_id=True))
    _batched(calls)


@pytest.mark.parametrize(
    "flt", ["x < 0.1", "x < 0.7", "id >= 1500 AND id < 7300", "x IS NULL", "box.n % 3 = 0"]
)
def test_filters_equal_pylance(many: str, calls: dict[str, list[object]], flt: str) -> None:
    for columns in (["id", "tags", "recs"], ["grid", "box"], None):
        got = lt.dataset(many).to_table(columns=columns, filter=flt)
        assert got.equals(lance.dataset(many).to_table(columns=columns, filter=flt)), (flt, columns)
    if flt != "id >= 1500 AND id < 7300":  # (rows of every file: their pages read whole)
        _batched(calls)


def test_batches_and_takes_equal_pylance(many: str, calls: dict[str, list[object]]) -> None:
    mine = pa.Table.from_batches(list(lt.dataset(many).to_batches(columns=LISTS, batch_size=900)))
    assert mine.equals(
        pa.Table.from_batches(list(lance.dataset(many).to_batches(columns=LISTS, batch_size=900)))
    )
    picks = [*np.random.default_rng(2).choice(ROWS, 300, replace=False).tolist(), 0, ROWS - 1, 7]
    for columns in (None, ["grid", "tags"]):
        got = lt.dataset(many).take(picks, columns=columns)
        assert got.equals(lance.dataset(many).take(picks, columns=columns)), columns
    many_picks = list(range(0, ROWS, 2))  # (half of every file's rows: their pages read whole)
    assert lt.dataset(many).take(many_picks).equals(lance.dataset(many).take(many_picks))


def test_scans_after_deletes_equal_pylance(copy: str, calls: dict[str, list[object]], tmp_path: Path) -> None:
    theirs = str(tmp_path / "theirs")
    shutil.copytree(copy, theirs)
    predicate = "id % 10 = 3 OR (id >= 2500 AND id < 3900)"
    lt.dataset(copy).delete(predicate)
    lance.dataset(theirs).delete(predicate)
    for side in (copy, theirs):  # each side reads the other's deletion files too
        for columns in (None, ["tags", "grid"], ["recs", "box", "id"]):
            got = lt.dataset(side).to_table(columns=columns, with_row_id=True)
            assert got.equals(lance.dataset(side).to_table(columns=columns, with_row_id=True)), columns
    _batched(calls)


@pytest.mark.parametrize("column", ["tags", "grid"])
def test_damaged_offsets_raise_naming_the_file(
    copy: str, calls: dict[str, list[object]], column: str
) -> None:
    name = sorted(Path(copy, "data").glob("*.lance"))[2]
    lay = small_layout.layout(LanceFileReader(str(name)), [column])
    assert lay is not None and isinstance(lay.columns[0], small_layout.List)
    offset, size = lay.columns[0].at  # the end offsets of the file's lists
    with open(name, "r+b") as f:
        f.seek(offset + size // 2)
        f.write((1 << 40).to_bytes(8, "little"))  # an end past the page's items
    with pytest.raises(CorruptFileError, match=name.name):
        lt.dataset(copy).to_table(columns=["id", column])
    with pytest.raises(CorruptFileError, match=name.name):
        lt.dataset(copy).to_table(filter="x < 0.5")
    assert calls["direct"] and not all(ok for ok, _ in calls["direct"])  # type: ignore[misc]  # (the batch gave up)


def _span(uri: str, columns: list[str]) -> int:
    """The largest span of the columns' pages in a file of the dataset."""
    found = [
        small_layout.layout(LanceFileReader(str(name)), columns) for name in Path(uri, "data").glob("*.lance")
    ]
    return max(lay.length for lay in found if lay is not None)


@pytest.mark.parametrize("columns", [["tags", "x"], ["box"], ["x", "id"]])
def test_batches_of_lists_hold_fewer_bytes(
    many: str, calls: dict[str, list[object]], monkeypatch: pytest.MonkeyPatch, columns: list[str]
) -> None:
    """A direct batch of columns holding lists (in a struct too) reads at most LIST_BATCH_BYTES of
    files (it also holds their end offsets and the arrays resolving them); one of flat columns,
    DIRECT_BATCH_BYTES."""
    monkeypatch.setattr(fragment_batch, "LIST_BATCH_BYTES", int(_span(many, columns) * 2.5))
    got = lt.dataset(many).to_table(columns=columns)
    assert got.equals(lance.dataset(many).to_table(columns=columns))
    most = max(files for _, files in calls["direct"])  # type: ignore[misc]
    assert most == 2 if columns != ["x", "id"] else most > 2, calls
