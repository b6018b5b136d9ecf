"""Damaged blob v2 columns: every kind of damage to a descriptor's schema, its fields or its sidecar
is a typed error naming the file (and, for a descriptor, the column, row and blob id)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1.blob_v2 import BlobKind, blob_file_name

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

BLOB_FIELD = pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
VALUES = [b"abc", b"p" * 70_000, None, b"q" * 80_000, b"d" * 4_200_000]


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fragment: an inline blob, two packed ones (one sidecar), a null, a dedicated one."""
    root = tmp_path_factory.mktemp("damage") / "honest"
    schema = pa.schema([pa.field("id", pa.int64()), BLOB_FIELD])
    ids = pa.array(range(len(VALUES)), pa.int64())
    table = pa.table({"id": ids, "b": pa.array(VALUES, pa.large_binary())}, schema=schema)
    lance.write_dataset(table, str(root), data_storage_version="2.2")
    return root


@pytest.fixture
def copy(honest: Path, tmp_path: Path) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(honest, root)
    return root


def _data_file(root: Path) -> Path:
    (path,) = Path(root, "data").glob("*.lance")
    return path


def _replace(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert old in data, old
    path.write_bytes(data.replace(old, new))


@pytest.mark.parametrize("name", [b"kind", b"position", b"blob_id", b"blob_uri"])
def test_damaged_descriptor_field_name_in_the_file(copy, name):
    """A descriptor child renamed in the data file's schema: the descriptor cannot be read as
    one (this was an ArrowTypeError from a cast)."""
    path = _data_file(copy)
    _replace(path, name, name[:-1] + b"X")
    ds = lt.dataset(copy)
    for read in (ds.to_table, lambda: ds.take_blobs("b", indices=[0]), lambda: ds.take([1])):
        with pytest.raises(CorruptFileError, match=r"blob column 'b'.*descriptor fields") as err:
            read()
        assert err.value.path == str(path)


def test_damaged_blob_extension_name_in_the_manifest(copy):
    """The manifest's blob field loses its extension name: it is then a plain struct, and the
    descriptor struct the data file stores for it must not read as that struct's nulls."""
    for manifest in Path(copy, "_versions").glob("*.manifest"):
        _replace(manifest, b"lance.blob.v2", b"lance.blob.vX")
    with pytest.raises(CorruptFileError, match=r"'b'.*not a blob column in the manifest") as err:
        lt.dataset(copy).to_table()
    assert err.value.path == str(_data_file(copy))


def _one_blob(root: Path, value: bytes) -> tuple[Path, int]:
    """A one-row dataset of a non-nullable blob column: its data file and the offset of the
    descriptor's kind byte (a full-zip entry without control word: u32 length, then kind u8,
    position u64, size u64, blob id u32, uri)."""
    field = pa.field("b", pa.large_binary(), nullable=False, metadata={"lance-encoding:blob": "true"})
    table = pa.table({"b": pa.array([value], pa.large_binary())}, schema=pa.schema([field]))
    lance.write_dataset(table, str(root), data_storage_version="2.2")
    path = _data_file(root)
    page = LanceFileReader(str(path)).metadata.columns[0].pages[0]
    return path, int(page.buffer_offsets[0]) + 4


@pytest.mark.parametrize(
    ("value", "kind"), [(b"p" * 70_000, BlobKind.PACKED), (b"d" * 4_200_000, BlobKind.DEDICATED)]
)
def test_damaged_blob_id_names_the_descriptor(tmp_path, value, kind):
    """A blob id without a sidecar is a damaged descriptor (it was blamed on the version as a
    cleaned-up file): the error names the data file, the column, the row and the blob id."""
    path, at = _one_blob(tmp_path / "one", value)
    data = bytearray(path.read_bytes())
    assert (data[at], int.from_bytes(data[at + 17 : at + 21], "little")) == (kind, 1)
    data[at + 17 : at + 21] = (7).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(
        CorruptFileError, match=rf"column 'b' at row 0 .*blob id 7.*{blob_file_name(7)}"
    ) as err:
        lt.dataset(tmp_path / "one").take_blobs("b", indices=[0])
    assert err.value.path == str(path)


def test_dedicated_blob_must_fill_its_sidecar(tmp_path):
    path, at = _one_blob(tmp_path / "one", b"d" * 4_200_000)
    data = bytearray(path.read_bytes())
    data[at + 9 : at + 17] = (100).to_bytes(8, "little")  # size 100 of a 4.2 MB sidecar
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="not its whole sidecar") as err:
        lt.dataset(tmp_path / "one").take_blobs("b", indices=[0])
    assert err.value.path == str(path)


def test_sidecar_replaced_by_a_directory(tmp_path):
    """A small packed blob (inline threshold 100) whose sidecar is now a directory: its range lies
    inside the directory's size, and the read is what fails."""
    md = {"lance-encoding:blob": "true", "lance-encoding:blob-inline-size-threshold": "100"}
    field = pa.field("b", pa.large_binary(), metadata=md)
    table = pa.table({"b": pa.array([b"x" * 500], pa.large_binary())}, schema=pa.schema([field]))
    lance.write_dataset(table, str(tmp_path / "ds"), data_storage_version="2.2")
    (sidecar,) = Path(tmp_path, "ds", "data").glob("*/*.blob")
    sidecar.unlink()
    sidecar.mkdir()
    (blob,) = lt.dataset(tmp_path / "ds").take_blobs("b", indices=[0])
    with pytest.raises(CorruptFileError, match=r"column 'b' at row 0 .*which is not a file") as err:
        blob.read()
    assert err.value.path == str(_data_file(tmp_path / "ds"))
