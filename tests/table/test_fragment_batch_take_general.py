"""A take of a few rows of many of our own small 2.1/2.2 files whose strings are in a general
compression (zstd, lz4): the chunk path (:mod:`small_take`) reads their chunks with the other
columns', decompressing just the chunks the rows need. Rows, nulls and types (string, large
string, binary) are pylance's on the same files; a spy shows the chunk path read the strings; a
damaged compressed chunk is reported naming its file. (Scans: test_fragment_batch_general.)"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import garble_string_chunks

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import miniblock_small, small_layouts, small_take
from lance_table.table.fragment import FragmentReader
from lance_table.table.readers import READERS
from tests.helpers import shuffled_rows

ROWS = 4_000  # rows per file: pages of a few dozen chunks
STRINGS = ["s", "ls", "b"]


# (autouse: readers and deletions not kept, no page small enough to be read whole by a take)
from tests.table.test_fragment_batch_take import _setup  # noqa: E402, F401


def _table(start: int, n: int, scheme: str) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    text = [f"row {i} says {'lorem ipsum ' * (i % 5)}{i * 7919 % 100003} é" for i in ids.tolist()]
    raw = [t.encode() + bytes([i % 256]) for i, t in zip(ids.tolist(), text)]
    meta = {"lance-encoding:compression": scheme}
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("s", pa.string(), metadata=meta),
            pa.field("ls", pa.large_string(), nullable=False, metadata=meta),
            pa.field("b", pa.binary(), metadata=meta),
        ]
    )
    return pa.table(
        [
            pa.array(ids),
            pa.array(text, pa.string(), mask=ids % 13 == 0),
            pa.array(text, pa.large_string()),
            pa.array(raw, pa.binary(), mask=ids % 7 == 3),
        ],
        schema=schema,
    )


def _datasets(tmp_path: Path, version: str, scheme: str) -> tuple[Any, Any]:
    """Six files of 4k rows and an append of 300, by lance_table; each library opens a copy."""
    pristine = str(tmp_path / "pristine")
    lt.write_dataset(
        _table(0, 6 * ROWS, scheme), pristine, data_storage_version=version, max_rows_per_file=ROWS
    )
    lt.write_dataset(_table(6 * ROWS, 300, scheme), pristine, mode="append")
    for side in ("ours", "theirs"):
        shutil.copytree(pristine, tmp_path / side)
    return lt.dataset(str(tmp_path / "ours")), lance.dataset(str(tmp_path / "theirs"))


_indices = shuffled_rows


class _Spy:
    """The columns (by their types) the chunk path read, the reads of it that gave up, and the
    fragments read one by one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.types: list[pa.DataType] = []
        self.failed = self.alone = 0
        read, frag_read = small_take.read, FragmentReader.read

        def spied_read(layouts: Any, positions: Any, dtypes: Any, *args: Any) -> Any:
            got = read(layouts, positions, dtypes, *args)
            self.failed += got is None
            if got is not None:
                self.types.extend(dtypes)
            return got

        def spied_frag_read(frag: FragmentReader, *args: Any, **kwargs: Any) -> Any:
            self.alone += 1
            return frag_read(frag, *args, **kwargs)

        monkeypatch.setattr(small_take, "read", spied_read)
        monkeypatch.setattr(FragmentReader, "read", spied_frag_read)


def _general_page(path: str, name: str) -> small_layouts.ColumnLayout:
    """The page of column ``name`` of a file."""
    reader = LanceFileReader(path)
    lay = small_layouts.layout(reader, [name])
    assert lay is not None and lay.chunks > 1
    col = lay.columns[0]
    assert isinstance(col, small_layouts.ColumnLayout) and col.page.kind == miniblock_small.GENERAL
    return col


@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_take_of_compressed_strings_matches_pylance(
    tmp_path: Path, version: str, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = _datasets(tmp_path, version, scheme)
    path = str(tmp_path / "ours" / "data" / ours.get_fragments()[0].data_files()[0].path)
    col = _general_page(path, "s")
    assert col.encoding.general.compression.scheme == (2 if scheme == "zstd" else 1)
    spy = _Spy(monkeypatch)
    total = theirs.count_rows()
    for seed, n in ((1, 300), (2, 40), (3, 3000)):
        idx = _indices(total, n, seed)
        assert ours.take(idx).equals(theirs.take(idx)), (seed, n)
        for cols in (["s"], ["b", "id"], ["ls", "s"]):
            assert ours.take(idx, columns=cols).equals(theirs.take(idx, columns=cols)), (seed, cols)
    assert spy.failed == 0
    # every string column read by the chunk path, the files' chunks together (but by the take of
    # 3000 rows, scattered over every chunk: whole pages in batches, see test_fragment_batch_general)
    for t in (pa.string(), pa.large_string(), pa.binary()):
        assert spy.types.count(t) >= 4, t
    # the chunk path read them: only the small append's page is read on its own, or whole
    spy.types.clear()
    spy.alone = 0
    idx = _indices(6 * ROWS, 200, 4)
    assert ours.take(idx, columns=STRINGS).equals(theirs.take(idx, columns=STRINGS))
    assert spy.types == [pa.string(), pa.large_string(), pa.binary()] and spy.alone == 0
    # with deletions
    ours.delete("id % 5 = 1")
    theirs.delete("id % 5 = 1")
    ours, theirs = lt.dataset(ours.uri), lance.dataset(theirs.uri)
    idx = _indices(theirs.count_rows(), 500, 5)
    cols = ["_rowaddr", "s", "id", "b"]
    assert ours.take(idx, columns=cols).equals(theirs.take(idx, columns=cols))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_corrupt_compressed_chunk_names_the_file(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = _datasets(tmp_path, version, "zstd")
    idx = np.arange(0, 6 * ROWS, 150)  # rows of every file, fewer than its chunks (small_take)
    name = ours.get_fragments()[2].data_files()[0].path
    garble_string_chunks(str(tmp_path / "ours"), name, "s")
    READERS.clear()
    spy = _Spy(monkeypatch)
    with pytest.raises(CorruptFileError) as err:
        lt.dataset(ours.uri).take(idx, columns=["id", "s"])
    assert name in str(err.value)
    assert spy.failed >= 1 and spy.alone >= 3  # the chunk path gave up; file by file says why
    # the other files still read
    ok = np.arange(0, 2 * ROWS, 37)
    got = lt.dataset(ours.uri).take(ok, columns=["s"])
    assert got.equals(theirs.take(ok, columns=["s"]))


def test_second_take_makes_no_layouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layouts a take of several columns asks of each file (all the columns, each one, the
    groups read apart) are all kept with the file's reader for the next take."""
    ours, theirs = _datasets(tmp_path, "2.2", "zstd")
    made = []
    layout = small_layouts._layout

    def spied(reader: Any, names: Any) -> Any:
        made.append(tuple(names))
        return layout(reader, names)

    monkeypatch.setattr(small_layouts, "_layout", spied)
    idx = _indices(6 * ROWS, 300, 6)
    selections = (["id", "s", "ls", "b"], ["b", "s"])
    for cols in selections:
        assert lt.dataset(ours.uri).take(idx, columns=cols).equals(theirs.take(idx, columns=cols))
    assert made
    made.clear()
    for _ in range(2):
        for cols in selections:
            assert lt.dataset(ours.uri).take(idx, columns=cols).equals(theirs.take(idx, columns=cols))
    assert made == []  # (a reader kept 16 before: fewer than these two selections ask of it)
