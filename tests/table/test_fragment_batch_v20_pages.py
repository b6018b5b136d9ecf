"""pylance's 2.0 files whose columns are stored in several pages (pylance splits a 20k-row
file's vectors in two; here small pages are forced with ``data_cache_bytes`` and a stream of small
batches) read as batches: straight into the columns' values (:mod:`direct20`) or through the
files' joined spans, the same rows as pylance's, after deletions too, and the error of a read
fragment by fragment, naming the file, when a page is damaged."""

from __future__ import annotations

import glob
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
from lance_table.file.v2_0 import small_many as small_many20
from lance_table.table import fragment_batch
from lance_table.table.fragment import FragmentReader

ROWS = 6000
PER_FILE = 1500
COLUMNS = ["id", "x", "flag", "s", "cat", "rec", "vec", "tags"]


def _table() -> pa.Table:
    rng = np.random.default_rng(11)
    ids = np.arange(ROWS, dtype=np.int64)
    words = ["alpha", "beta", "gamma-gamma", "delta" * 5, ""]
    null = (rng.random(ROWS) < 0.2).tolist()
    text = [None if k else f"{words[i % 5]}-{i}" for i, k in zip(ids.tolist(), null)]
    return pa.table(
        {
            "id": ids,
            "x": pa.array(rng.random(ROWS), mask=rng.random(ROWS) < 0.1),
            "flag": pa.array(rng.random(ROWS) < 0.5, mask=rng.random(ROWS) < 0.2),
            "s": pa.array(text, pa.string()),
            "cat": pa.array([f"c{i % 7}" for i in ids.tolist()], pa.string()),
            "rec": pa.StructArray.from_arrays([pa.array(ids * 3), pa.array(text, pa.string())], ["a", "b"]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * 16).astype(np.float32)), 16),
            "tags": pa.array([[words[(i + j) % 5] for j in range(i % 3)] for i in ids.tolist()]),
        }
    )


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> str:
    """4 files of pylance's, each column in 6 pages of 250 rows."""
    uri = str(tmp_path_factory.mktemp("v20pages") / "ds")
    table = _table()
    stream = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=250))
    lance.write_dataset(
        stream, uri, data_storage_version="2.0", max_rows_per_file=PER_FILE, data_cache_bytes=4096
    )
    return uri


