"""Blob v2 columns of pylance 2.2 datasets: scans return pylance's descriptors, take_blobs the bytes.

pylance writes every dataset here; lance_table must return the same tables and the same blob bytes.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.errors import CorruptFileError, DataFileNotFoundError, SchemaError, UnsupportedFormatError
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1.blob_v2 import DESCRIPTOR, BlobKind, blob_file_name
from lance_table.table.blobs import _sidecar_dir

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

INLINE_MAX = 64 * 1024  # pylance 14: larger blobs go to a packed sidecar
PACKED_MAX = 4 * 1024 * 1024  # larger ones get a dedicated sidecar each

BLOB_FIELD = pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})


def _blob_table(values: list[bytes | None], start: int = 0) -> pa.Table:
    schema = pa.schema([pa.field("id", pa.int64()), BLOB_FIELD])
    ids = pa.array(range(start, start + len(values)), pa.int64())
    return pa.table({"id": ids, "b": pa.array(values, pa.large_binary())}, schema=schema)


def _values(n: int, seed: int) -> list[bytes | None]:
    """Blobs of every kind pylance picks by size: empty, inline, packed, dedicated; some null."""
    rng = np.random.default_rng(seed)
    sizes = [0, 1, 100, INLINE_MAX, INLINE_MAX + 1, 300_000, PACKED_MAX, PACKED_MAX + 1]
    out: list[bytes | None] = []
    for i in range(n):
        if i % 7 == 3:
            out.append(None)
            continue
        size = sizes[i % len(sizes)] if i < 2 * len(sizes) else int(rng.choice([0, 10, 5000, 80_000]))
        out.append(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[bytes | None]]:
    """One fragment holding blobs of all four storage kinds, nulls and empty values."""
    uri = str(tmp_path_factory.mktemp("blobs") / "mixed")
    values = _values(40, 1)
    lance.write_dataset(_blob_table(values), uri, data_storage_version="2.2")
    return uri, values


def _same_blobs(ours: list, theirs: list) -> None:
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if b is None:
            assert a is None, k
            continue
        assert a is not None, k
        assert a.size() == b.size(), k
        assert a.read() == b.read(), k


def test_the_dataset_stores_every_kind(mixed):
    """The fixture covers what it claims: inline, packed and dedicated descriptors, and sidecars."""
    uri, _ = mixed
    kinds = set(lance.dataset(uri).to_table().column("b").combine_chunks().field("kind").to_pylist())
    assert kinds == {BlobKind.INLINE, BlobKind.PACKED, BlobKind.DEDICATED, None}  # None: null blobs
    assert list(Path(uri, "data").glob("*/*.blob"))


def test_scans_return_pylance_descriptors(mixed):
    uri, _ = mixed
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    expected = theirs.to_table()
    assert expected.schema.field("b").type == DESCRIPTOR
    assert_tables_equal(ours.to_table(), expected)
    assert_tables_equal(ours.to_table(columns=["b"]), theirs.to_table(columns=["b"]))
    assert_tables_equal(
        ours.to_table(filter="id >= 5 AND id < 30"), theirs.to_table(filter="id >= 5 AND id < 30")
    )
    assert_tables_equal(ours.to_table(with_row_id=True), theirs.to_table(with_row_id=True))
    assert_tables_equal(ours.to_table(limit=7, offset=9), theirs.to_table(limit=7, offset=9))
    batches = pa.Table.from_batches(list(ours.to_batches(batch_size=6)))
    assert_tables_equal(batches, pa.Table.from_batches(list(theirs.to_batches(batch_size=6))))
    picks = [33, 0, 3, 3, 17, 8]
    assert_tables_equal(ours.take(picks), theirs.take(picks))
    assert ours.count_rows("id > 10") == theirs.count_rows("id > 10")
    for predicate in ("b IS NULL", "b IS NOT NULL AND id > 4"):
        assert_tables_equal(ours.to_table(filter=predicate), theirs.to_table(filter=predicate))


def test_schema_is_the_logical_blob_struct(mixed):
    """``schema`` keeps the blob v2 field (struct + extension name), as the manifest has it."""
    uri, _ = mixed
    field = lt.dataset(uri).schema.field("b")
    theirs = lance.dataset(uri).schema.field("b")
    assert field.metadata[b"ARROW:extension:name"] == b"lance.blob.v2"
    assert field.type == theirs.type.storage_type


@pytest.mark.parametrize("by", ["indices", "addresses", "ids"])
def test_take_blobs_gives_pylance_bytes(mixed, by):
    uri, values = mixed
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    rows = [0, 3, 2, 39, 7, 8, 6, 6, 15, 1]
    got = ours.take_blobs("b", **{by: rows})
    _same_blobs(got, theirs.take_blobs("b", **{by: rows}))
    assert [None if g is None else g.read() for g in ours.take_blobs("b", **{by: rows})] == [
        values[r] for r in rows
    ]


def test_blob_file_behaves_like_pylance(mixed):
    uri, _ = mixed
    row = 5  # 300 kB in the packed sidecar
    ours = lt.dataset(uri).take_blobs("b", indices=[row])[0]
    theirs = lance.dataset(uri).take_blobs("b", indices=[row])[0]
    assert isinstance(ours, io.IOBase) and ours.readable() and ours.seekable()
    assert ours.size() == theirs.size() == 300_000
    assert ours.read(10) == theirs.read(10)
    assert ours.tell() == theirs.tell() == 10
    assert ours.seek(-20, io.SEEK_END) == theirs.seek(-20, io.SEEK_END)
    assert ours.read() == theirs.read()
    assert ours.read() == theirs.read() == b""
    assert ours.seek(1000) == theirs.seek(1000)
    assert ours.read_range(50, 200) == theirs.read_range(50, 200)
    assert ours.read_ranges([(0, 3), (299_990, 10)]) == theirs.read_ranges([(0, 3), (299_990, 10)])
    assert ours.tell() == theirs.tell() == 1000  # ranged reads leave the cursor alone
    buf = bytearray(64)
    assert ours.readinto(buf) == 64 and bytes(buf) == theirs.read(64)
    with pytest.raises(ValueError):
        ours.read_range(299_999, 2)
    ours.close()
    assert ours.closed
    with pytest.raises(ValueError):
        ours.read()


def test_take_blobs_arguments(mixed):
    uri, _ = mixed
    ds = lt.dataset(uri)
    with pytest.raises(ValueError):
        ds.take_blobs("b")
    with pytest.raises(ValueError):
        ds.take_blobs("b", ids=[0], indices=[0])
    with pytest.raises(SchemaError):
        ds.take_blobs("id", indices=[0])
    with pytest.raises(SchemaError):
        ds.take_blobs("nope", indices=[0])
    with pytest.raises(IndexError):
        ds.take_blobs("b", indices=[40])
    with pytest.raises(IndexError):
        ds.take_blobs("b", addresses=[(7 << 32) | 0])
    assert ds.take_blobs("b", indices=[]) == []


def test_fragments_deletes_and_compaction(tmp_path):
    """Several fragments and appends, a delete, pylance's compaction (which rewrites the sidecars):
    every version reads as pylance reads it."""
    uri = str(tmp_path / "ds")
    first, second = _values(30, 2), _values(25, 3)
    lance.write_dataset(_blob_table(first), uri, data_storage_version="2.2", max_rows_per_file=12)
    lance.write_dataset(_blob_table(second, 100), uri, mode="append")
    ds = lance.dataset(uri)
    ds.delete("id % 4 = 1")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
    for version in range(1, lance.dataset(uri).version + 1):
        ours, theirs = lt.dataset(uri, version=version), lance.dataset(uri, version=version)
        assert_tables_equal(ours.to_table(), theirs.to_table())
        assert_tables_equal(ours.to_table(filter="id > 20"), theirs.to_table(filter="id > 20"))
        n = theirs.count_rows()
        rows = list(range(n))
        _same_blobs(ours.take_blobs("b", indices=rows), theirs.take_blobs("b", indices=rows))
        addresses = theirs.to_table(columns=[], with_row_id=True).column("_rowid").to_pylist()[::3]
        _same_blobs(ours.take_blobs("b", addresses=addresses), theirs.take_blobs("b", addresses=addresses))
    assert len(lance.dataset(uri).get_fragments()) == 1


def test_non_nullable_blob_column(tmp_path):
    uri = str(tmp_path / "nn")
    field = pa.field("b", pa.large_binary(), nullable=False, metadata={"lance-encoding:blob": "true"})
    values = [b"x" * 10, b"", b"y" * 70_000]
    table = pa.table({"b": pa.array(values, pa.large_binary())}, schema=pa.schema([field]))
    lance.write_dataset(table, uri, data_storage_version="2.2")
    assert_tables_equal(lt.dataset(uri).to_table(), lance.dataset(uri).to_table())
    assert [f.read() for f in lt.dataset(uri).take_blobs("b", indices=[0, 1, 2])] == values


def test_blob_inside_a_struct(tmp_path):
    from lance.blob import BlobType, blob_array

    uri = str(tmp_path / "nested")
    inner = blob_array([b"a", None, b"c" * 70_000])
    s = pa.StructArray.from_arrays(
        [pa.array([1, 2, 3]), inner], fields=[pa.field("x", pa.int64()), pa.field("b", BlobType())]
    )
    lance.write_dataset(pa.table({"s": s}), uri, data_storage_version="2.2")
    assert_tables_equal(lt.dataset(uri).to_table(), lance.dataset(uri).to_table())


def _packed_sidecar(uri: str, row: int = 5) -> Path:
    """The sidecar holding row ``row``'s packed blob (named after its blob id)."""
    desc = lance.dataset(uri).take([row]).column("b")[0].as_py()
    assert desc["kind"] == BlobKind.PACKED
    (sidecar,) = Path(uri, "data").glob(f"*/{blob_file_name(desc['blob_id'])}")
    return sidecar


