"""Blob v2 data files (format 2.2): the file reader returns the descriptors pylance stores."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1.blob_v2 import (
    DESCRIPTOR,
    DESCRIPTOR_METADATA,
    attach_descriptor_fields,
    blob_file_name,
)
from lance_table.schema import LanceField, build_tree

lance = pytest.importorskip("lance")

BLOB_FIELD = pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})


def _write(uri: str, values: list[bytes | None]) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), BLOB_FIELD])
    table = pa.table(
        {"id": pa.array(range(len(values)), pa.int64()), "b": pa.array(values, pa.large_binary())},
        schema=schema,
    )
    lance.write_dataset(table, uri, data_storage_version="2.2")


@pytest.mark.interop
def test_data_file_reads_as_descriptors(tmp_path):
    uri = str(tmp_path / "ds")
    values = [b"a" * 10, None, b"", b"x" * 100_000, b"y" * 5_000_000, b"z" * 70_000]
    _write(uri, values)
    (path,) = Path(uri, "data").glob("*.lance")
    reader = LanceFileReader(str(path))
    field = reader.schema.field("b")
    assert field.type == DESCRIPTOR
    assert dict(field.metadata) == {k.encode(): v for k, v in DESCRIPTOR_METADATA.items()}
    got = reader.read_all()
    expected = lance.dataset(uri).to_table()
    assert got.column("b").to_pylist() == expected.column("b").to_pylist()
    assert got.column("id").equals(expected.column("id"))
    # rows by index and a range come from the same pages
    picked = reader.take([5, 0, 1]).column("b").to_pylist()
    assert picked == [expected.column("b")[i].as_py() for i in (5, 0, 1)]


@pytest.mark.interop
def test_sidecar_names(tmp_path):
    """Packed blobs share one sidecar, each dedicated blob has its own; names are the blob ids."""
    uri = str(tmp_path / "ds")
    _write(uri, [b"p" * 70_000, b"d" * 5_000_000, b"e" * 4_200_000, b"q" * 80_000])
    descriptors = lance.dataset(uri).to_table().column("b").to_pylist()
    (stem,) = Path(uri, "data").glob("*.lance")
    sidecars = sorted(p.name for p in stem.with_suffix("").iterdir())
    assert sidecars == sorted({blob_file_name(d["blob_id"]) for d in descriptors})
    assert [d["kind"] for d in descriptors] == [1, 2, 2, 1]
    assert descriptors[0]["blob_id"] == descriptors[3]["blob_id"]


def test_blob_file_name():
    assert blob_file_name(1) == "1" + "0" * 31 + ".blob"
    assert blob_file_name(2) == "01" + "0" * 30 + ".blob"
    assert blob_file_name(3) == "11" + "0" * 30 + ".blob"
    with pytest.raises(ValueError):
        blob_file_name(1 << 32)


def _fields(*rows: tuple[int, int, str, str, dict[str, bytes]]) -> list[LanceField]:
    return [LanceField(i, p, n, t, metadata=m) for i, p, n, t, m in rows]


def test_attach_descriptor_fields():
    blob = {"lance-encoding:blob": b"true", "lance-encoding:packed": b"true"}
    fields = _fields(
        (0, -1, "id", "int64", {}),
        (1, -1, "b", "struct", blob),
        (-1, -1, "kind", "uint8", {}),
        (-1, -1, "position", "uint64", {}),
        (-1, -1, "size", "uint64", {}),
        (-1, -1, "blob_id", "uint32", {}),
        (-1, -1, "blob_uri", "string", {}),
        (2, -1, "after", "int32", {}),
    )
    roots = build_tree(attach_descriptor_fields(fields))
    assert [r.name for r in roots] == ["id", "b", "after"]
    assert [c.name for c in roots[1].children] == ["kind", "position", "size", "blob_id", "blob_uri"]
    assert roots[1].arrow_type == pa.struct([f.with_nullable(True) for f in DESCRIPTOR])
    plain = _fields((0, -1, "id", "int64", {}), (1, -1, "s", "struct", {}), (2, 1, "x", "int32", {}))
    assert attach_descriptor_fields(plain) == plain
