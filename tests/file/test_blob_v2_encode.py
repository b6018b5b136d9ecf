"""Blob v2 descriptor pages and file schemas as lance_table writes them: the bytes pylance writes."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.errors import UnsupportedFormatError
from lance_table.file.reader import LanceFileReader
from lance_table.file.v2_1 import repdef
from lance_table.file.v2_1.blob_v2 import DESCRIPTOR, DESCRIPTOR_METADATA
from lance_table.file.v2_1.blob_v2_encode import _FIXED, Thresholds, encode_descriptor_page, file_fields
from lance_table.file.writer import LanceFileWriter
from lance_table.schema import LanceField, fields_from_arrow

BLOB = pa.struct([pa.field("data", pa.large_binary()), pa.field("uri", pa.utf8())])
BLOB_FIELD = pa.field("b", BLOB, metadata={"ARROW:extension:name": "lance.blob.v2"})


def _records(rows: list[tuple[int, int, int, int]]) -> np.ndarray:
    out = np.zeros(len(rows), _FIXED)
    for k, row in enumerate(rows):
        out[k] = (*row, 0)
    return out


def test_descriptor_page_bytes():
    """Each entry: [control word if nulls][u32 length][u8 kind][u64 position][u64 size][u32 id]
    [u32 uri length]; a null is a lone control word; the second buffer gives the row starts."""
    fixed = _records([(0, 0, 3, 0), (1, 70_000, 80_000, 1)])
    layout, buffers = encode_descriptor_page(fixed, None, np.array([True, False, True]))
    fz = layout.full_zip_layout
    assert (fz.bits_def, fz.bits_per_offset, fz.num_items, fz.num_visible_items) == (1, 32, 3, 3)
    assert list(fz.layers) == [repdef.NULLABLE_ITEM]
    vps = fz.value_compression.variable_packed_struct
    assert [f.WhichOneof("layout") for f in vps.fields] == ["bits_per_value"] * 4 + ["bits_per_length"]
    first = (
        b"\x00" + (25).to_bytes(4, "little") + b"\x00" + (0).to_bytes(8, "little") + (3).to_bytes(8, "little")
    )
    first += bytes(8)
    second = b"\x00" + (25).to_bytes(4, "little") + b"\x01" + (70_000).to_bytes(8, "little")
    second += (80_000).to_bytes(8, "little") + (1).to_bytes(4, "little") + bytes(4)
    assert buffers[0] == first + b"\x01" + second
    assert buffers[1] == bytes([0, 30, 31, 61])
    layout, buffers = encode_descriptor_page(fixed, None, np.array([True, True]))
    assert layout.full_zip_layout.bits_def == 0
    assert list(layout.full_zip_layout.layers) == [repdef.ALL_VALID_ITEM]
    assert buffers[0][:4] == (25).to_bytes(4, "little")


def test_file_schema_lists_descriptor_fields_without_ids():
    fields = fields_from_arrow(pa.schema([pa.field("id", pa.int64()), BLOB_FIELD, pa.field("z", pa.utf8())]))
    got = file_fields(fields)
    assert [(f.name, f.id, f.parent_id) for f in got] == [
        ("id", 0, -1),
        ("b", 1, -1),
        *[(name, -1, -1) for name in DESCRIPTOR.names],
        ("z", 4, -1),
    ]
    assert got[1].metadata == DESCRIPTOR_METADATA
    assert not any(f.nullable for f in got[2:7])


def test_standalone_file_round_trip(tmp_path):
    """A file written alone keeps small blobs inline and reads back as descriptors; a blob that
    needs a sidecar is refused there (sidecars belong to dataset writes)."""
    schema = pa.schema([BLOB_FIELD])
    data = pa.StructArray.from_arrays(
        [pa.array([b"abc", None, b""], pa.large_binary()), pa.nulls(3, pa.utf8())],
        fields=list(BLOB),
        mask=pa.array([False, True, False]),
    )
    path = tmp_path / "f.lance"
    with LanceFileWriter(str(path), schema, version="2.2") as w:
        w.write(pa.table({"b": data}))
    reader = LanceFileReader(str(path))
    col = reader.read_all().column("b").to_pylist()
    assert col[1] is None
    assert (col[0]["kind"], col[0]["size"]) == (0, 3)
    raw = Path(path).read_bytes()
    assert raw[col[0]["position"] : col[0]["position"] + 3] == b"abc"
    big = pa.StructArray.from_arrays(
        [pa.array([b"x" * 70_000], pa.large_binary()), pa.nulls(1, pa.utf8())], fields=list(BLOB)
    )
    with (
        pytest.raises(UnsupportedFormatError, match="'b'"),
        LanceFileWriter(io.BytesIO(), schema, version="2.2") as w,
    ):
        w.write(pa.table({"b": big}))
    with pytest.raises(UnsupportedFormatError, match=r"'b'.*2\.2"):
        LanceFileWriter(io.BytesIO(), schema, version="2.1")


def test_threshold_metadata_is_checked():
    field = LanceField(0, -1, "b", "struct", metadata={"lance-encoding:blob-dedicated-size-threshold": b"0"})
    with pytest.raises(ValueError, match="dedicated"):
        Thresholds.of(field)
    field = LanceField(0, -1, "b", "struct", metadata={"lance-encoding:blob-inline-size-threshold": b"10"})
    assert Thresholds.of(field) == Thresholds(inline=10)


@pytest.mark.interop
def test_descriptor_page_is_the_one_pylance_writes(tmp_path):
    """pylance's page of descriptors, re-encoded from what it stores, gives the same bytes."""
    lance = pytest.importorskip("lance")
    values = [b"a" * 10, None, b"", b"x" * 100_000, b"y" * 70_000, None]
    table = pa.table({"b": pa.array(values, pa.large_binary())})
    table = table.cast(
        pa.schema([pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])
    )
    lance.write_dataset(table, str(tmp_path / "ds"), data_storage_version="2.2")
    (path,) = Path(tmp_path, "ds", "data").glob("*.lance")
    reader = LanceFileReader(str(path))
    desc = reader.read_all().column("b").combine_chunks()
    valid = np.asarray(desc.is_valid())
    rows = [tuple(d[k] for k in ("kind", "position", "size", "blob_id")) for d in desc.to_pylist() if d]
    layout, buffers = encode_descriptor_page(_records(rows), None, valid)
    meta = reader.metadata
    page = meta.columns[0].pages[0]
    raw = Path(path).read_bytes()
    theirs = [raw[o : o + n] for o, n in zip(page.buffer_offsets, page.buffer_sizes)]
    assert buffers == theirs
    their_layout = pb.PageLayout()
    assert page.encoding.direct.encoding  # an Any wrapping the layout
    from google.protobuf import any_pb2

    wrapper = any_pb2.Any()
    wrapper.ParseFromString(page.encoding.direct.encoding)
    their_layout.ParseFromString(wrapper.value)
    assert layout == their_layout
