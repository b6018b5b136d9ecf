"""Scans of many 2.1/2.2 files whose pages of flat values (vectors, numbers) are read straight into
the columns' values (``v2_1.direct_flat``) read what pylance reads: files either library wrote,
nulls, deletions, a larger file beside small ones, filters, takes, a damaged chunk header named,
and a read past the end of a file. (A column of several pages is not batched at all.)"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.v2_1 import direct_flat, small_layouts
from lance_table.storage.scatter import read_into
from lance_table.storage.sources import LocalFileSource
from lance_table.table.readers import READERS

ROWS = 24_000
FRAGMENT_ROWS = 6_000  # a page of 16 floats a row: 384 KB, above direct_flat.MIN_PAGE_BYTES


def _table(rows: int = ROWS, nulls: bool = False) -> pa.Table:
    rng = np.random.default_rng(11)
    ids = np.arange(rows, dtype=np.int64)
    mask = (ids % 7 == 3) if nulls else None
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array(rng.random(rows)),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 16, dtype=np.float32)), 16),
            "wide": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 8)), 8),
            "maybe": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(rows * 16, dtype=np.float32)),
                16,
                mask=None if mask is None else pa.array(mask),
            ),
            "text": pa.array([f"t{i % 1000}" for i in range(rows)]),
        }
    )


@pytest.fixture
def reads(monkeypatch):
    """The columns (types) :func:`direct_flat.read` read, with whether it gave them."""
    seen: list[tuple[pa.DataType, bool]] = []
    real = direct_flat.read

    def spy(found, column, dtype, io):
        got = real(found, column, dtype, io)
        seen.append((dtype, got is not None))
        return got

    monkeypatch.setattr(direct_flat, "read", spy)
    return seen


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def written(request, tmp_path_factory):
    """Per writer, a dataset of four fragments (rows of the last: nulls in ``maybe``)."""
    version = request.param
    root = tmp_path_factory.mktemp(f"direct-{version}")
    out = {}
    for writer, lib in (("ours", lt), ("pylance", lance)):
        uri = str(root / writer)
        lib.write_dataset(_table(), uri, data_storage_version=version, max_rows_per_file=FRAGMENT_ROWS)
        nulls = _table(FRAGMENT_ROWS, nulls=True)
        lib.write_dataset(nulls, uri, mode="append", max_rows_per_file=FRAGMENT_ROWS)
        out[writer] = uri
    return out


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_scans_read_vectors_straight_into_their_values(written, writer, reads):
    uri = written[writer]
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    assert_tables_equal(ours.to_table(), theirs.to_table())
    for cols in (["vec"], ["id", "x", "vec"], ["vec", "wide"], ["maybe"], ["wide", "maybe", "text"]):
        reads.clear()
        assert_tables_equal(ours.to_table(columns=cols), theirs.to_table(columns=cols))
        if cols == ["vec", "wide"]:  # every file of both columns read straight into the values
            assert reads and all(ok for _, ok in reads)
            assert {t for t, _ in reads} == {pa.list_(pa.float32(), 16), pa.list_(pa.float64(), 8)}
    flt = "x < 0.3"
    assert_tables_equal(
        ours.to_table(columns=["id", "vec"], filter=flt), theirs.to_table(columns=["id", "vec"], filter=flt)
    )
    batches = list(ours.to_batches(columns=["vec"], batch_size=1000))
    assert_tables_equal(pa.Table.from_batches(batches), theirs.to_table(columns=["vec"]))


def test_pages_with_nulls_are_not_read_straight(written, reads):
    uri = written["pylance"]
    got = lt.dataset(uri).to_table(columns=["maybe"])
    assert_tables_equal(got, lance.dataset(uri).to_table(columns=["maybe"]))
    assert got.column("maybe").null_count == len(range(3, FRAGMENT_ROWS, 7))
    # the four files without nulls are read straight, the last (levels in its chunks) is not
    assert len(reads) == 1 and reads[0][1]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_scans_after_deletes_beside_a_larger_file(tmp_path, version, reads):
    uri = str(tmp_path / "ds")
    lance.write_dataset(_table(), uri, data_storage_version=version, max_rows_per_file=FRAGMENT_ROWS)
    # a file of 40k rows (pages of more chunks) beside files of 6k
    big = _table(40_000)
    lance.write_dataset(big, uri, mode="append", max_rows_per_file=40_000, max_bytes_per_file=1 << 40)
    lance.dataset(uri).delete("id % 11 = 4 AND id < 6000")  # the first fragment: rows deleted
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    for cols in (["vec"], ["id", "vec", "wide"], None):
        assert_tables_equal(ours.to_table(columns=cols), theirs.to_table(columns=cols))
    assert any(ok for _, ok in reads)
    picks = list(range(0, theirs.count_rows(), 37))
    assert_tables_equal(ours.take(picks, columns=["vec", "x"]), theirs.take(picks, columns=["vec", "x"]))


def test_our_dataset_reads_back_in_pylance(tmp_path, reads):
    uri = str(tmp_path / "ours")
    lt.write_dataset(_table(), uri, data_storage_version="2.2", max_rows_per_file=FRAGMENT_ROWS)
    expected = lance.dataset(uri).to_table()
    assert_tables_equal(expected, _table())
    assert_tables_equal(lt.dataset(uri).to_table(columns=["vec", "wide"]), expected.select(["vec", "wide"]))
    assert reads and all(ok for _, ok in reads)


def _vec_page(uri: str, fragment: int) -> tuple[Path, int]:
    """The data file of a fragment and where its ``vec`` page's first chunk starts."""
    ds = lt.dataset(uri)
    data_file = ds._snapshot.manifest.fragments[fragment].files[0]
    reader = READERS.get(ds._snapshot.storage, data_file)
    lay = small_layouts.layout(reader, ["vec"])
    assert lay is not None and lay.chunks > 1
    return Path(uri) / "data" / data_file.path, lay.start + lay.columns[0].data_at


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_a_damaged_chunk_header_is_named(tmp_path, version, reads):
    uri = str(tmp_path / "ds")
    lance.write_dataset(_table(), uri, data_storage_version=version, max_rows_per_file=FRAGMENT_ROWS)
    lt.dataset(uri).to_table(columns=["vec"])  # the chunk tables are kept with the readers
    path, at = _vec_page(uri, 2)
    raw = bytearray(path.read_bytes())
    raw[at + 2 : at + 4] = b"\x00\x00"  # the first chunk's values: none
    path.write_bytes(bytes(raw))
    reads.clear()
    with pytest.raises(CorruptFileError, match=path.name):
        lt.dataset(uri).to_table(columns=["vec"])
    assert reads and not reads[0][1]  # the batch was read the usual way, which names the file