def test_truncated_sidecar_is_reported(tmp_path, mixed):
    uri = str(tmp_path / "copy")
    shutil.copytree(mixed[0], uri)
    sidecar = _packed_sidecar(uri)
    with open(sidecar, "r+b") as f:
        f.truncate(100)
    ds = lt.dataset(uri)
    assert ds.take_blobs("b", indices=[0])[0].read() == mixed[1][0]  # inline: unaffected
    with pytest.raises(CorruptFileError, match="beyond") as err:
        ds.take_blobs("b", indices=[5])
    assert err.value.path.endswith(".lance")


def test_missing_sidecar_is_reported(tmp_path, mixed):
    """The data file is there, the sidecar its descriptor names is not: the descriptor's blob id
    or the sidecars are damaged, and the error names the data file and the descriptor."""
    uri = str(tmp_path / "copy")
    shutil.copytree(mixed[0], uri)
    sidecar = _packed_sidecar(uri)
    os.remove(sidecar)
    with pytest.raises(CorruptFileError, match=rf"column 'b' at row 5 .*blob id 1\).*{sidecar.name}") as err:
        lt.dataset(uri).take_blobs("b", indices=[5])
    assert err.value.path.endswith(".lance")


def test_sidecar_of_a_cleaned_up_version(tmp_path, mixed):
    """A handle pinned to a version whose files were cleaned up: DataFileNotFoundError says so."""
    uri = str(tmp_path / "copy")
    shutil.copytree(mixed[0], uri)
    ds = lt.dataset(uri)
    sidecar = _packed_sidecar(uri)
    os.remove(sidecar)
    for manifest in Path(uri, "_versions").glob("*.manifest"):
        os.remove(manifest)
    with pytest.raises(DataFileNotFoundError) as err:
        ds.take_blobs("b", indices=[5])
    assert err.value.cleaned_up and err.value.path.endswith(sidecar.name)


