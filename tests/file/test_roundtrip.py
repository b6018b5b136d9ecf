"""Our writer and our reader agree on every type, page layout and read path."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal
from typecases import compression_cases, type_cases

from lance_table.errors import SchemaError, UnsupportedFormatError
from lance_table.file import write_table
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter

ALL_CASES = {**type_cases(), **compression_cases()}


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_round_trip_every_type(tmp_path, name):
    table = ALL_CASES[name]
    path = tmp_path / "f.lance"
    written = write_table(path, table)
    assert written.num_rows == table.num_rows
    assert written.size == path.stat().st_size
    reader = LanceFileReader(path)
    assert reader.num_rows == table.num_rows
    assert reader.version == "2.0"
    assert reader.schema.equals(table.schema, check_metadata=True)
    assert_tables_equal(reader.read_all(), table)


def _wide_table(n: int, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    null = rng.random(n) < 0.2
    return pa.table(
        {
            "id": pa.array(np.arange(n)),
            "x": pa.array(rng.random(n), mask=null),
            "s": pa.array([f"row-{i}" * (i % 3) for i in range(n)], mask=null),
            "b": pa.array(rng.random(n) < 0.5, mask=null),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 3).astype(np.float32)), 3),
            "l": pa.array([list(range(i % 5)) if i % 11 else None for i in range(n)], pa.list_(pa.int32())),
            "ls": pa.array(
                [[{"k": i, "t": str(i)}] * (i % 3) for i in range(n)],
                pa.list_(pa.struct([("k", pa.int64()), ("t", pa.string())])),
            ),
            "st": pa.StructArray.from_arrays(
                [pa.array(np.arange(n) * 2), pa.array(rng.random(n))], names=["p", "q"]
            ),
            "d": pa.array([["a", "b", "c"][i % 3] for i in range(n)]).dictionary_encode(),
        }
    )


@pytest.fixture(scope="module")
def multipage(tmp_path_factory):
    """A file whose columns have many pages with unaligned boundaries (tiny page budget)."""
    table = _wide_table(5000)
    path = tmp_path_factory.mktemp("mp") / "multi.lance"
    with LanceFileWriter(path, table.schema, page_size_bytes=3000, max_page_bytes=1000) as w:
        for batch in table.to_batches(max_chunksize=777):
            w.write(batch)
    return path, table


def test_multipage_file_has_many_unaligned_pages(multipage):
    path, table = multipage
    reader = LanceFileReader(path)
    pages = [len(c.pages) for c in reader.metadata.columns]
    assert min(pages) >= 1 and max(pages) > 10
    # the list offsets column and its item column break at different rows
    starts = [np.cumsum([p.length for p in c.pages]) for c in reader.metadata.columns]
    assert any(len(a) != len(b) or not np.array_equal(a, b) for a, b in itertools.pairwise(starts))
    assert_tables_equal(reader.read_all(), table)


@pytest.mark.parametrize(
    "start,stop", [(0, 1), (0, 5000), (1, 2), (777, 1554), (4999, 5000), (1234, 4321), (10, 10)]
)
def test_read_range(multipage, start, stop):
    path, table = multipage
    got = LanceFileReader(path).read_range(start, stop)
    assert_tables_equal(got, table.slice(start, stop - start))


def test_take_unsorted_with_duplicates(multipage):
    path, table = multipage
    rng = np.random.default_rng(7)
    idx = rng.integers(0, table.num_rows, 300)
    idx = np.concatenate([idx, idx[:20], [0, table.num_rows - 1, 0]])
    got = LanceFileReader(path).take(idx)
    assert_tables_equal(got, table.take(pa.array(idx)))


def test_take_sorted_and_projection(multipage):
    path, table = multipage
    idx = np.arange(0, table.num_rows, 97)
    got = LanceFileReader(path).take(idx, columns=["s", "l", "id"])
    assert_tables_equal(got, table.select(["s", "l", "id"]).take(pa.array(idx)))


def test_take_rejects_out_of_range(multipage):
    path, table = multipage
    reader = LanceFileReader(path)
    with pytest.raises(IndexError):
        reader.take([table.num_rows])
    with pytest.raises(IndexError):
        reader.take([-1])
    assert reader.take([]).num_rows == 0


@pytest.mark.parametrize("batch_size", [1000, 4096, 10_000])
def test_iter_batches(multipage, batch_size):
    path, table = multipage
    batches = list(LanceFileReader(path).iter_batches(batch_size=batch_size, columns=["x", "ls", "st"]))
    assert all(b.num_rows <= batch_size for b in batches)
    assert len(batches) == -(-table.num_rows // batch_size)
    assert_tables_equal(pa.Table.from_batches(batches), table.select(["x", "ls", "st"]))


def test_to_reader_streams_whole_file(multipage):
    path, table = multipage
    reader = LanceFileReader(path).to_reader(batch_size=512)
    assert isinstance(reader, pa.RecordBatchReader)
    assert_tables_equal(reader.read_all(), table)


def test_unknown_column_is_a_clear_error(multipage):
    path, _ = multipage
    with pytest.raises(SchemaError, match="nope"):
        LanceFileReader(path).read_all(columns=["nope"])


def test_empty_file(tmp_path):
    table = _wide_table(0)
    path = tmp_path / "empty.lance"
    write_table(path, table)
    reader = LanceFileReader(path)
    assert reader.num_rows == 0
    assert_tables_equal(reader.read_all(), table)
    assert list(reader.iter_batches()) == []


def test_writes_to_file_objects_and_reads_from_them(tmp_path):
    table = _wide_table(100)
    buf = io.BytesIO()
    with LanceFileWriter(buf, table.schema) as w:
        w.write(table)
    assert not buf.closed
    assert_tables_equal(LanceFileReader(buf.getvalue()).read_all(), table)
    buf.seek(0)
    assert_tables_equal(LanceFileReader(buf).read_all(), table)


def test_large_single_batch_is_split_into_pages(tmp_path):
    """A batch past the page size alone is split into even pages of at most ``max_page_bytes``
    (four times the page size unless given), as pylance's 2.0 writer splits it."""
    table = pa.table({"x": np.arange(300_000, dtype=np.int64)})
    for max_page, parts in ((None, 2), (512 * 1024, 5)):
        path = tmp_path / f"big-{parts}.lance"
        with LanceFileWriter(path, table.schema, page_size_bytes=512 * 1024, max_page_bytes=max_page) as w:
            w.write(table)
        reader = LanceFileReader(path)
        pages = reader.metadata.columns[0].pages
        assert [p.length for p in pages] == [300_000 // parts] * parts
        assert_tables_equal(reader.read_all(), table)


def test_page_buffers_are_64_byte_aligned_and_padded(tmp_path):
    table = _wide_table(333)
    path = tmp_path / "f.lance"
    write_table(path, table, page_size_bytes=1000)
    data = path.read_bytes()
    reader = LanceFileReader(path)
    for col in reader.metadata.columns:
        for page in col.pages:
            for off, size in zip(page.buffer_offsets, page.buffer_sizes):
                assert off % 64 == 0
                end = off + size
                assert set(data[end : end + (-end % 64)]) <= {0x48}


def test_maps_are_refused_in_2_0(tmp_path):
    schema = pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))])
    with pytest.raises(SchemaError, match="map"):
        LanceFileWriter(tmp_path / "m.lance", schema)


def test_struct_validity_is_refused_in_2_0(tmp_path):
    arr = pa.StructArray.from_arrays([pa.array([1, 2])], names=["a"], mask=pa.array([False, True]))
    table = pa.table({"s": arr})
    with pytest.raises(SchemaError, match="struct validity"):
        write_table(tmp_path / "s.lance", table)


def test_schema_mismatch_is_refused(tmp_path):
    with (
        LanceFileWriter(tmp_path / "f.lance", pa.schema([("a", pa.int32())])) as w,
        pytest.raises(SchemaError),
    ):
        w.write(pa.table({"a": pa.array([1.0])}))


def test_unknown_versions_are_refused(tmp_path):
    # 2.1 and 2.2 are written too (tests/file/test_v2x_writer.py); 2.3 is unstable upstream
    with pytest.raises(UnsupportedFormatError, match=r"2\.3"):
        LanceFileWriter(tmp_path / "f.lance", pa.schema([("a", pa.int32())]), version="2.3")
