"""A take of a few rows of many files whose pages have many mini-block chunks: the chunks the rows
need of all the files are read and decoded together (:mod:`small_take`). Rows, order, nulls,
duplicates, deletions and system columns are pylance's, on files either library wrote (and a
dataset of both), in 2.1 and 2.2; a spy checks that the chunk path is the one taken, and a
damaged chunk table is reported, naming its file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import mixed_writer_datasets

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import small_layouts, small_take
from lance_table.table import deletion
from lance_table.table.fragment import FragmentReader
from lance_table.table.readers import READERS
from tests.helpers import shuffled_rows

ROWS = 4_000  # rows per file: pages of a few dozen chunks
FLAT = ["id", "x", "n32", "cat", "text", "vec", "flag"]  # every column the chunk path reads


@pytest.fixture(autouse=True)
def _setup(monkeypatch: pytest.MonkeyPatch) -> None:
    READERS.clear()
    deletion.DELETIONS.clear()
    # no page is small enough to be read whole by a take of a few rows (here: pages of some
    # ten kB stand for the pages of pylance's 20k-row fragments)
    monkeypatch.setattr(small_layouts, "SMALL_SPAN_BYTES", 0)


def _table(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    vec = rng.random((n, 16), dtype=np.float32)
    vec[:, 0] = ids  # a vector beside the wrong id shows
    words = np.array([f"category-{k}" for k in range(40)], dtype=object)
    text = [f"row {i} says {'lorem ipsum ' * (i % 5)}{i * 7919 % 100003}" for i in ids.tolist()]
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 4, n))]).astype(np.int32)
    items = pa.array(rng.integers(0, 99, int(offsets[-1])))
    return pa.table(
        {
            "id": ids,
            "x": pa.array(rng.random(n), mask=ids % 11 == 0),
            "n32": pa.array(rng.integers(-1000, 1000, n).astype(np.int32), mask=ids % 7 == 0),
            "cat": pa.array(words[rng.integers(0, 40, n)], pa.string(), mask=ids % 17 == 0),
            "text": pa.array(text, mask=ids % 13 == 0),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), 16),
            "flag": pa.array(ids % 3 == 0),
            "tags": pa.ListArray.from_arrays(pa.array(offsets), items),
        }
    )


def _datasets(tmp_path: Path, writer: str, version: str) -> tuple[Any, Any]:
    return mixed_writer_datasets(tmp_path, writer, version, _table, ROWS)


_indices = shuffled_rows


class _Spy:
    """Counts the reads of the chunk path that succeeded and the fragments read one by one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.batches = self.rows = self.alone = self.failed = 0
        read, frag_read = small_take.read, FragmentReader.read

        def spied_read(*args: Any, **kwargs: Any) -> Any:
            got = read(*args, **kwargs)
            self.failed += got is None
            if got is not None:
                self.batches += 1
                self.rows += len(got[0])
            return got

        def spied_frag_read(frag: FragmentReader, *args: Any, **kwargs: Any) -> Any:
            self.alone += 1
            return frag_read(frag, *args, **kwargs)

        monkeypatch.setattr(small_take, "read", spied_read)
        monkeypatch.setattr(FragmentReader, "read", spied_frag_read)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("writer", ["pylance", "lance_table", "both"])
def test_take_matches_pylance(
    tmp_path: Path, writer: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = _datasets(tmp_path, writer, version)
    spy = _Spy(monkeypatch)
    total = theirs.count_rows()
    for seed, n in ((1, 300), (2, 40), (3, 3000)):
        idx = _indices(total, n, seed)
        assert ours.take(idx).equals(theirs.take(idx)), (seed, n)
        for cols in (["vec", "id"], ["text"], ["cat", "x", "tags"], ["n32", "flag"]):
            assert ours.take(idx, columns=cols).equals(theirs.take(idx, columns=cols)), (seed, cols)
    # a third of the rows: most values of the chunks read, decoded whole and then picked
    idx = _indices(total, 9000, 9)
    assert ours.take(idx).equals(theirs.take(idx))
    cols = ["id", "_rowid", "text", "_rowaddr", "vec"]
    idx = _indices(total, 200, 4)
    assert ours.take(idx, columns=cols).equals(theirs.take(idx, columns=cols))
    # by row address (fragment id << 32 | offset)
    addresses = theirs.take(idx, columns=["_rowaddr"]).column("_rowaddr")
    got = ours._take_rows(addresses, columns=["x", "cat", "vec"])
    assert got.equals(theirs._take_rows(addresses, columns=["x", "cat", "vec"]))
    assert spy.batches >= 12 and spy.failed == 0  # (the chunk path read most of them)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("writer", ["pylance", "lance_table"])
def test_take_after_deletions_matches_pylance(tmp_path: Path, writer: str, version: str) -> None:
    ours, theirs = _datasets(tmp_path, writer, version)
    flt = "id % 5 = 1 OR (id > 4100 AND id < 7000)"
    ours.delete(flt)
    theirs.delete(flt)
    ours, theirs = lt.dataset(ours.uri), lance.dataset(theirs.uri)
    total = theirs.count_rows()
    for seed, n in ((5, 250), (6, 2000)):
        idx = _indices(total, n, seed)
        assert ours.take(idx).equals(theirs.take(idx)), seed
        cols = ["_rowaddr", "text", "id", "_rowid"]
        assert ours.take(idx, columns=cols).equals(theirs.take(idx, columns=cols)), seed


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_take_reads_the_chunks_of_all_files_together(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = _datasets(tmp_path, "pylance", version)
    idx = _indices(theirs.count_rows(), 300, 7)
    spy = _Spy(monkeypatch)
    got = ours.take(idx, columns=FLAT)
    assert got.equals(theirs.take(idx, columns=FLAT))
    # the six large files in one batch of chunks (the small append's page is read whole)
    assert spy.batches >= 1 and spy.rows >= 270
    assert spy.alone == 0
    # a list column beside them is read file by file, the others still by the chunk path
    spy.batches = spy.rows = spy.alone = 0
    assert ours.take(idx, columns=["tags", "x"]).equals(theirs.take(idx, columns=["tags", "x"]))
    assert spy.batches == 1 and spy.alone >= 6


def test_corrupt_chunk_table_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = _datasets(tmp_path, "pylance", "2.2")
    idx = _indices(theirs.count_rows(), 300, 8)
    frag = ours.get_fragments()[1]
    path = str(tmp_path / "ours" / "data" / frag.data_files()[0].path)
    reader = LanceFileReader(path)
    lay = small_layouts.layout(reader, ["x"])
    assert lay is not None and lay.chunks > 1
    col = lay.columns[0]
    assert isinstance(col, small_layouts.ColumnLayout)
    raw = bytearray(Path(path).read_bytes())
    at = lay.start + col.meta_at
    raw[at : at + 4 * col.chunks] = b"\xff" * (4 * col.chunks)  # chunks far larger than the page
    Path(path).write_bytes(bytes(raw))
    READERS.clear()
    spy = _Spy(monkeypatch)
    with pytest.raises(CorruptFileError) as err:
        lt.dataset(ours.uri).take(idx, columns=["id", "x"])
    assert frag.data_files()[0].path in str(err.value)
    assert spy.failed == 1 and spy.alone >= 2  # the chunk path gave up; file by file says why
