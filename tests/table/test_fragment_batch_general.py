"""Scans of many of our own small 2.1/2.2 files whose strings are in a general compression (zstd,
which our writer picks for text, and LZ4): the files' pages of such strings are decoded in
batches (:mod:`small_many`), every chunk of all the files of a batch decompressed together, not
file by file. Rows, nulls, empty and long strings, non-ASCII text and types (string, large
string, binary) are pylance's on the same files, and pylance reads the files as we wrote them;
with deletions, filters, takes and record batches too. A spy shows the batch path decoded the
strings; a damaged compressed chunk is reported naming its file; a batch whose strings claim
more bytes than :data:`small_many.MAX_GENERAL_BYTES` is read file by file."""

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
from lance_table.file.v2_1 import miniblock_small, small_layouts, small_many
from lance_table.table.fragment import FragmentReader
from lance_table.table.readers import READERS
from tests.helpers import shuffled_rows

ROWS = 3_000  # rows per file: pages of a few dozen chunks
FILES = 6
STRINGS = ["s", "ls", "b", "t"]


# (autouse: readers and deletions not kept, no page small enough to be read whole by a take)
from tests.table.test_fragment_batch_take import _setup  # noqa: E402, F401


def _table(start: int, n: int, scheme: str | None) -> pa.Table:
    """Strings with nulls, empty ones, non-ASCII ones and some of a few hundred bytes; ``t``:
    random letters in the writer's own choice of compression (2.2: zstd; 2.1: FSST)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    words = ["", "é", "naïve café", "日本語のテキスト", "lorem ipsum " * 20, "x"]
    text = [f"{words[i % 6]}{i * 7919 % 100003}" if i % 11 else "" for i in ids.tolist()]
    raw = [t.encode() + bytes([i % 256]) for i, t in zip(ids.tolist(), text)]
    rng = np.random.default_rng(start)
    letters = rng.integers(ord("a"), ord("z") + 1, (n, 20), dtype=np.uint8)
    meta = {} if scheme is None else {"lance-encoding:compression": scheme}
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("s", pa.string(), metadata=meta),
            pa.field("ls", pa.large_string(), nullable=False, metadata=meta),
            pa.field("b", pa.binary(), metadata=meta),
            pa.field("t", pa.string()),
        ]
    )
    return pa.table(
        [
            pa.array(ids),
            pa.array(text, pa.string(), mask=ids % 13 == 0),
            pa.array(text, pa.large_string()),
            pa.array(raw, pa.binary(), mask=ids % 7 == 3),
            pa.array([r.tobytes().decode() for r in letters], pa.string()),
        ],
        schema=schema,
    )


def _datasets(tmp_path: Path, version: str, scheme: str | None) -> tuple[Any, Any, pa.Table]:
    """Six files of 3k rows and an append of 300, by lance_table; each library opens a copy; and
    the rows written."""
    pristine = str(tmp_path / "pristine")
    first, last = _table(0, FILES * ROWS, scheme), _table(FILES * ROWS, 300, scheme)
    lt.write_dataset(first, pristine, data_storage_version=version, max_rows_per_file=ROWS)
    lt.write_dataset(last, pristine, mode="append")
    for side in ("ours", "theirs"):
        shutil.copytree(pristine, tmp_path / side)
    written = pa.concat_tables([first, last])
    return lt.dataset(str(tmp_path / "ours")), lance.dataset(str(tmp_path / "theirs")), written


class _Spy:
    """The string columns (by their types) the batch path decoded, its decodes that gave up, and
    the fragments read one by one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.types: list[pa.DataType] = []
        self.failed = self.alone = 0
        self.files = 0  # the most files of a batch decoded
        decode, frag_read = small_many.decode, FragmentReader.read

        def spied_decode(layouts: Any, data: Any, bases: Any, column: int, dtype: Any, *args: Any) -> Any:
            got = decode(layouts, data, bases, column, dtype, *args)
            col = layouts[0].columns[column]
            if isinstance(col, small_layouts.ColumnLayout) and col.page.kind == miniblock_small.GENERAL:
                self.failed += got is None
                if got is not None:
                    self.types.append(dtype)
                    self.files = max(self.files, len(layouts))
            return got

        def spied_frag_read(frag: FragmentReader, *args: Any, **kwargs: Any) -> Any:
            self.alone += 1
            return frag_read(frag, *args, **kwargs)

        monkeypatch.setattr(small_many, "decode", spied_decode)
        monkeypatch.setattr(FragmentReader, "read", spied_frag_read)


def _page(path: str, name: str) -> tuple[small_layouts.FileLayout, small_layouts.ColumnLayout]:
    """A file's layout of column ``name`` and its page, one of strings in a general compression."""
    lay = small_layouts.layout(LanceFileReader(path), [name])
    assert lay is not None and lay.chunks > 1
    col = lay.columns[0]
    assert isinstance(col, small_layouts.ColumnLayout) and col.page.kind == miniblock_small.GENERAL
    return lay, col