def _descriptor_at(uri: str) -> tuple[Path, int]:
    """The one data file of a one-row dataset and the offset of its descriptor's kind byte."""
    (path,) = Path(uri, "data").glob("*.lance")
    meta = LanceFileReader(str(path)).metadata
    page = meta.columns[1].pages[0]
    # full-zip entry of a column without nulls: no control word, u32 length, then kind, position,
    # size, blob id, uri
    return path, int(page.buffer_offsets[0]) + 4


@pytest.mark.parametrize(
    ("patch", "problem"),
    [((0, b"\x07"), "unknown kind"), ((9, (1 << 40).to_bytes(8, "little")), "beyond")],
)
def test_damaged_descriptor_is_reported(tmp_path, patch, problem):
    uri = str(tmp_path / "one")
    field = pa.field("b", pa.large_binary(), nullable=False, metadata={"lance-encoding:blob": "true"})
    table = pa.table({"id": [0], "b": pa.array([b"abc"], pa.large_binary())})
    table = table.cast(pa.schema([pa.field("id", pa.int64()), field]))
    lance.write_dataset(table, uri, data_storage_version="2.2")
    path, at = _descriptor_at(uri)
    data = bytearray(path.read_bytes())
    assert data[at] == BlobKind.INLINE and data[at + 9] == 3  # the bytes the test means to change
    delta, value = patch
    data[at + delta : at + delta + len(value)] = value
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=problem) as err:
        lt.dataset(uri).take_blobs("b", indices=[0])
    assert err.value.path == str(path)


