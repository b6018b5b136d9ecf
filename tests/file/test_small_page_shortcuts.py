"""Shortcuts of the 2.1/2.2 writer for pages of one mini-block chunk (a small append's pages) and
one bitpacking block: each gives the bytes the general path gives, pylance reads what they write,
and an append leaves no reference cycle behind for the garbage collector."""

from __future__ import annotations

import gc
import io
import itertools

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.file.compression import bitpacking, dictionary
from lance_table.file.v2_1 import level_compress


def _chunk_bytes(chunks: level_compress.LevelChunks, k: int) -> bytes:
    at, size = int(chunks.starts[k]), int(chunks.lengths[k])
    return chunks.data[at : at + size].tobytes()


@pytest.mark.parametrize("kind", ["rle", "inline"])
def test_one_chunk_levels_are_the_first_chunk_of_many(kind: str) -> None:
    """A page of one chunk compresses its levels as the general path compresses the same levels
    as the first of several chunks (each chunk's levels are compressed on their own)."""
    rng = np.random.default_rng(5)
    for n in (1, 3, 100, 255, 256, 700, 1024):
        for top in (0, 1, 5, 300):
            levels = rng.integers(0, top + 1, n).astype(np.uint16)
            if n > 10:
                levels[: n // 2] = levels[0]  # a long run
            more = np.concatenate([levels, rng.integers(0, top + 1, 50).astype(np.uint16)])
            codec = level_compress.LevelCodec(kind)
            one = level_compress.compress_chunks(levels, np.array([0, n]), codec)
            many = level_compress.compress_chunks(more, np.array([0, n, n + 50]), codec)
            assert _chunk_bytes(one, 0) == _chunk_bytes(many, 0), (kind, n, top)


def test_one_block_packing_matches_block_by_block(monkeypatch) -> None:
    """Packing a block by one ``reduceat`` gives the words the field-by-field ORs give, and the
    one-block inline form is the many-block one's first block; bit widths of a few values counted
    in Python are numpy's."""
    rng = np.random.default_rng(6)
    for t in (8, 16, 32, 64):
        dtype = bitpacking.DTYPES[t]
        for w in range(t + 1):
            values = rng.integers(0, 2**w - 1, 1500, dtype=np.uint64, endpoint=True).astype(dtype)
            fast = [bitpacking.pack(values[:n], w) for n in (100, 1024, 1500)]
            first = bitpacking.pack_inline(values[:100])
            monkeypatch.setattr(bitpacking, "_REDUCE_BLOCKS", 0)
            slow = [bitpacking.pack(values[:n], w) for n in (100, 1024, 1500)]
            monkeypatch.undo()
            assert all(np.array_equal(a, b) for a, b in zip(fast, slow)), (t, w)
            two = np.concatenate([values[:100], np.zeros(924, dtype), values[:1024]])
            assert np.array_equal(first, bitpacking.pack_inline(two)[: first.size]), (t, w)
        ors = rng.integers(0, 2**t - 1, 40, dtype=np.uint64, endpoint=True).astype(dtype)
        for n in (1, 16, 17, 40):
            few = bitpacking.bit_lengths(ors[:n], t)
            assert few.dtype == np.int64
            assert few.tolist() == [int(x).bit_length() for x in ors[:n].tolist()]


def test_dictionary_indices_of_nulls_are_zero() -> None:
    """Null values get index 0 (read off the validity bitmap), sliced arrays too."""
    values = pa.array(["b", None, "a", "b", None, "c", "a"])
    for arr in (values, values.slice(1), values.slice(2, 4)):
        items, indices = dictionary.encode(arr)
        assert indices.dtype == np.uint32
        expect = [0 if v is None else items.to_pylist().index(v) for v in arr.to_pylist()]
        assert indices.tolist() == expect


@pytest.mark.interop
def test_small_appends_read_by_pylance(tmp_path) -> None:
    """Appends of one-chunk pages of every shortcut (lists with nulls and empty lists, structs
    with nulls, RLE levels, booleans, dictionaries and constants) read back the same by pylance."""
    lance = pytest.importorskip("lance")
    rng = np.random.default_rng(7)
    tables = []
    for k, n in enumerate((1, 2, 100, 255, 300)):
        ids = np.arange(n) + 1000 * k
        tables.append(
            pa.table(
                {
                    "id": ids,
                    "const": pa.array(["same"] * n),
                    "cat": pa.array(np.array(["x", "y"])[rng.integers(0, 2, n)], mask=rng.random(n) < 0.2),
                    "flag": pa.array(rng.random(n) < 0.5, mask=rng.random(n) < 0.2),
                    "s": pa.StructArray.from_arrays(
                        [pa.array(ids * 2), pa.array([f"u{i % 7}" for i in ids.tolist()])],
                        ["a", "b"],
                        mask=pa.array(rng.random(n) < 0.1),
                    ),
                    "tags": pa.array(
                        [None if i % 5 == 0 else ["p", "q", "r"][: i % 4] for i in ids.tolist()],
                        pa.list_(pa.string()),
                    ),
                }
            )
        )
    uri = str(tmp_path / "ds")
    for k, table in enumerate(tables):
        lt.write_dataset(table, uri, mode="append" if k else "create", data_storage_version="2.2")
    expected = pa.concat_tables(tables)
    assert lance.dataset(uri).to_table().equals(expected)
    assert lt.dataset(uri).to_table().equals(expected)


def test_append_leaves_no_reference_cycles(tmp_path) -> None:
    """An append frees what it made by reference counting: nothing of lance_table's waits for the
    garbage collector (whose full passes a stream of small appends would pay for)."""
    table = pa.table(
        {
            "id": np.arange(10),
            "s": pa.StructArray.from_arrays([pa.array(np.arange(10)), pa.array(["a"] * 10)], ["x", "y"]),
            "l": pa.array([["a"]] * 10, pa.list_(pa.string())),
        }
    )
    uri = str(tmp_path / "ds")
    lt.write_dataset(table, uri, data_storage_version="2.2")
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        lt.write_dataset(table, uri, mode="append", data_storage_version="2.2")
        gc.collect()
        ours = [
            o
            for o in gc.garbage
            if (getattr(type(o), "__module__", "") or "").startswith("lance_table")
            or (getattr(o, "__module__", "") or "").startswith("lance_table")
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not ours, sorted({type(o).__qualname__ for o in ours})


def _batches(rows: int, sizes: list[int]) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(8)
    ids = np.arange(rows)
    table = pa.table(
        {
            "id": ids,
            "cat": pa.array(np.array(["x", "y", "z"])[rng.integers(0, 3, rows)], mask=rng.random(rows) < 0.2),
            "s": pa.StructArray.from_arrays(
                [pa.array(ids * 2), pa.array([f"u{i % 7}" for i in ids.tolist()])],
                ["a", "b"],
                mask=pa.array(rng.random(rows) < 0.1),
            ),
            "tags": pa.array(
                [None if i % 5 == 0 else ["p", "qq", "r"][: i % 4] for i in ids.tolist()],
                pa.list_(pa.string()),
            ),
        }
    )
    bounds = np.cumsum([0, *sizes])
    return [table.slice(a, b - a).to_batches()[0] for a, b in itertools.pairwise(bounds) if b > a]


@pytest.mark.parametrize("page_size", [1 << 20, 30000, 6000])
def test_write_many_is_writing_one_by_one(page_size: int) -> None:
    """Batches written together make the file writing them one by one makes, whether or not
    pages fill among them (then they go one by one, grouped rows pending before them re-cut)."""
    from lance_table.file.writer import LanceFileWriter

    sizes = [100, 1, 57, 0, 300, 42] * 8
    batches = _batches(sum(sizes), sizes)
    files = []
    for together in (False, True):
        sink = io.BytesIO()
        with LanceFileWriter(sink, batches[0].schema, version="2.2", page_size_bytes=page_size) as writer:
            if together:
                writer.write_many(batches[:10])
                writer.write(batches[10])
                writer.write_many(batches[11:])
            else:
                for batch in batches:
                    writer.write(batch)
        files.append(sink.getvalue())
    assert files[0] == files[1]


def test_leaves_encoded_on_threads_are_written_in_column_order(monkeypatch) -> None:
    """A struct's leaves encoded on threads write their pages in column order, whichever thread
    finishes first: the file is the one encoding on the calling thread makes (a slow first leaf,
    many distinct strings, and a quick second one, a constant)."""
    from lance_table.file import writer as file_writer

    n = 20_000
    payload = pa.StructArray.from_arrays(
        [pa.array([f"some text {i * 7919 % 100_003}" for i in range(n)]), pa.array(np.zeros(n, np.int64))],
        ["text", "zero"],
    )
    table = pa.table({"p": payload})
    files = []
    for inline in (1 << 30, 0):  # every batch on this thread; every batch on the pool
        monkeypatch.setattr(file_writer, "INLINE_ENCODE_BYTES", inline)
        sink = io.BytesIO()
        with file_writer.LanceFileWriter(sink, table.schema, version="2.2") as writer:
            writer.write(table)
        files.append(sink.getvalue())
    assert files[0] == files[1]