@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_scan_of_compressed_strings_matches_pylance(
    tmp_path: Path, version: str, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs, written = _datasets(tmp_path, version, scheme)
    path = str(tmp_path / "ours" / "data" / ours.get_fragments()[0].data_files()[0].path)
    assert _page(path, "s")[1].encoding.general.compression.scheme == (2 if scheme == "zstd" else 1)
    if version == "2.2":  # the 2.2 writer's own choice for random letters: zstd
        assert _page(path, "t")[1].encoding.general.compression.scheme == 2
    # pylance reads our files as we wrote them
    assert theirs.to_table().equals(written)
    spy = _Spy(monkeypatch)
    assert ours.to_table().equals(written)
    # every string column of the six files decoded in batches, none of them read on its own
    assert {pa.string(), pa.large_string(), pa.binary()} <= set(spy.types)
    # (the append's file may end a run alone)
    assert spy.files >= FILES and spy.failed == 0 and spy.alone <= 1
    for cols in (["s"], ["t", "id"], ["ls", "b"], STRINGS):
        assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols)), cols
    for flt in ("id % 3 = 0", "t < 'm'", "id >= 2000 AND id < 9000", "s IS NULL"):
        got = ours.to_table(columns=STRINGS, filter=flt)
        assert got.equals(theirs.to_table(columns=STRINGS, filter=flt)), flt
    # a filter's rows scattered over every chunk: the strings' pages decoded whole in batches;
    # a short range of rows: just its chunks (small_take), not the whole pages
    spy.types.clear()
    assert ours.to_table(columns=["s"], filter="id % 4 = 1").equals(
        theirs.to_table(columns=["s"], filter="id % 4 = 1")
    )
    assert spy.types == [pa.string()]
    spy.types.clear()
    flt = f"id >= {ROWS + 100} AND id < {ROWS + 200}"
    assert ours.to_table(columns=["s"], filter=flt).equals(theirs.to_table(columns=["s"], filter=flt))
    assert spy.types == []
    mine = pa.Table.from_batches(ours.to_batches(columns=["id", "s", "t"], batch_size=1000))
    assert mine.equals(theirs.to_table(columns=["id", "s", "t"]))
    idx = shuffled_rows(theirs.count_rows(), 2000, 3)
    assert ours.take(idx).equals(theirs.take(idx))
    assert spy.failed == 0
    # with deletions: the kept rows of every file, in batches
    ours.delete("id % 5 = 1 OR id % 1000 < 3")
    theirs.delete("id % 5 = 1 OR id % 1000 < 3")
    ours, theirs = lt.dataset(ours.uri), lance.dataset(theirs.uri)
    spy.types.clear()
    assert ours.to_table().equals(theirs.to_table())
    assert pa.string() in spy.types and spy.failed == 0
    cols = ["_rowid", "t", "s", "b"]
    assert ours.to_table(columns=cols, filter="id % 4 = 0").equals(
        theirs.to_table(columns=cols, filter="id % 4 = 0")
    )
    idx = shuffled_rows(theirs.count_rows(), 700, 5)
    assert ours.take(idx, columns=cols).equals(theirs.take(idx, columns=cols))


def test_pylance_written_small_fragments_still_read(tmp_path: Path) -> None:
    """Strings pylance wrote in small fragments (FSST, plain) read as pylance reads them."""
    table = _table(0, FILES * ROWS, None)
    lance.write_dataset(table, str(tmp_path / "p"), data_storage_version="2.2", max_rows_per_file=ROWS)
    assert lt.dataset(str(tmp_path / "p")).to_table().equals(lance.dataset(str(tmp_path / "p")).to_table())


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_corrupt_compressed_chunk_names_the_file(
    tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs, _ = _datasets(tmp_path, version, "zstd")
    name = ours.get_fragments()[2].data_files()[0].path
    _page(str(tmp_path / "ours" / "data" / name), "s")  # (a page of compressed chunks)
    garble_string_chunks(str(tmp_path / "ours"), name, "s")
    READERS.clear()
    spy = _Spy(monkeypatch)
    with pytest.raises(CorruptFileError) as err:
        lt.dataset(ours.uri).to_table(columns=["id", "s"])
    assert name in str(err.value)
    assert spy.failed >= 1 and spy.alone >= 2  # the batch gave up; file by file says why
    # the other columns and files still read
    assert lt.dataset(ours.uri).to_table(columns=["t"]).equals(theirs.to_table(columns=["t"]))
    got = lt.dataset(ours.uri).to_table(columns=["s"], filter="id < 5000")
    assert got.equals(theirs.to_table(columns=["s"], filter="id < 5000"))


def test_strings_claiming_many_bytes_read_file_by_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch holds all its strings decompressed at once: past the bound, the files are read one
    by one (with the same rows)."""
    ours, theirs, _ = _datasets(tmp_path, "2.2", None)
    monkeypatch.setattr(small_many, "MAX_GENERAL_BYTES", 40_000)  # (a file's page: some 60 KB)
    spy = _Spy(monkeypatch)
    assert ours.to_table(columns=["t"]).equals(theirs.to_table(columns=["t"]))
    assert spy.types == [] and spy.failed >= 1 and spy.alone >= FILES
