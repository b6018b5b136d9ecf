"""Scattered rows of many local files' pages of flat values (vectors, floats) copied straight out
of maps of the files (:mod:`mapped_take`), as a filter of a living table's fragments reads them.
Rows, nulls, strings and deletions (by either library) are pylance's, on files either library
wrote, in 2.1 and 2.2, for filters selecting no row, every row and scattered rows; a spy checks
that the mapped path ran; a damaged chunk header is reported naming its file."""

from __future__ import annotations

import struct
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
from lance_table.file.v2_1 import mapped_take, small_layouts, small_many
from lance_table.table import fragment_batch
from lance_table.table.fragment import FragmentReader
from tests.helpers import shuffled_rows

ROWS = 4_000  # rows per file: pages of a few dozen chunks

# (autouse: readers and deletions not kept, no page small enough to be read whole by a take)
from tests.table.test_fragment_batch_take import _setup  # noqa: E402, F401


@pytest.fixture(autouse=True)
def _mapped(monkeypatch: pytest.MonkeyPatch) -> None:
    # files "too large" to share a batch of whole pages (here: 4k rows stand for 20k-row
    # fragments), and every column of flat values read through the maps however few its chunks
    monkeypatch.setattr(fragment_batch, "BATCH_BYTES", 1 << 12)
    monkeypatch.setattr(mapped_take, "MAPPED_CHUNK_BYTES", 0)


def _table(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    vec = rng.random((n, 16), dtype=np.float32)
    vec[:, 0] = ids  # a vector beside the wrong id shows
    return pa.table(
        {
            "id": ids,
            "x": rng.random(n),
            "f": pa.array(rng.random(n).astype(np.float32)),
            "n": pa.array(rng.random(n), mask=ids % 11 == 0),  # nulls: not mapped, read beside
            "text": pa.array([f"row {i} {'ab' * (i % 7)}" for i in ids.tolist()], mask=ids % 13 == 0),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), 16),
            "small": pa.FixedSizeListArray.from_arrays(pa.array(ids.repeat(2).astype(np.int16)), 2),
        }
    )


def _datasets(tmp_path: Path, writer: str, version: str) -> tuple[Any, Any]:
    return mixed_writer_datasets(tmp_path, writer, version, _table, ROWS)


class _Spy:
    """Counts the columns the mapped path gave (and the rows), its refusals, and the fragments
    read one by one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.columns = self.rows = self.refused = self.alone = 0
        gather, frag_read = mapped_take.gather, FragmentReader.read

        def spied_gather(*args: Any, **kwargs: Any) -> Any:
            got = gather(*args, **kwargs)
            self.refused += got is None
            if got is not None:
                self.columns += 1
                self.rows += len(got)
            return got

        def spied_frag_read(frag: FragmentReader, *args: Any, **kwargs: Any) -> Any:
            self.alone += 1
            return frag_read(frag, *args, **kwargs)

        monkeypatch.setattr(mapped_take, "gather", spied_gather)
        monkeypatch.setattr(FragmentReader, "read", spied_frag_read)


FILTERS = ["x < 0.1", "x < 0.5 AND f > 0.3", "x < 0", "x >= 0", "id % 97 = 3"]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("writer", ["pylance", "lance_table", "both"])
def test_filters_match_pylance(
    tmp_path: Path, writer: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = _datasets(tmp_path, writer, version)
    spy = _Spy(monkeypatch)
    for flt in FILTERS:
        want = theirs.to_table(filter=flt)
        assert ours.to_table(filter=flt).equals(want), flt
        for cols in (["vec"], ["id", "vec", "small"], ["text", "n", "vec", "x"]):
            got = ours.to_table(columns=cols, filter=flt)
            assert got.equals(theirs.to_table(columns=cols, filter=flt)), (flt, cols)
    assert spy.refused == 0
    assert spy.columns >= 10 and spy.rows >= 2 * ROWS  # (the scattered filters' vectors, floats)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("deleter", ["pylance", "lance_table"])
@pytest.mark.parametrize("writer", ["pylance", "lance_table"])
def test_filters_after_deletions_match_pylance(
    tmp_path: Path, writer: str, deleter: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = _datasets(tmp_path, writer, version)
    flt = "id % 5 = 1 OR (id > 4100 AND id < 7000)"
    (ours if deleter == "lance_table" else lance.dataset(ours.uri)).delete(flt)
    theirs.delete(flt)
    ours, theirs = lt.dataset(ours.uri), lance.dataset(theirs.uri)
    spy = _Spy(monkeypatch)
    for query in FILTERS:
        assert ours.to_table(filter=query).equals(theirs.to_table(filter=query)), query
        cols = ["vec", "id", "f"]
        got = ours.to_table(columns=cols, filter=query, with_row_id=True)
        assert got.equals(theirs.to_table(columns=cols, filter=query, with_row_id=True)), query
    assert spy.refused == 0 and spy.columns >= 4


def test_take_reads_vectors_through_maps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = _datasets(tmp_path, "lance_table", "2.2")
    idx = shuffled_rows(theirs.count_rows(), 3000, 5)
    spy = _Spy(monkeypatch)
    assert ours.take(idx, columns=["vec", "id", "f"]).equals(theirs.take(idx, columns=["vec", "id", "f"]))
    assert spy.columns >= 2 and spy.refused == 0
    # a few rows, one to a chunk: their chunks are read, not the maps
    spy.columns = 0
    idx = shuffled_rows(theirs.count_rows(), 40, 6)
    assert ours.take(idx, columns=["vec", "f"]).equals(theirs.take(idx, columns=["vec", "f"]))
    assert spy.columns == 0 and spy.refused == 0


def test_large_reads_only_are_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapped_take, "MAPPED_CHUNK_BYTES", 1 << 40)
    ours, theirs = _datasets(tmp_path, "lance_table", "2.2")
    spy = _Spy(monkeypatch)
    assert ours.to_table(filter="x < 0.1").equals(theirs.to_table(filter="x < 0.1"))
    assert spy.columns == 0 and spy.refused == 0


def _vector_page(path: str) -> tuple[int, int, small_layouts.ColumnLayout]:
    """Where the vector page's chunks start in the file, and its layout."""
    lay = small_layouts.layout(LanceFileReader(path), ["vec"])
    assert lay is not None
    col = lay.columns[0]
    assert isinstance(col, small_layouts.ColumnLayout) and col.chunks > 1
    assert mapped_take.row_bits([col]) == (32, 16)
    return lay.start + col.meta_at, lay.start + col.data_at, col