def test_reads_into_buffers_past_the_end_of_a_file_are_named(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(100)))
    source = LocalFileSource(path)
    head, tail = bytearray(3), bytearray(5)
    read_into(source, [(10, [memoryview(head), memoryview(tail)])])
    assert bytes(head) == bytes([10, 11, 12]) and bytes(tail) == bytes(range(13, 18))
    with pytest.raises(CorruptFileError, match=r"f\.bin"):
        read_into(source, [(96, [memoryview(head), memoryview(tail)])])


def test_local_spans_are_read_straight_into_their_places(written, monkeypatch):
    from lance_table.file.v2_1 import small_many
    from lance_table.table import fragment_batch, fragment_reads

    ds = lt.dataset(written["pylance"])
    ds.to_table()  # (the readers' opening bytes have served their first read)
    frags = list(ds._snapshot.fragment_readers())
    found = fragment_batch.plans(frags, ["id", "x"])
    assert all(p is not None for p in found)
    expected, bases = small_many.joined(fragment_reads.spans(frags, found))  # type: ignore[arg-type]

    def no_spans(*args):
        raise AssertionError("local spans are read into their places, not one by one")

    monkeypatch.setattr(fragment_reads, "spans", no_spans)
    got, got_bases = fragment_reads.joined_spans(frags, found)  # type: ignore[arg-type]
    assert bytes(got) == bytes(expected) and got_bases.tolist() == bases.tolist()
    assert_tables_equal(
        ds.to_table(columns=["id", "x"]), lance.dataset(written["pylance"]).to_table(columns=["id", "x"])
    )


def test_a_vector_file_gone_is_named(tmp_path, reads):
    from lance_table.errors import DataFileNotFoundError

    uri = str(tmp_path / "ds")
    lance.write_dataset(_table(), uri, data_storage_version="2.2", max_rows_per_file=FRAGMENT_ROWS)
    lt.dataset(uri).to_table(columns=["vec"])  # the readers (and chunk tables) are kept
    path, _ = _vec_page(uri, 1)
    path.unlink()
    with pytest.raises(DataFileNotFoundError, match=path.name):
        lt.dataset(uri).to_table(columns=["vec"])
