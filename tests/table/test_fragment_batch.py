"""Many small fragments read as batches (one numpy pass per column over many files): the same
rows, row ids, filters, takes, deletes and compactions as pylance, on files either library
wrote, and the same errors as a read fragment by fragment when a file is damaged or gone."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CorruptFileError, DataFileNotFoundError
from lance_table.file.v2_1 import small_layouts, small_many
from lance_table.table import fragment_batch
from lance_table.table.readers import READERS

pytestmark = pytest.mark.usefixtures("empty_caches")


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    nulls = rng.random(n) < 0.2
    words = ["alpha", "beta", "gamma-gamma", "delta" * 5, ""]
    text = [None if k else f"{words[i % 5]}-{i}" for i, k in zip(ids.tolist(), nulls.tolist())]
    return pa.table(
        {
            "id": ids,
            "x": pa.array(ids * 0.5, mask=rng.random(n) < 0.1),
            "small": pa.array(rng.integers(-50, 50, n).astype(np.int32), mask=rng.random(n) < 0.3),
            "s": pa.array(text, pa.string()),
            "flag": pa.array(rng.random(n) < 0.5),
            "big": pa.array(rng.integers(0, 2**40, n).astype(np.int64)),
        }
    )


def _build(uri: str, version: str, appends: int = 24) -> None:
    """Appends alternating between the two libraries, of varying sizes (some empty-ish)."""
    start = 0
    for i in range(appends):
        n = [1, 37, 100, 5, 250][i % 5]
        data = _rows(start, n, i)
        mode = "append" if i else "create"
        if i % 3 == 1:
            lance.write_dataset(data, uri, mode=mode, data_storage_version=version)
        else:
            lt.write_dataset(data, uri, mode=mode, data_storage_version=version)
        start += n


@pytest.fixture(params=["2.1", "2.2"])
def many(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    uri = str(tmp_path / "ds")
    _build(uri, request.param)
    return uri


def test_the_fragments_are_read_as_batches(many: str) -> None:
    ds = lt.dataset(many)
    frags = ds._snapshot.fragment_readers()
    # pages of one row may be constant pages (a null, or pylance's 2.2 pages of one value): their
    # fragments are read on their own; every other fragment is read in a batch
    single = sum(f.fragment.physical_rows == 1 for f in frags)
    for columns in (["id", "big"], ["id", "x", "small", "s"]):
        assert fragment_batch.plans(frags, columns).count(None) <= single


def test_scans_filters_and_takes_equal_pylance(many: str) -> None:
    ours, theirs = lt.dataset(many), lance.dataset(many)
    assert ours.to_table().equals(theirs.to_table())
    assert ours.to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))
    for flt in ["id >= 300 AND id < 420", "small > 10", "s LIKE 'beta%'", "x IS NULL", "big < 1000000000"]:
        got = ours.to_table(filter=flt, with_row_id=True)
        assert got.equals(theirs.to_table(filter=flt, with_row_id=True)), flt
        cols = ["s", "id"]
        assert ours.to_table(columns=cols, filter=flt).equals(theirs.to_table(columns=cols, filter=flt))
    n = theirs.count_rows()
    picks = [*np.random.default_rng(3).choice(n, 200, replace=False).tolist(), 0, n - 1, 0]
    assert ours.take(picks).equals(theirs.take(picks))
    assert ours.take(picks, columns=["big", "s"]).equals(theirs.take(picks, columns=["big", "s"]))


def test_deletes_then_scans_and_compaction_equal_pylance(many: str, tmp_path: Path) -> None:
    copy = str(tmp_path / "copy")
    shutil.copytree(many, copy)
    lt.dataset(many).delete("id % 7 = 3 OR small < -40")
    lance.dataset(copy).delete("id % 7 = 3 OR small < -40")
    ours, theirs = lt.dataset(many), lance.dataset(copy)
    assert ours.count_rows() == theirs.count_rows()
    assert ours.to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))
    flt = "id > 100 AND id < 900"
    assert ours.to_table(filter=flt, with_row_id=True).equals(theirs.to_table(filter=flt, with_row_id=True))
    picks = list(range(0, theirs.count_rows(), 7))
    assert ours.take(picks).equals(theirs.take(picks))
    expected = theirs.to_table()
    lt.dataset(many).compact_files()
    assert len(lance.dataset(many).get_fragments()) == 1
    assert lance.dataset(many).to_table().equals(expected)
    assert lt.dataset(many).to_table().equals(expected)


def _data_file(uri: str, fragment: int) -> Path:
    frag = lt.dataset(uri)._snapshot.manifest.fragments[fragment]
    return Path(uri) / "data" / frag.files[0].path


def test_a_damaged_file_among_many_is_named(many: str) -> None:
    ds = lt.dataset(many)
    ds.to_table()  # the readers (footers) are cached: only the page bytes change below
    reader = READERS.get(ds._snapshot.storage, ds._snapshot.manifest.fragments[12].files[0])
    lay = small_layouts.layout(reader, ["id"])
    assert lay is not None
    path = _data_file(many, 12)
    raw = bytearray(path.read_bytes())
    at = lay.start + lay.columns[0].meta_at  # the chunk table: a chunk longer than its page
    raw[at : at + 2] = b"\xff\xff"
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(many).to_table()
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(many).to_table(filter="id > 3")


def test_a_file_gone_among_many_is_named(many: str) -> None:
    lt.dataset(many).to_table()
    path = _data_file(many, 9)
    path.unlink()
    with pytest.raises(DataFileNotFoundError, match=path.name):
        lt.dataset(many).to_table()
    with pytest.raises(DataFileNotFoundError, match=path.name):
        lt.dataset(many).delete("id = 3")


def test_system_columns_of_batches_equal_pylance(many: str, tmp_path: Path) -> None:
    copy = str(tmp_path / "copy")
    shutil.copytree(many, copy)
    lt.dataset(many).delete("id % 5 = 1")
    lance.dataset(copy).delete("id % 5 = 1")
    ours, theirs = lt.dataset(many), lance.dataset(copy)
    cols = ["_rowaddr", "id", "_rowid", "_rowoffset"]
    assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols))
    for flt in ["id > 200 AND id < 700", "_rowaddr > 8589934592"]:
        got = ours.to_table(columns=["s", "_rowaddr", "_rowoffset"], filter=flt)
        assert got.equals(theirs.to_table(columns=["s", "_rowaddr", "_rowoffset"], filter=flt)), flt
    picks = list(range(0, theirs.count_rows(), 11))
    assert ours.take(picks, columns=["id", "_rowaddr"]).equals(theirs.take(picks, columns=["id", "_rowaddr"]))


@pytest.fixture(params=["2.1", "2.2"])
def midsize(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Fragments of 5,000 rows, written by either library: pages of many mini-block chunks."""
    uri = str(tmp_path / "mid")
    for i in range(4):
        data = _rows(i * 5000, 5000, 40 + i)
        mode = "append" if i else "create"
        write = lance.write_dataset if i % 2 else lt.write_dataset
        write(data, uri, mode=mode, data_storage_version=request.param)
    return uri