@pytest.mark.parametrize("field", ["size", "chunk"])
def test_damaged_chunk_names_the_file(tmp_path: Path, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, _ = _datasets(tmp_path, "lance_table", "2.2")
    frag = ours.get_fragments()[2]
    path = str(tmp_path / "ours" / "data" / frag.data_files()[0].path)
    meta_at, data_at, col = _vector_page(path)
    raw = bytearray(Path(path).read_bytes())
    word = 4 if col.page.large else 2
    if field == "size":  # the first chunk's value size: past its chunk
        raw[data_at + 2 : data_at + 2 + word] = b"\xff" * word
    else:  # the first chunk's table entry: a chunk of 8 bytes, shorter than its values
        table = np.frombuffer(bytes(raw[meta_at : meta_at + word * col.chunks]), f"<u{word}")
        assert int(table[0]) >> 4 > 0
        struct.pack_into(f"<{'I' if word == 4 else 'H'}", raw, meta_at, int(table[0]) & 0xF)
    Path(path).write_bytes(bytes(raw))
    spy = _Spy(monkeypatch)
    with pytest.raises(CorruptFileError) as err:
        lt.dataset(ours.uri).to_table(columns=["vec", "f"], filter="x < 0.1")
    assert frag.data_files()[0].path in str(err.value)
    assert spy.refused >= 1 or spy.columns == 0  # the mapped path gave up; file by file says why
    assert spy.alone >= 2


def test_gather_refuses_chunks_outside_the_file(tmp_path: Path) -> None:
    ours, _ = _datasets(tmp_path, "lance_table", "2.2")
    path = str(tmp_path / "ours" / "data" / ours.get_fragments()[0].data_files()[0].path)
    _, data_at, col = _vector_page(path)
    raw = np.frombuffer(Path(path).read_bytes(), np.uint8)
    words = raw[data_at - (col.data_at - col.meta_at) :]
    table = small_many.chunk_tables(
        words,
        np.zeros(1, np.int64),
        np.zeros(1, np.int64),
        np.array([col.data_size]),
        np.array([col.chunks]),
        np.array([ROWS]),
        4 if col.page.large else 2,
    )
    assert table is not None
    chosen = np.arange(col.chunks)
    local = np.array([0, 5, ROWS - 1])
    page_at = np.array([data_at])
    dtype = pa.list_(pa.float32(), 16)
    io = None
    got = mapped_take.gather([col], page_at, table, chosen, local, [raw], dtype, io)  # type: ignore[arg-type]
    assert got is not None and got.to_pylist()[1][0] == 5.0
    # the file cut short: its last chunk lies outside it
    assert mapped_take.gather([col], page_at, table, chosen, local, [raw[:-100_000]], dtype, io) is None  # type: ignore[arg-type]
    # rows past the chunks' values
    past = np.array([ROWS])
    assert mapped_take.gather([col], page_at, table, chosen, past, [raw], dtype, io) is None  # type: ignore[arg-type]
