"""Manifest files: the framing, the dataclasses and their protobuf edge."""

from __future__ import annotations

import struct

import pytest

from lance_table.errors import CorruptFileError
from lance_table.format.manifest import (
    DELETION_ARROW,
    DELETION_BITMAP,
    DataFile,
    DeletionFile,
    Fragment,
    Manifest,
    decode_manifest_file,
    encode_manifest_file,
)
from lance_table.schema import fields_from_arrow


def _manifest(**kwargs) -> Manifest:
    import pyarrow as pa

    fields = tuple(fields_from_arrow(pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])))
    frag = Fragment(
        id=0,
        files=(DataFile("a.lance", (0, 1), (0, 1), 2, 0, 123),),
        physical_rows=10,
        deletion_file=DeletionFile(DELETION_BITMAP, 1, 99, 3),
    )
    base = dict(
        fields=fields,
        fragments=(frag,),
        version=2,
        timestamp_ns=1_700_000_000_123_456_789,
        data_format=("lance", "2.0"),
    )
    base.update(kwargs)
    return Manifest(**base).with_flags()


def test_a_manifest_round_trips_with_its_transaction():
    m = _manifest(config={"k": "v"}, schema_metadata={"meta": b"x"})
    data = encode_manifest_file(m, b"txn-bytes")
    mf = decode_manifest_file(data, "x.manifest")
    assert mf.transaction == b"txn-bytes"
    assert mf.manifest == m
    assert mf.manifest.num_rows == 7
    assert data[-4:] == b"LANC"


def test_deletion_files_know_their_path():
    assert DeletionFile(DELETION_BITMAP, 4, 5, 1).path(2) == "_deletions/2-4-5.bin"
    assert DeletionFile(DELETION_ARROW, 4, 5, 1).path(2) == "_deletions/2-4-5.arrow"


@pytest.mark.parametrize("cut", [1, 4, 16, 30])
def test_truncated_manifests_are_corrupt_and_named(cut):
    data = encode_manifest_file(_manifest(), b"t")
    with pytest.raises(CorruptFileError, match=r"x\.manifest"):
        decode_manifest_file(data[:-cut], "x.manifest")


def test_a_footer_pointing_outside_the_file_is_corrupt():
    data = bytearray(encode_manifest_file(_manifest(), b"t"))
    struct.pack_into("<Q", data, len(data) - 16, 2**40)
    with pytest.raises(CorruptFileError, match="outside"):
        decode_manifest_file(bytes(data), "x.manifest")


def test_a_data_file_path_outside_the_dataset_is_corrupt():
    bad = _manifest(fragments=(Fragment(0, (DataFile("../x.lance", (0, 1), (0, 1), 2, 0),), 10),))
    with pytest.raises(CorruptFileError, match=r"x\.manifest"):
        decode_manifest_file(encode_manifest_file(bad, b"t"), "x.manifest")