def test_fragments_of_many_chunks_are_batched_for_filters_and_deletes(midsize: str, tmp_path: Path) -> None:
    ds = lt.dataset(midsize)
    frags = ds._snapshot.fragment_readers()
    plans = fragment_batch.plans(frags, ["id", "small", "x"])
    assert all(p is not None for p in plans) and max(p[1].chunks for p in plans if p) > 1
    # a read of most rows is batched, a take of a few is not (its rows are picked file by file)
    assert fragment_batch.batchable(plans[1], 4000) and not fragment_batch.batchable(plans[1], 30)
    ours, theirs = lt.dataset(midsize), lance.dataset(midsize)
    for flt in ["id >= 4990 AND id < 5020", "id = 12345", "small > 40", "x IS NULL", "x < 100 AND small = 3"]:
        for cols in (None, ["s", "id"]):
            got = ours.to_table(columns=cols, filter=flt, with_row_id=True)
            assert got.equals(theirs.to_table(columns=cols, filter=flt, with_row_id=True)), flt
    picks = [0, 4999, 5000, 7777, 19999, 12]
    assert ours.take(picks).equals(theirs.take(picks))
    copy = str(tmp_path / "copy")
    shutil.copytree(midsize, copy)
    lt.dataset(midsize).delete("id % 9 = 4 OR small < -45")
    lance.dataset(copy).delete("id % 9 = 4 OR small < -45")
    ours, theirs = lt.dataset(midsize), lance.dataset(copy)
    assert ours.to_table(with_row_id=True).equals(theirs.to_table(with_row_id=True))
    assert lance.dataset(midsize).to_table().equals(theirs.to_table())
    flt = "id > 3000 AND id < 16000 AND small >= 0"
    assert ours.to_table(filter=flt, with_row_id=True).equals(theirs.to_table(filter=flt, with_row_id=True))


