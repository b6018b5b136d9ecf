"""pylance is the oracle: files cross between lance_table and pylance in both directions, unchanged."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal
from typecases import compression_cases, type_cases

from lance_table.file import write_table
from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter

lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

TYPES = type_cases()
COMPRESSED = compression_cases()


def pylance_write(path, table: pa.Table, **kwargs) -> None:
    with lance_file.LanceFileWriter(str(path), table.schema, version="2.0", **kwargs) as w:
        for batch in table.to_batches():
            w.write_batch(batch)


def pylance_read(path) -> pa.Table:
    return lance_file.LanceFileReader(str(path)).read_all().to_table()


@pytest.mark.parametrize("name", sorted(TYPES) + sorted(COMPRESSED))
def test_pylance_reads_what_we_write(tmp_path, name):
    table = {**TYPES, **COMPRESSED}[name]
    path = tmp_path / "ours.lance"
    write_table(path, table)
    assert_tables_equal(pylance_read(path), table)


@pytest.mark.parametrize("name", sorted(TYPES) + sorted(COMPRESSED))
def test_we_read_what_pylance_writes(tmp_path, name):
    table = {**TYPES, **COMPRESSED}[name]
    path = tmp_path / "theirs.lance"
    pylance_write(path, table)
    ours = LanceFileReader(path).read_all()
    theirs = pylance_read(path)
    assert ours.equals(theirs, check_metadata=True)
    assert_tables_equal(ours, table)


# pylance serializes metadata maps in hash order, so a file with several metadata keys has no
# single byte form; its contents are compared by the tests above.
@pytest.mark.parametrize("name", sorted(set(TYPES) - {"field_metadata"}))
def test_files_are_byte_identical_to_pylance(tmp_path, name):
    """For single-page files our writer produces exactly the bytes pylance's 2.0 writer does."""
    table = TYPES[name]
    write_table(tmp_path / "ours.lance", table)
    pylance_write(tmp_path / "theirs.lance", table)
    assert (tmp_path / "ours.lance").read_bytes() == (tmp_path / "theirs.lance").read_bytes()


def test_pylance_uses_the_special_encodings():
    """Guard: the compression cases really exercise dictionary / zstd / lz4 / fsst / packed / blob pages."""
    import tempfile
    from pathlib import Path

    from lance_table.file.container import read_metadata, unpack_encoding
    from lance_table.storage.sources import LocalFileSource

    expected = {
        "auto_dictionary": "dictionary",
        "zstd_string": "zstd",
        "lz4_string": "lz4",
        "fsst_string": "fsst",
        "packed_struct": "packed_struct",
        "blob": "blob",
    }
    with tempfile.TemporaryDirectory() as d:
        for name, needle in expected.items():
            path = Path(d) / f"{name}.lance"
            pylance_write(path, COMPRESSED[name])
            src = LocalFileSource(path)
            meta = read_metadata(src)
            text = ""
            for col in meta.columns:
                text += str(unpack_encoding(col.encoding, src, "c")[1])
                for p in col.pages:
                    text += str(unpack_encoding(p.encoding, src, "p")[1])
            assert needle in text, (name, text[:500])


@pytest.fixture(scope="module")
def big_pylance_file(tmp_path_factory):
    """A multi-page file written by pylance (many batches, so several pages per column)."""
    n = 300_000
    rng = np.random.default_rng(11)
    null = rng.random(n) < 0.1
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "x": pa.array(rng.random(n), mask=null),
            "s": pa.array([f"str-{i % 1000}-{i}" for i in range(n)], mask=null),
            "cat": pa.array(np.array(["a", "b", "c", "d"], dtype=object)[rng.integers(0, 4, n)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8).astype(np.float32)), 8),
            "l": pa.array([list(range(i % 6)) for i in range(n)], pa.list_(pa.int64())),
        }
    )
    path = tmp_path_factory.mktemp("big") / "big.lance"
    pylance_write(path, table, max_page_bytes=256 * 1024)
    return path, table


def test_big_pylance_file_full_range_take(big_pylance_file):
    path, table = big_pylance_file
    reader = LanceFileReader(path)
    assert max(len(c.pages) for c in reader.metadata.columns) > 3
    assert_tables_equal(reader.read_all(), table)
    assert_tables_equal(reader.read_range(123_456, 201_000), table.slice(123_456, 201_000 - 123_456))
    idx = np.random.default_rng(5).integers(0, table.num_rows, 1000)
    assert_tables_equal(reader.take(idx), table.take(pa.array(idx)))


def test_pylance_reads_our_multipage_file(tmp_path, big_pylance_file):
    _, table = big_pylance_file
    path = tmp_path / "ours.lance"
    with LanceFileWriter(path, table.schema, page_size_bytes=200_000) as w:
        for batch in table.to_batches(max_chunksize=30_000):
            w.write(batch)
    assert max(len(c.pages) for c in LanceFileReader(path).metadata.columns) > 3
    assert_tables_equal(pylance_read(path), table)
    reader = lance_file.LanceFileReader(str(path))
    idx = [5, 7, 150_000, 299_999]
    assert reader.take_rows(idx).to_table().equals(table.take(pa.array(idx)))


EDGE_SCHEMA = pa.schema(
    [
        ("l", pa.list_(pa.list_(pa.string()))),
        ("s", pa.struct([("c0", pa.bool_())])),
        ("x", pa.int32()),
        ("ls", pa.list_(pa.struct([("c0", pa.bool_())]))),
    ]
)


@pytest.mark.parametrize("rows", [0, 1])
def test_empty_files_and_empty_nested_columns_match_pylance_bytes(tmp_path, rows):
    """Columns that received no values still get the zero-row pages pylance writes."""
    table = pa.table(
        {
            "l": pa.array([[]], EDGE_SCHEMA.field("l").type),
            "s": pa.array([{"c0": True}], EDGE_SCHEMA.field("s").type),
            "x": pa.array([1], pa.int32()),
            "ls": pa.array([[]], EDGE_SCHEMA.field("ls").type),
        }
    ).slice(0, rows)
    with LanceFileWriter(tmp_path / "ours.lance", EDGE_SCHEMA) as w:
        w.write(table)
    with lance_file.LanceFileWriter(str(tmp_path / "theirs.lance"), EDGE_SCHEMA, version="2.0") as w:
        if rows:
            w.write_batch(table)
    assert (tmp_path / "ours.lance").read_bytes() == (tmp_path / "theirs.lance").read_bytes()
    assert_tables_equal(pylance_read(tmp_path / "ours.lance"), table)
    assert_tables_equal(LanceFileReader(tmp_path / "theirs.lance").read_all(), table)
