"""Writing Arrow dictionary arrays and blob columns into Lance 2.1 and 2.2 files.

pylance is the oracle both ways: what we write reads back identically in pylance's reader and in
ours (whole, by take and by range), and the layouts match what pylance writes for the same data
(a mini-block page of indices with the page's dictionary; a ``blob_layout`` of descriptors).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table
from lance_table.errors import UnsupportedFormatError
from lance_table.file.container import read_metadata, unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.file.rows import selectable
from lance_table.file.writer import LanceFileWriter
from lance_table.storage.sources import LocalFileSource

lance = pytest.importorskip("lance")
lance_file = pytest.importorskip("lance.file")
pytestmark = pytest.mark.interop

VERSIONS = ("2.1", "2.2")
BLOB_META = {"lance-encoding:blob": "true"}
MIB = 1 << 20


def _write(path: Path, table: pa.Table, version: str, page_size: int = 4096, batch: int | None = 700) -> None:
    with LanceFileWriter(path, table.schema, version=version, page_size_bytes=page_size) as w:
        for b in table.to_batches(max_chunksize=batch) if batch else [table]:
            w.write(b)


def _pylance_write(path: Path, table: pa.Table, version: str) -> None:
    with lance_file.LanceFileWriter(str(path), table.schema, version=version) as w:
        w.write_batch(table)


def _check(path: Path, table: pa.Table, seed: int = 0) -> None:
    """pylance and our reader both give back ``table``: whole, by take and by range."""
    theirs = lance_file.LanceFileReader(str(path))
    ours = LanceFileReader(path)
    assert_tables_equal(theirs.read_all().to_table(), table)
    assert_tables_equal(ours.read_all(), table)
    n = table.num_rows
    table = selectable(table)  # Arrow takes across chunks only from dictionaries without null items
    rng = np.random.default_rng(seed)
    idx = np.unique(rng.integers(0, n, min(n, 25)))
    assert_tables_equal(theirs.take_rows(idx.tolist()).to_table(), table.take(pa.array(idx)))
    assert_tables_equal(ours.take(idx), table.take(pa.array(idx)))
    lo = int(rng.integers(0, n))
    count = min(n - lo, 1 + int(rng.integers(0, 900)))
    assert_tables_equal(theirs.read_range(lo, count).to_table(), table.slice(lo, count))
    assert_tables_equal(ours.read_range(lo, lo + count), table.slice(lo, count))


def _layouts(path: Path) -> list[list]:
    """Per column, the page layouts (protobuf messages)."""
    source = LocalFileSource(str(path))
    meta = read_metadata(source)
    return [[unpack_encoding(page.encoding, source, "page")[1] for page in col.pages] for col in meta.columns]


# -- dictionaries ---------------------------------------------------------------------------------

VALUE_TYPES = {
    "string": (pa.string(), lambda k: [f"value-{i}" for i in range(k)]),
    "large_string": (pa.large_string(), lambda k: [f"v{i}" * (1 + i % 3) for i in range(k)]),
    "binary": (pa.binary(), lambda k: [bytes([i % 256]) * (i % 7) for i in range(k)]),
    "int32": (pa.int32(), lambda k: list(range(0, 7 * k, 7))),
    "int64": (pa.int64(), lambda k: [(-1) ** i * i * 1_000_003 for i in range(k)]),
}
KEY_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64())


def _dict_column(
    rng: np.random.Generator, n: int, batch: int, value_type: str, key_type: pa.DataType
) -> pa.ChunkedArray:
    """Chunks of ``batch`` rows, each with its own dictionary (a null item in every other one)
    and ~10% null keys."""
    vt, make = VALUE_TYPES[value_type]
    chunks = []
    for c, start in enumerate(range(0, n, batch)):
        k = min(batch, n - start)
        size = int(rng.integers(2, 60))
        items = make(size + c)[c:]  # overlapping but different dictionaries
        mask = np.zeros(size, bool)
        if c % 2:
            mask[size // 2] = True
        dictionary = pa.array(items, vt, mask=mask)
        keys = pa.array(rng.integers(0, size, k), key_type, mask=rng.random(k) < 0.1)
        chunks.append(pa.DictionaryArray.from_arrays(keys, dictionary))
    return pa.chunked_array(chunks)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("value_type", sorted(VALUE_TYPES))
def test_dictionary_round_trip(tmp_path, version, value_type):
    """Every key width, null keys and null items, several dictionaries and pages per column."""
    rng = np.random.default_rng(len(value_type))
    n, batch = 3000, 700
    cols = {f"k{t.bit_width}": _dict_column(rng, n, batch, value_type, t) for t in KEY_TYPES}
    table = pa.table(cols)
    path = tmp_path / "f.lance"
    _write(path, table, version, page_size=1024, batch=batch)
    _check(path, table)
    for pages in _layouts(path):
        assert len(pages) > 1
        for layout in pages:
            assert layout.WhichOneof("layout") == "mini_block_layout"
            assert layout.mini_block_layout.HasField("dictionary")
    # pylance's reader gives back dictionaries (not their values), like for its own files
    got = lance_file.LanceFileReader(str(path)).read_all().to_table()
    assert got.schema == table.schema


@pytest.mark.parametrize("version", VERSIONS)
def test_dictionary_layout_matches_pylance(tmp_path, version):
    """The page dictionary and its encoding are those pylance writes for the same column."""
    rng = np.random.default_rng(3)
    n = 5000
    table = pa.table(
        {
            "s": pa.DictionaryArray.from_arrays(
                pa.array(rng.integers(0, 4, n), pa.int8(), mask=rng.random(n) < 0.2),
                pa.array(["aa", None, "b", "ccc"]),
            ),
            "ls": pa.DictionaryArray.from_arrays(
                pa.array(rng.integers(0, 3, n), pa.int32()), pa.array(["x", "yy", "z"], pa.large_string())
            ),
            "i": pa.DictionaryArray.from_arrays(
                pa.array(rng.integers(0, 50, n), pa.int16()), pa.array(np.arange(50) * 7, pa.int64())
            ),
        }
    )
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    _write(ours, table, version, page_size=1 << 20, batch=None)
    _pylance_write(theirs, table, version)
    _check(ours, table)
    for mine, ref in zip(_layouts(ours), _layouts(theirs)):
        a, b = mine[0].mini_block_layout, ref[0].mini_block_layout
        assert a.dictionary == b.dictionary
        assert a.num_dictionary_items == b.num_dictionary_items  # null items dropped, as pylance
        assert list(a.layers) == list(b.layers)
        assert a.has_large_chunk == b.has_large_chunk == (version == "2.2")


@pytest.mark.parametrize("version", VERSIONS)
def test_dictionary_edge_cases(tmp_path, version):
    """All-null columns and dictionaries under structs and lists."""
    rng = np.random.default_rng(9)
    n = 1200
    all_null = pa.chunked_array(
        [pa.DictionaryArray.from_arrays(pa.nulls(400, pa.int32()), pa.array(["a"]))] * 3
    )
    inner = pa.DictionaryArray.from_arrays(
        pa.array(rng.integers(0, 5, n), pa.int32(), mask=rng.random(n) < 0.1),
        pa.array(["p", "q", "r", "s", "t"]),
    )
    structs = pa.StructArray.from_arrays(
        [inner, pa.array(np.arange(n))], names=["d", "x"], mask=pa.array(rng.random(n) < 0.1)
    )
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 3, n))])
    items = pa.DictionaryArray.from_arrays(
        pa.array(rng.integers(0, 5, int(offsets[-1])), pa.int32()), pa.array(["p", "q", "r", "s", "t"])
    )
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, mask=pa.array(rng.random(n) < 0.1))
    table = pa.table({"all_null": all_null, "struct": structs, "list": lists})
    path = tmp_path / "f.lance"
    _write(path, table, version, page_size=1024, batch=400)
    _check(path, table)
    assert _layouts(path)[0][0].WhichOneof("layout") == "constant_layout"


@pytest.mark.parametrize("version", VERSIONS)
def test_dictionaries_that_overflow_their_key_type(tmp_path, version):
    """Batches whose dictionaries together do not fit int8 keys keep a page (and dictionary) each.

    pylance's own writer makes an unreadable file from this input (it widens the indices to 32
    bits); ours reads back, in pylance too as long as its batches do not span pages (pylance
    merges the dictionaries of the pages one batch covers).
    """
    rng = np.random.default_rng(9)
    k = 400
    chunks = [
        pa.DictionaryArray.from_arrays(
            pa.array(rng.integers(0, 100, k), pa.int8()), pa.array([f"batch{c}-{i}" for i in range(100)])
        )
        for c in range(3)
    ]
    table = pa.table({"d": pa.chunked_array(chunks)})
    path = tmp_path / "f.lance"
    _write(path, table, version, page_size=1 << 20, batch=k)
    assert len(_layouts(path)[0]) == 3
    assert_tables_equal(LanceFileReader(path).read_all(), table)
    assert_tables_equal(LanceFileReader(path).read_range(350, 450), table.slice(350, 100))
    theirs = lance_file.LanceFileReader(str(path)).read_all(batch_size=k).to_table()
    assert_tables_equal(theirs, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_dictionary_of_booleans_is_refused(tmp_path, version):
    schema = pa.schema([("d", pa.dictionary(pa.int8(), pa.bool_()))])
    with pytest.raises(UnsupportedFormatError, match="not written"):
        LanceFileWriter(tmp_path / "x.lance", schema, version=version)
    assert not (tmp_path / "x.lance").exists()


# -- blobs ----------------------------------------------------------------------------------------


def _blobs(rng: np.random.Generator, n: int, big_every: int = 0) -> pa.Array:
    """Blobs of 0-3000 bytes, ~10% null and ~10% empty; every ``big_every``-th one over 1 MiB."""
    values: list[bytes | None] = []
    for i in range(n):
        u = rng.random()
        if u < 0.1:
            values.append(None)
        elif u < 0.2:
            values.append(b"")
        elif big_every and i % big_every == 1:
            values.append(rng.integers(0, 256, MIB + 1000 + i, np.uint8).tobytes())
        else:
            values.append(bytes([i % 256]) * int(rng.integers(1, 3000)))
    return pa.array(values, pa.large_binary())


def _blob_table(columns: dict[str, pa.Array]) -> pa.Table:
    fields = [pa.field(name, arr.type, metadata=BLOB_META) for name, arr in columns.items()]
    return pa.table(list(columns.values()), schema=pa.schema(fields))


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_round_trip(tmp_path, version):
    """Small and large (> 1 MiB) blobs, nulls and empties, several pages; each blob is its own
    64-byte aligned buffer outside the pages."""
    rng = np.random.default_rng(1)
    n = 2000
    table = _blob_table({"big": _blobs(rng, n, big_every=400), "small": _blobs(rng, n)})
    table = table.append_column("id", pa.array(np.arange(n)))
    path = tmp_path / "f.lance"
    _write(path, table, version, page_size=4096, batch=300)
    _check(path, table)
    layouts = _layouts(path)
    for pages in layouts[:2]:
        assert len(pages) > 1
        for layout in pages:
            blob = layout.blob_layout
            assert layout.WhichOneof("layout") == "blob_layout"
            assert list(blob.layers) == [3]  # REPDEF_NULLABLE_ITEM
            assert list(
                blob.inner_layout.mini_block_layout.value_compression.packed_struct.bits_per_value
            ) == [64, 64]
    # the descriptors point at the values, each starting on a 64-byte boundary
    data = path.read_bytes()
    values = table.column("big").to_pylist()
    positions = _descriptors(path, 0)
    for (pos, size), value in zip(positions, values):
        if value:
            assert pos % 64 == 0 and size == len(value) and data[pos : pos + size] == value
        elif value is None:
            assert size == 0 and pos == 1 << 16  # def level 1 folded into the position
        else:
            assert (pos, size) == (0, 0)


def _descriptors(path: Path, column: int) -> list[tuple[int, int]]:
    """The (position, size) descriptors of every row of a blob column, read from the pages."""
    source = LocalFileSource(str(path))
    meta = read_metadata(source)
    out: list[tuple[int, int]] = []
    data = path.read_bytes()
    large = meta.version.value == "2.2"
    for page in meta.columns[column].pages:
        (meta_off, meta_len), (chunk_off, _) = zip(page.buffer_offsets[:2], page.buffer_sizes[:2])
        words = np.frombuffer(data[meta_off : meta_off + meta_len], np.uint32 if large else np.uint16)
        at = chunk_off
        for w in words.tolist():
            size = ((w >> 4) + 1) * 8
            header = 2 + (4 if large else 2)
            body = at + header + (-header % 8)
            count = int.from_bytes(data[at + 2 : at + header], "little") // 16
            pairs = np.frombuffer(data[body : body + 16 * count], np.uint64).reshape(-1, 2)
            out.extend((int(p), int(s)) for p, s in pairs)
            at += size
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_layout_matches_pylance(tmp_path, version):
    """Our blob pages are shaped like pylance's for the same data, descriptor for descriptor
    (sizes and null markers; positions differ only by where the file puts the blobs)."""
    rng = np.random.default_rng(2)
    table = _blob_table({"b": _blobs(rng, 300)})
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    _write(ours, table, version, page_size=1 << 20, batch=None)
    _pylance_write(theirs, table, version)
    _check(ours, table)
    (a,), (b,) = _layouts(ours)[0], _layouts(theirs)[0]
    assert a.blob_layout.layers == b.blob_layout.layers
    assert a.blob_layout.inner_layout == b.blob_layout.inner_layout
    mine, ref = _descriptors(ours, 0), _descriptors(theirs, 0)
    assert [s for _, s in mine] == [s for _, s in ref]
    assert [p for p, s in mine if not s] == [p for p, s in ref if not s]


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_edge_cases(tmp_path, version):
    """All-null and all-empty blob columns, a non-nullable one, and a blob inside a struct."""
    n = 500
    rng = np.random.default_rng(4)
    inner = _blobs(rng, n)
    struct_t = pa.struct(
        [pa.field("payload", pa.large_binary(), metadata=BLOB_META), pa.field("x", pa.int32())]
    )
    structs = pa.StructArray.from_arrays(
        [inner, pa.array(np.arange(n, dtype=np.int32))],
        fields=list(struct_t),
        mask=pa.array(rng.random(n) < 0.2),
    )
    schema = pa.schema(
        [
            pa.field("nulls", pa.large_binary(), metadata=BLOB_META),
            pa.field("empties", pa.large_binary(), metadata=BLOB_META),
            pa.field("required", pa.large_binary(), nullable=False, metadata=BLOB_META),
            pa.field("s", struct_t),
        ]
    )
    required = pa.array([bytes([i % 256]) * (1 + i % 50) for i in range(n)], pa.large_binary())
    table = pa.table(
        [pa.nulls(n, pa.large_binary()), pa.array([b""] * n, pa.large_binary()), required, structs],
        schema=schema,
    )
    path = tmp_path / "f.lance"
    _write(path, table, version, page_size=2048, batch=150)
    _check(path, table)
    layouts = _layouts(path)
    assert all(layout.WhichOneof("layout") == "blob_layout" for pages in layouts[:3] for layout in pages)
    assert list(layouts[2][0].blob_layout.layers) == [1]  # REPDEF_ALL_VALID_ITEM


@pytest.mark.parametrize("version", VERSIONS)
def test_blobs_refused_where_pylance_refuses_them(tmp_path, version):
    """Blobs inside lists, and blobs of type binary (pylance writes only large_binary blobs and
    its reader fails on others)."""
    t = pa.list_(pa.field("item", pa.large_binary(), metadata=BLOB_META))
    with pytest.raises(UnsupportedFormatError, match="inside a list"):
        LanceFileWriter(tmp_path / "x.lance", pa.schema([("l", t)]), version=version)
    schema = pa.schema([pa.field("b", pa.binary(), metadata=BLOB_META)])
    with pytest.raises(UnsupportedFormatError, match="large_binary"):
        LanceFileWriter(tmp_path / "y.lance", schema, version=version)
    theirs = lance_file.LanceFileWriter(str(tmp_path / "z.lance"), schema, version=version)
    with pytest.raises(Exception, match="LargeBinary"):
        theirs.write_batch(pa.table([pa.array([b"x"], pa.binary())], schema=schema))
        theirs.close()


# -- datasets -------------------------------------------------------------------------------------


def test_dataset_with_dictionaries_and_blobs(tmp_path):
    """``write_dataset`` with dictionary and blob columns (2.1 blobs; 2.2, the default, stores them
    as blob v2); pylance reads it all."""
    rng = np.random.default_rng(6)
    n = 1500
    table = pa.table(
        {
            "d": _dict_column(rng, n, 500, "string", pa.int16()),
            "i": _dict_column(rng, n, 500, "int64", pa.int32()),
            "b": _blobs(rng, n, big_every=700),
        }
    )
    table = table.cast(table.schema.set(2, pa.field("b", pa.large_binary(), metadata=BLOB_META)))
    uri = str(tmp_path / "ds")
    # 2.2 (the default): blob v2, read back by pylance byte for byte
    v2 = str(tmp_path / "v2")
    lance_table.write_dataset(table, v2)
    blobs = lance.dataset(v2).take_blobs("b", indices=list(range(n)))
    assert [None if f is None else f.read() for f in blobs] == table.column("b").to_pylist()
    lance_table.write_dataset(table, uri, data_storage_version="2.1")
    ours = lance_table.dataset(uri).to_table()
    assert_tables_equal(ours, table)
    ds = lance.dataset(uri)
    assert ds.data_storage_version == "2.1"
    assert_tables_equal(ds.to_table(blob_handling="all_binary"), table)
    # by default pylance describes blobs: (position, size), null for null blobs
    described = ds.to_table(columns=["b"]).column("b").combine_chunks()
    sizes = described.field("size").to_pylist()
    expected = [None if v is None else len(v) for v in table.column("b").to_pylist()]
    assert sizes == expected
    assert ds.take([1, 700, 1400], columns=["d", "i"]).equals(ours.take([1, 700, 1400]).select(["d", "i"]))


def test_appends_to_a_pylance_dataset_with_blobs(tmp_path):
    """A 2.1 dataset pylance wrote with blob and dictionary columns: we append, pylance appends
    after us, and both read all three fragments back.

    (In 2.2 datasets pylance 14 stores blob columns as "blob v2": see
    tests/table/test_blob_v2_write.py.)
    """
    rng = np.random.default_rng(8)
    n = 300
    table = pa.table(
        {"b": _blobs(rng, n, big_every=150), "d": _dict_column(rng, n, 100, "string", pa.int32())}
    )
    table = table.cast(table.schema.set(0, pa.field("b", pa.large_binary(), metadata=BLOB_META)))
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri, data_storage_version="2.1")
    lance_table.write_dataset(table, uri, mode="append")
    lance.write_dataset(table, uri, mode="append")
    expected = pa.concat_tables([table] * 3)
    assert_tables_equal(
        lance.dataset(uri).to_table(blob_handling="all_binary"), expected, check_metadata=False
    )
    assert_tables_equal(lance_table.dataset(uri).to_table(), expected)


def test_pylance_blob_v2_datasets_read_as_pylance_reads_them(tmp_path):
    """pylance 14 turns a blob column of a 2.2 dataset into blob v2: scans return its descriptors,
    take_blobs the bytes (more in tests/table/test_blob_v2.py)."""
    values = [b"x" * 10, None, b""]
    table = pa.table({"b": pa.array(values, pa.large_binary())})
    table = table.cast(pa.schema([pa.field("b", pa.large_binary(), metadata=BLOB_META)]))
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri)
    ds = lance_table.dataset(uri)
    assert_tables_equal(ds.to_table(), lance.dataset(uri).to_table())
    assert [None if f is None else f.read() for f in ds.take_blobs("b", indices=[0, 1, 2])] == values