def test_a_damaged_chunk_table_of_many_chunks_is_named(midsize: str) -> None:
    ds = lt.dataset(midsize)
    ds.to_table()
    reader = READERS.get(ds._snapshot.storage, ds._snapshot.manifest.fragments[1].files[0])
    lay = small_layouts.layout(reader, ["id"])
    assert lay is not None and lay.chunks > 1
    path = _data_file(midsize, 1)
    raw = bytearray(path.read_bytes())
    at = lay.start + lay.columns[0].meta_at + 2  # the first chunk: far longer than its page
    raw[at : at + 2] = b"\xff\xff"
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(midsize).to_table(filter="id > 3")
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(midsize).delete("id = 7000")


def test_booleans_of_many_files_decode_in_one_pass(many: str) -> None:
    ds = lt.dataset(many)
    frags = [f for f in ds._snapshot.fragment_readers() if f.fragment.physical_rows > 1]
    found = fragment_batch.plans(frags, ["flag"])
    assert all(p is not None for p in found)
    spans = [reader.read_span(lay.start, lay.length) for reader, lay in found]
    data, bases = small_many.joined(spans)
    io = small_many.PageIO(found[0][0]._stored, None, None, (), "test")
    got = small_many.decode([lay for _, lay in found], data, bases, 0, pa.bool_(), io)
    assert got is not None  # (odd row counts: the bits of each file are moved into place)
    theirs = lance.dataset(many).get_fragments()
    expected = pa.concat_arrays(
        [f.to_table(columns=["flag"]).column(0).combine_chunks() for f in theirs if f.count_rows() > 1]
    )
    assert got.equals(expected)


def test_batches_bounded_in_bytes_read_as_pylance(many: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny bounds: batches of a few files, each file's bytes copied into the joined buffer one by
    # one (the paths of large files)
    monkeypatch.setattr(fragment_batch, "BATCH_BYTES", 6000)
    monkeypatch.setattr(small_many, "JOIN_BY_COPY_BYTES", 0)
    ours, theirs = lt.dataset(many), lance.dataset(many)
    assert ours.to_table().equals(theirs.to_table())
    flt = "small > 10"
    assert ours.to_table(columns=["s", "id"], filter=flt).equals(
        theirs.to_table(columns=["s", "id"], filter=flt)
    )


def test_files_over_the_batch_bound_read_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pylance's FSST strings in files whose column spans exceed BATCH_BYTES: no batch joins them
    # (it would hold their bytes and values twice); the small files after them still batch
    rows = 100_000
    rng = np.random.default_rng(4)
    letters = rng.integers(ord("a"), ord("z") + 1, rows * 24, dtype=np.uint8)
    offsets = pa.py_buffer((np.arange(rows + 1, dtype=np.int32) * 24).tobytes())
    text = pa.Array.from_buffers(pa.string(), rows, [None, offsets, pa.py_buffer(letters.tobytes())])
    big = pa.table({"id": np.arange(rows, dtype=np.int64), "text": text})
    uri = str(tmp_path / "big")
    lance.write_dataset(big, uri, max_rows_per_file=rows // 2, data_storage_version="2.2")
    for k in range(4):
        lance.write_dataset(big.slice(k * 10, 10), uri, mode="append", data_storage_version="2.2")
    batches: list[tuple[int, list[str]]] = []
    real = fragment_batch._read_batch

    def spy(frags, found, names, *args, **kwargs):  # type: ignore[no-untyped-def]
        batches.append((len(frags), names))
        return real(frags, found, names, *args, **kwargs)

    monkeypatch.setattr(fragment_batch, "_read_batch", spy)
    # the four small appends' text in a batch, each large file's alone; with the ids, these are
    # small enough to batch across all six files by themselves, read beside the text
    for columns, expected in ((["text"], [(4, ["text"])]), (None, [(6, ["id"]), (4, ["text"])])):
        batches.clear()
        ours = lt.dataset(uri).to_table(columns=columns)
        assert ours.equals(lance.dataset(uri).to_table(columns=columns))
        assert batches == expected