def test_appends_and_compaction_keep_pylance_blobs(tmp_path, mixed):
    """lance_table writes blob v2 now (tests/table/test_blob_v2_write.py covers it): an append, a
    delete and a compaction of a pylance dataset read back as pylance reads them."""
    uri = str(tmp_path / "copy")
    shutil.copytree(mixed[0], uri)
    ds = lt.dataset(uri)
    ds = lt.write_dataset(_blob_table([None, b"x" * 70_000], 40), uri, mode="append")
    ds.delete("id < 3")
    assert_tables_equal(ds.to_table(), lance.dataset(uri).to_table())
    ds.compact_files()
    compacted = ds
    assert len(compacted.get_fragments()) == 1
    assert_tables_equal(compacted.to_table(), lance.dataset(uri).to_table())
    rows = list(range(compacted.count_rows()))
    _same_blobs(compacted.take_blobs("b", indices=rows), lance.dataset(uri).take_blobs("b", indices=rows))


def test_nested_blob_v2_writes_are_refused(tmp_path):
    from lance.blob import BlobType, blob_array

    uri = str(tmp_path / "nested")
    s = pa.StructArray.from_arrays(
        [pa.array([1]), blob_array([b"a"])], fields=[pa.field("x", pa.int64()), pa.field("b", BlobType())]
    )
    lance.write_dataset(pa.table({"s": s}), uri, data_storage_version="2.2")
    with pytest.raises(UnsupportedFormatError, match=r"'b'.*top level"):
        lt.write_dataset(pa.table({"s": s}), uri, mode="append")
    assert lt.dataset(uri).version == 1


def test_blob_v1_take_blobs(tmp_path):
    """Format 2.1 blob columns (blob v1): take_blobs gives pylance's bytes too."""
    uri = str(tmp_path / "v1")
    values = [b"a" * 10, None, b"", b"x" * 100_000]
    lance.write_dataset(_blob_table(values), uri, data_storage_version="2.1")
    rows = [3, 0, 1, 2]
    ours = lt.dataset(uri).take_blobs("b", indices=rows)
    _same_blobs(ours, lance.dataset(uri).take_blobs("b", indices=rows))


BAD_DATA_PATHS = ["../x.lance", "a/../../x.lance", "/abs.lance", "x.bin", "a//b.lance", "a\\b.lance"]


@pytest.mark.parametrize("path", BAD_DATA_PATHS)
def test_sidecar_paths_stay_below_the_data_directory(path):
    """The data file path comes from the manifest: one that could lead a sidecar outside ``data/``
    is refused."""
    with pytest.raises(CorruptFileError, match="cannot name blob sidecar"):
        _sidecar_dir(path, "manifest")
    assert _sidecar_dir("sub/abc.lance", "manifest") == "sub/abc"
