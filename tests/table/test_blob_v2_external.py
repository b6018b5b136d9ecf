"""External blob v2 values: only locations below the dataset's registered base paths are opened.

pylance 14 stores an external blob below a registered base as a path relative to that base (the
descriptor's ``blob_id`` is the base's id), and one outside every base (only when told to) as an
absolute URI with ``blob_id`` 0. A descriptor's URI is untrusted: lance_table opens nothing outside
the registered bases, no scheme that is not an object store, and no path relative to the working
directory or escaping its base.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import BlobLocationError, CorruptFileError, UnsupportedFormatError
from lance_table.file.v2_1.blob_v2 import BlobKind
from lance_table.format.bases import BasePath
from lance_table.table.blob_locations import BlobLocation, resolve_external

lance = pytest.importorskip("lance")

PAYLOAD = bytes(range(256)) * 10


def _write(uri: str, values: list, **options) -> None:
    from lance.blob import blob_array

    table = pa.table({"id": pa.array(range(len(values)), pa.int64()), "b": blob_array(values)})
    lance.write_dataset(table, uri, data_storage_version="2.2", **options)


@pytest.fixture
def based(tmp_path: Path) -> tuple[str, Path]:
    """A dataset whose external blobs lie below its registered base path 1 (``ext/``)."""
    from lance import DatasetBasePath
    from lance.blob import Blob

    base = tmp_path / "ext"
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "a.bin").write_bytes(PAYLOAD)
    target = str(base / "sub" / "a.bin")
    uri = str(tmp_path / "ds")
    bases = [DatasetBasePath(str(base), name="ext", is_dataset_root=False, id=1)]
    _write(
        uri,
        [b"in", Path(target).as_uri(), Blob.from_uri(target, position=3, size=5), None],
        initial_bases=bases,
    )
    return uri, base


def _same(ours: list, theirs: list) -> None:
    assert [None if f is None else (f.size(), f.read()) for f in ours] == [
        None if f is None else (f.size(), f.read()) for f in theirs
    ]


@pytest.mark.interop
def test_blobs_below_a_registered_base_read_as_pylance_reads_them(based):
    uri, _ = based
    ours, theirs = lt.dataset(uri), lance.dataset(uri)
    descriptors = ours.to_table().column("b").to_pylist()
    assert descriptors == theirs.to_table().column("b").to_pylist()
    assert [d["kind"] for d in descriptors[1:3]] == [BlobKind.EXTERNAL] * 2
    assert [(d["blob_id"], d["blob_uri"]) for d in descriptors[1:3]] == [(1, "sub/a.bin")] * 2
    rows = [0, 1, 2, 3]
    got = ours.take_blobs("b", indices=rows, allow_external=True)
    _same(got, theirs.take_blobs("b", indices=rows))
    assert got[2] is not None and got[2].read_range(0, 5) == PAYLOAD[3:8]
    with pytest.raises(UnsupportedFormatError, match="allow_external"):
        ours.take_blobs("b", indices=[1])


@pytest.mark.interop
def test_blobs_outside_the_registered_bases_are_refused(tmp_path):
    """pylance reads these (it wrote them when told to); lance_table does not open them."""
    target = tmp_path / "outside.bin"
    target.write_bytes(PAYLOAD)
    uri = str(tmp_path / "ds")
    _write(uri, [b"in", target.as_uri()], allow_external_blob_outside_bases=True)
    ds = lt.dataset(uri)
    assert ds.take_blobs("b", indices=[0], allow_external=True)[0].read() == b"in"
    with pytest.raises(BlobLocationError, match="outside the dataset's registered base paths") as err:
        ds.take_blobs("b", indices=[1], allow_external=True)
    assert err.value.uri == target.as_uri()
    assert isinstance(err.value, PermissionError)


def _patch_uri(uri: str, old: str, new: str) -> Path:
    """Replace the descriptors' URI ``old`` in the dataset's data file by one of the same length;
    returns the data file."""
    assert len(old) == len(new)
    (path,) = Path(uri, "data").glob("*.lance")
    data = path.read_bytes()
    assert old.encode() in data
    path.write_bytes(data.replace(old.encode(), new.encode()))
    return path


@pytest.mark.interop
@pytest.mark.parametrize(
    ("new", "reason"),
    [
        ("../x.bin", "'..'"),  # escapes the base
        ("sub//.bin", "empty"),
        ("/etc/host", "not a path relative"),
        ("http://1/", "not a path relative"),
    ],
)
def test_damaged_relative_paths_are_refused(based, tmp_path, new, reason):
    uri, _ = based
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    _patch_uri(copy, "sub/a.bin", new.ljust(9, "x")[:9])
    with pytest.raises(BlobLocationError, match=reason):
        lt.dataset(copy).take_blobs("b", indices=[1], allow_external=True)


@pytest.mark.interop
@pytest.mark.parametrize(
    ("new", "reason"),
    [
        ("http://127.0.0.1:1/{}", "scheme 'http'"),
        ("/etc/hostname/{}", "outside the dataset's registered base paths"),
        ("file:///etc/hostname/{}", "outside the dataset's registered base paths"),
        ("hostname/{}", "relative path"),
    ],
)
def test_absolute_uris_outside_the_bases_are_refused(tmp_path, new, reason):
    """Descriptors with blob id 0 and each kind of URI that must not be opened."""
    target = tmp_path / ("t" * 40)
    target.write_bytes(PAYLOAD)
    uri = str(tmp_path / "ds")
    _write(uri, [target.as_uri()], allow_external_blob_outside_bases=True)
    old = target.as_uri()
    replacement = new.format("y" * len(old))[: len(old)]
    _patch_uri(uri, old, replacement)
    with pytest.raises(BlobLocationError, match=reason) as err:
        lt.dataset(uri).take_blobs("b", indices=[0], allow_external=True)
    assert err.value.uri == replacement


BASES = {
    1: BasePath("/data/blobs", id=1),
    2: BasePath("s3://bucket/prefix", id=2),
    3: BasePath("file:///srv/a%20b", id=3),
    4: BasePath("http://example.com/blobs", id=4),
    5: BasePath("relative/dir", id=5),
}


@pytest.mark.parametrize(
    ("uri", "blob_id", "expected"),
    [
        ("x/y.bin", 1, BlobLocation("/data/blobs/x", "y.bin")),
        ("k", 2, BlobLocation("s3://bucket/prefix", "k")),
        ("c.bin", 3, BlobLocation("/srv/a b", "c.bin")),
        ("file:///data/blobs/x/y.bin", 0, BlobLocation("/data/blobs/x", "y.bin")),
        ("/data/blobs/y.bin", 0, BlobLocation("/data/blobs", "y.bin")),
        ("s3://bucket/prefix/deep/k", 0, BlobLocation("s3://bucket/prefix/deep", "k")),
    ],
)
def test_resolve_allowed_locations(uri, blob_id, expected):
    assert resolve_external(uri, blob_id, BASES) == expected


@pytest.mark.parametrize(
    ("uri", "blob_id", "reason"),
    [
        ("http://127.0.0.1/x", 0, "scheme 'http'"),
        ("https://example.com/blobs/x", 0, "scheme 'https'"),
        ("/etc/hostname", 0, "outside"),
        ("file:///etc/hostname", 0, "outside"),
        ("file:///data/blobs", 0, "outside"),  # the base itself is no blob
        ("/data/blobsX/y", 0, "outside"),  # a sibling that shares the prefix
        ("/data/blobs/../../etc/passwd", 0, "'..'"),
        ("file:///data/blobs/%2e%2e/x", 0, "'..'"),
        ("file://host/data/blobs/x", 0, "host"),
        ("s3://bucket/other/k", 0, "outside"),
        ("hostname", 0, "relative path"),
        ("x/y.bin", 0, "relative path"),
        ("../y.bin", 1, "'..'"),
        ("x/../../y.bin", 1, "'..'"),
        ("x//y.bin", 1, "empty"),
        ("x\\..\\y", 1, "backslash"),
        ("/etc/hostname", 1, "not a path relative"),
        ("s3://bucket/k", 2, "not a path relative"),
        ("", 1, "not a path relative"),
        ("x", 4, "scheme 'http'"),
        ("x", 5, "relative path"),
        ("x", 9, "does not register"),
    ],
)
def test_resolve_refused_locations(uri, blob_id, reason):
    with pytest.raises(BlobLocationError, match=reason) as err:
        resolve_external(uri, blob_id, BASES)
    assert err.value.uri == uri


@pytest.mark.interop
def test_unregistered_base_in_a_descriptor(based, tmp_path):
    """A descriptor whose blob id names no registered base is damaged: CorruptFileError naming
    the data file and the descriptor."""
    uri, _ = based
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    for manifest in Path(copy, "_versions").glob("*.manifest"):
        data = manifest.read_bytes()
        assert data.count(b"\x08\x01\x12\x03ext") == 2  # BasePath{id: 1, name: "ext"}, twice:
        # in the manifest and in its inline transaction
        manifest.write_bytes(data.replace(b"\x08\x01\x12\x03ext", b"\x08\x07\x12\x03ext"))
    with pytest.raises(CorruptFileError, match=r"column 'b' at row 1 .*base path 1") as err:
        lt.dataset(copy).take_blobs("b", indices=[1], allow_external=True)
    assert err.value.path.endswith(".lance")


@pytest.mark.interop
def test_uri_that_is_not_utf8(based, tmp_path):
    uri, _ = based
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    (path,) = Path(copy, "data").glob("*.lance")
    path.write_bytes(path.read_bytes().replace(b"sub/a.bin", b"\xff\xfeb/a.bin"))
    # (the descriptor's URI strings are checked as they are read, as every string is)
    with pytest.raises(CorruptFileError, match=r"column 'b'.* not valid UTF-8") as err:
        lt.dataset(copy).take_blobs("b", indices=[1], allow_external=True)
    assert err.value.path == str(path)


@pytest.mark.interop
def test_missing_external_object(based):
    uri, base = based
    (base / "sub" / "a.bin").unlink()
    with pytest.raises(
        CorruptFileError, match=r"column 'b' at row 1 .*'sub/a.bin', which does not exist"
    ) as err:
        lt.dataset(uri).take_blobs("b", indices=[1], allow_external=True)
    assert err.value.path.endswith(".lance")


@pytest.mark.interop
def test_refusals_name_the_data_file_and_descriptor(based, tmp_path):
    uri, _ = based
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    path = _patch_uri(copy, "sub/a.bin", "../a.bin/")
    with pytest.raises(BlobLocationError, match=r"column 'b' at row 1 of fragment 0") as err:
        lt.dataset(copy).take_blobs("b", indices=[1], allow_external=True)
    assert err.value.path == str(path) and str(path) in str(err.value)


@pytest.mark.interop
def test_external_blobs_are_written_as_pylance_writes_them(tmp_path):
    """Below a registered base (the deepest), relative to it; outside, only when told to, as the
    URI; each library reads what the other wrote, and appends to it."""
    from lance.blob import Blob, blob_array

    ext = tmp_path / "e"
    (ext / "in").mkdir(parents=True)
    (ext / "in" / "x.bin").write_bytes(PAYLOAD)
    (ext / "a b.bin").write_bytes(b"spaced")
    (tmp_path / "o.bin").write_bytes(b"outside")
    inner = ext / "in" / "x.bin"
    values = [inner.as_uri(), str(inner), Blob.from_uri(str(inner), position=2, size=3), b"in", None]
    values += [(ext / "a b.bin").as_uri(), (tmp_path / "o.bin").as_uri()]
    table = pa.table({"id": pa.array(range(len(values)), pa.int64()), "b": blob_array(values)})
    expected = [PAYLOAD, PAYLOAD, PAYLOAD[2:5], b"in", None, b"spaced", b"outside"]
    descriptors = []
    for lib in (lt, lance):
        uri = str(tmp_path / lib.__name__)
        bases = [lib.DatasetBasePath(str(ext), name="e"), lib.DatasetBasePath(str(ext / "in"), name="in")]
        lib.write_dataset(
            table,
            uri,
            data_storage_version="2.2",
            initial_bases=bases,
            allow_external_blob_outside_bases=True,
        )
        descriptors.append(lance.dataset(uri).to_table().column("b").to_pylist())
        assert descriptors[-1] == lt.dataset(uri).to_table().column("b").to_pylist()
        theirs = lance.dataset(uri).take_blobs("b", indices=list(range(7)))
        ours = lt.dataset(uri).take_blobs("b", indices=list(range(6)), allow_external=True)
        assert [f.read() if f else None for f in theirs] == expected
        assert [f.read() if f else None for f in ours] == expected[:6]  # (not outside the bases)
    assert descriptors[0] == descriptors[1]
    assert [(d["blob_id"], d["blob_uri"]) for d in descriptors[0][:3]] == [(2, "x.bin")] * 3
    for lib, other in ((lt, "lance"), (lance, "lance_table")):  # appends to the other's dataset
        uri = str(tmp_path / other)
        lib.write_dataset(pa.table({"id": [9], "b": blob_array([inner.as_uri()])}), uri, mode="append")
        assert lance.dataset(uri).to_table().column("b").to_pylist()[-1]["blob_uri"] == "x.bin"
        assert lt.dataset(uri).take_blobs("b", indices=[7], allow_external=True)[0].read() == PAYLOAD


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("o.bin", "outside the dataset's registered external base paths"),
        ("rel/x.bin", "relative path"),
        ("ftp://host/x.bin", "not an object store"),
    ],
)
def test_external_blobs_lance_table_does_not_write(tmp_path, value, problem):
    from lance.blob import blob_array

    target = (tmp_path / value).as_uri() if value == "o.bin" else value
    root = lt.DatasetBasePath(str(tmp_path / "root"), name="r", is_dataset_root=True)  # no external base
    table = pa.table({"id": [0], "b": blob_array([target])})
    with pytest.raises(BlobLocationError, match=problem) as err:
        lt.write_dataset(table, tmp_path / "ds", data_storage_version="2.2", initial_bases=[root])
    assert isinstance(err.value, OSError) and err.value.uri == target
    assert not (tmp_path / "ds").exists() or not list((tmp_path / "ds").rglob("*.lance"))
    ds = lt.write_dataset(table.slice(0, 0), tmp_path / "ok", data_storage_version="2.2")
    with pytest.raises(lt.UnsupportedFormatError, match="only write_dataset writes external"):
        ds.merge_insert("id").when_not_matched_insert_all().execute(
            pa.table({"id": [0], "b": blob_array([target])})
        )
