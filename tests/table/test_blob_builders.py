"""pylance's blob v2 builders (``Blob``, ``blob_array``, ``blob_field``, ``BlobType``) and blob
readers (``read_blobs``, ``read_blob_ranges``, ``BlobFile.read1``): data built with ours equals
data built with pylance's, datasets written from either by either library read the same in both."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.blob import Blob, BlobType, blob_array, blob_field

lance = pytest.importorskip("lance")

_VALUES = [b"x" * 10, None, "EMPTY", b"y" * 200_000, b"z" * 5_000, b""]


def _values(blob_cls: type) -> list[object]:
    return [blob_cls.empty() if v == "EMPTY" else v for v in _VALUES]


def _table(arr: pa.Array, field: pa.Field) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(len(arr)), pa.int64()), field.name: arr},
        schema=pa.schema([pa.field("id", pa.int64()), field]),
    )


def test_builders_build_pylances_arrays_and_fields() -> None:
    ours, theirs = blob_array(_values(Blob)), lance.blob_array(_values(lance.blob.Blob))
    assert ours.type.extension_name == theirs.type.extension_name == "lance.blob.v2"
    assert ours.storage.equals(theirs.storage)
    kw = {
        "inline_size_threshold": 100,
        "dedicated_size_threshold": 100_000,
        "pack_file_size_threshold": 1 << 20,
    }
    f, g = blob_field("b", nullable=False, **kw), lance.blob_field("b", nullable=False, **kw)
    assert (f.name, f.nullable, f.metadata, f.type.storage_type) == (
        g.name,
        g.nullable,
        g.metadata,
        g.type.storage_type,
    )
    assert blob_field("b").metadata is None
    uris = blob_array(["s3://b/k", Blob.from_uri("s3://b/k", 3, 4)])
    assert uris.storage.equals(
        lance.blob_array(["s3://b/k", lance.blob.Blob.from_uri("s3://b/k", 3, 4)]).storage
    )
    assert isinstance(BlobType(), pa.ExtensionType)


@pytest.mark.parametrize(
    "make, exc",
    [
        (lambda: Blob(data=b"a", uri="s3://x"), ValueError),
        (lambda: Blob(), ValueError),
        (lambda: Blob(uri="s3://x", position=1), ValueError),
        (lambda: Blob.from_uri("s3://x", 0, 0), ValueError),
        (lambda: blob_array([""]), ValueError),
        (lambda: blob_array([3]), TypeError),
        (lambda: blob_field("b", inline_size_threshold=-1), ValueError),
        (lambda: blob_field("b", dedicated_size_threshold=0), ValueError),
        (lambda: blob_field("b", pack_file_size_threshold=1.5), TypeError),
        (lambda: blob_field("b", inline_size_threshold=2**64), OverflowError),
    ],
)
def test_bad_values_raise_what_pylance_raises(make, exc) -> None:
    with pytest.raises(exc) as info:
        make()
    assert isinstance(info.value, lt.LanceTableError)


def test_written_from_either_builder_by_either_library_reads_the_same(tmp_path) -> None:
    kw = {"inline_size_threshold": 100, "dedicated_size_threshold": 100_000}
    tables = {
        "ours": _table(blob_array(_values(Blob)), blob_field("blob", **kw)),
        "pylance": _table(lance.blob_array(_values(lance.blob.Blob)), lance.blob_field("blob", **kw)),
    }
    expected = [None if v is None else (b"" if v == "EMPTY" else v) for v in _VALUES]
    descriptors = []
    for built, table in tables.items():
        for writer in (lt, lance):
            uri = str(tmp_path / f"{built}-{writer.__name__}")
            writer.write_dataset(table, uri, data_storage_version="2.2")
            for reader in (lt, lance):
                ds = reader.dataset(uri)
                got = ds.read_blobs("blob", indices=list(range(len(_VALUES))))
                assert [data for _, data in got] == expected, (built, writer, reader)
                assert [address for address, _ in got] == list(range(len(_VALUES)))
                descriptors.append(ds.to_table().column("blob").combine_chunks().flatten()[:3])
    # kinds, positions and sizes of every descriptor: the same whoever built, wrote or read
    assert all(d[0].equals(descriptors[0][0]) and d[2].equals(descriptors[0][2]) for d in descriptors)


def test_read_blob_ranges_and_blob_file_reads_as_pylance(tmp_path) -> None:
    uri = str(tmp_path / "ds")
    lt.write_dataset(
        _table(blob_array(_values(Blob)), blob_field("blob", inline_size_threshold=100)),
        uri,
        data_storage_version="2.2",
    )
    requests = [(3, 5, 3), (0, 0, 2), (1, 0, 0), (3, 0, 0), (4, 4_990, 10), (3, 199_990, 10)]
    for selector in ("indices", "addresses", "ids"):
        ours = lt.dataset(uri).read_blob_ranges("blob", requests, selector=selector)
        assert ours == lance.dataset(uri).read_blob_ranges("blob", requests, selector=selector)
    with pytest.raises(ValueError):
        lt.dataset(uri).read_blob_ranges("blob", [(0, 5, 10)], selector="indices")
    with pytest.raises(ValueError):
        lt.dataset(uri).read_blob_ranges("blob", [(0, 0, 1)], selector="rows")
    for ds in (lt.dataset(uri), lance.dataset(uri)):
        f = ds.take_blobs("blob", indices=[4], buffer_size=0)[0]
        buf = bytearray(3)
        assert (f.read1(2), f.readinto1(buf), bytes(buf), len(f.read1())) == (b"zz", 3, b"zzz", 4_995)
        with pytest.raises(io.UnsupportedOperation):
            f.detach()
    with pytest.raises(ValueError):
        lt.dataset(uri).take_blobs("blob", indices=[0], buffer_size=-1)