@pytest.fixture(params=["direct", "joined"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[bool]]:
    """Which way batches read (``joined``: files too small for :mod:`direct20`), and a record of
    each batch read that way (whether it gave the columns) and of each fragment read alone
    (whether it read the vectors)."""
    calls: dict[str, list[bool]] = {"direct": [], "joined": []}
    if request.param == "joined":
        monkeypatch.setattr(direct20, "MIN_SPAN_BYTES", 1 << 40)
    read, decode = direct20._read, small_many20.decode

    def spy_read(*args: object) -> object:
        got = read(*args)  # type: ignore[arg-type]
        calls["direct"].append(got is not None)
        return got

    def spy_decode(*args: object) -> object:
        got = decode(*args)  # type: ignore[arg-type]
        calls["joined"].append(got is not None)
        return got

    alone = FragmentReader.read

    def spy_alone(self: FragmentReader, *args: object, **kwargs: object) -> object:
        calls["alone"].append("vec" in args[0])  # type: ignore[operator]
        return alone(self, *args, **kwargs)  # type: ignore[arg-type]

    calls["alone"] = []
    monkeypatch.setattr(FragmentReader, "read", spy_alone)
    monkeypatch.setattr(direct20, "_read", spy_read)
    monkeypatch.setattr(small_many20, "decode", spy_decode)
    calls["way"] = request.param  # type: ignore[assignment]
    return calls


def _used(calls: dict[str, list[bool]]) -> None:
    way = calls["way"]
    assert calls[way] and all(calls[way]), calls  # type: ignore[index]
    other = "joined" if way == "direct" else "direct"
    assert not calls[other] or way == "direct", calls  # (a direct read never falls back here)


def test_pylance_wrote_several_pages_per_column(many: str) -> None:
    for name in glob.glob(f"{many}/data/*.lance"):
        meta = LanceFileReader(name).metadata
        pages = [len(col.pages) for col in meta.columns]
        assert sum(p > 1 for p in pages) == len(pages) - 1  # (all but the struct's own column)
        reader = LanceFileReader(name)
        lay = small_layout.layout(reader, ["id", "x", "flag", "s", "cat", "rec", "vec"])
        assert lay is not None and isinstance(lay.columns[6], small_layout.Pages)
        assert small_layout.layout(reader, ["tags"]) is None  # (a list in several pages)


@pytest.mark.parametrize(
    "columns", [None, ["vec"], ["id", "x", "vec"], ["s"], ["cat"], ["flag", "x"], ["rec", "cat"], ["tags"]]
)
def test_scans_equal_pylance(copy: str, path: dict[str, list[bool]], columns: list[str] | None) -> None:
    got = lt.dataset(copy).to_table(columns=columns, with_row_id=True)
    assert got.equals(lance.dataset(copy).to_table(columns=columns, with_row_id=True))
    if columns != ["tags"]:  # (a list in several pages: read file by file)
        _used(path)


@pytest.mark.parametrize("flt", ["x < 0.1", "x < 0.7", "cat = 'c3'", "id >= 1400 AND id < 4600", "s IS NULL"])
def test_filters_equal_pylance(
    copy: str, path: dict[str, list[bool]], flt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path["way"] == "direct":  # (files too large for batches of joined spans: batched all the same)
        monkeypatch.setattr(fragment_batch, "BATCH_BYTES", 1)
    for columns in (["id", "vec", "s"], None):
        got = lt.dataset(copy).to_table(columns=columns, filter=flt)
        assert got.equals(lance.dataset(copy).to_table(columns=columns, filter=flt)), (flt, columns)
        if flt in ("x < 0.1", "x < 0.7") and columns:  # (many runs of rows: their pages read whole)
            _used(path)
            if path["way"] == "direct":  # (no file's vectors read on their own)
                assert not any(path["alone"])


def test_batches_equal_pylance(copy: str, path: dict[str, list[bool]]) -> None:
    cols = ["id", "vec", "s", "cat"]
    mine = list(lt.dataset(copy).to_batches(columns=cols, batch_size=700))
    other = list(lance.dataset(copy).to_batches(columns=cols, batch_size=700))
    assert pa.Table.from_batches(mine).equals(pa.Table.from_batches(other))


def test_scans_after_deletes_equal_pylance(copy: str, path: dict[str, list[bool]], tmp_path: Path) -> None:
    theirs = str(tmp_path / "theirs")
    shutil.copytree(copy, theirs)
    lt.dataset(copy).delete("id % 10 = 3 OR (id >= 1600 AND id < 1700)")
    lance.dataset(theirs).delete("id % 10 = 3 OR (id >= 1600 AND id < 1700)")
    for side in (copy, theirs):  # each side reads the other's deletion files too
        for columns in (None, ["id", "x", "vec"], ["s", "cat"]):
            got = lt.dataset(side).to_table(columns=columns, with_row_id=True)
            assert got.equals(lance.dataset(side).to_table(columns=columns, with_row_id=True)), columns
    _used(path)


def test_damaged_page_raises_naming_the_file(copy: str, path: dict[str, list[bool]]) -> None:
    name = sorted(glob.glob(f"{copy}/data/*.lance"))[1]
    lay = small_layout.layout(LanceFileReader(name), ["s"])
    assert lay is not None and isinstance(lay.columns[0], small_layout.Pages)
    offset, size = lay.columns[0].pages[2].at[0]  # the end offsets of the strings of a page
    with open(name, "r+b") as f:
        f.seek(offset)
        f.write(b"\xff" * size)
    with pytest.raises(CorruptFileError, match=Path(name).name):
        lt.dataset(copy).to_table(columns=["id", "s", "vec"])
    with pytest.raises(CorruptFileError, match=Path(name).name):
        lt.dataset(copy).to_table()
    assert path[path["way"]] and not all(path[path["way"]])  # type: ignore[index]  # (the batch gave up)
