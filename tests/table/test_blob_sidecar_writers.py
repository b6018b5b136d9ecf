"""pylance's writers of blob v2 bytes stored before their data file: ``PackedBlobWriter`` and
``DedicatedBlobWriter`` (from ``LanceFileSession``), ``BlobDescriptor`` and
``BlobDescriptorArrayBuilder``. Both sides write the same sidecar and data file bytes for the same
calls; a dataset committed from them by either side is read in full by the other, managed blobs
(under the dataset's root or a registered base path) included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import lance.file as lance_file
import pyarrow as pa
import pytest
from lance.fragment import DataFile as TheirDataFile
from lance.fragment import FragmentMetadata as TheirFragment

import lance_table as lt
import lance_table.file as lt_file
from lance_table.errors import CorruptFileError
from lance_table.fragment import DataFile, FragmentMetadata

# The descriptor field's two metadata entries in the file schema: pylance keeps them in a hash map,
# so its files have them in either order (the rest of the bytes is deterministic).
_BLOB_META = b"R\x1b\n\x13lance-encoding:blob\x12\x04true"
_PACKED_META = b"R\x1d\n\x15lance-encoding:packed\x12\x04true"


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes().replace(_PACKED_META + _BLOB_META, _BLOB_META + _PACKED_META)
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_versions" not in p.parts and "_transactions" not in p.parts
    }


def _sidecars(side: Any, files: Any, root: Path) -> tuple[list[str], pa.StructArray, pa.Field, list[str]]:
    """Sidecars of ``data/part.lance`` written with ``side``'s writers; the descriptor column."""
    session = files.LanceFileSession(str(root))
    packed = session.open_packed_blob_writer("data/part.lance", 1)
    paths = [packed.path]
    packed.write_blob(b"hello")
    packed.write_blobs(pa.array([b"ab", None, b"", b"xyz"], pa.binary()))
    packed.write_blobs(
        pa.chunked_array([pa.array([b"large"], pa.large_binary()), pa.array([b"!"], pa.large_binary())])
    )
    packed.write_blobs(pa.array([b"vv"], pa.binary_view()))
    packed.write_blobs(pa.array([b"fx"], pa.binary(2)))
    descriptors = packed.finish()
    dedicated = session.open_dedicated_blob_writer("data/part.lance", 2)
    paths.append(dedicated.path)
    dedicated.write(b"D" * 1000)
    dedicated.write(b"E")
    big = dedicated.finish()
    shown = [repr(d) for d in [*descriptors, big]]
    builder = side.BlobDescriptorArrayBuilder("blob")
    builder.extend(descriptors)
    builder.append(big)
    builder.append_inline(b"inline bytes")
    builder.append_inline(b"")
    builder.append_null()
    builder.extend_packed(1, [0, 5], [5, 2])
    builder.append_dedicated(2, 1001)
    builder.append_managed("blobs/m.bin", 2, 3)
    return shown, builder.finish(), builder.field, paths


def _write_data_file(files: Any, root: Path, column: pa.StructArray, field: pa.Field) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), field])
    table = pa.table([pa.array(range(len(column)), pa.int64()), column], schema=schema)
    writer = files.LanceFileSession(str(root)).open_writer("data/part.lance", schema=schema, version="2.2")
    writer.write_batch(table)
    writer.close()


def test_sidecars_descriptors_and_data_files_are_pylances_bytes(tmp_path: Path) -> None:
    ours_root, their_root = tmp_path / "ours", tmp_path / "theirs"
    ours = _sidecars(lt, lt_file, ours_root)
    theirs = _sidecars(lance, lance_file, their_root)
    assert ours[0] == theirs[0]  # the descriptors' reprs
    assert ours[1].type == theirs[1].type and ours[1].to_pylist() == theirs[1].to_pylist()
    assert ours[2].equals(theirs[2], check_metadata=True)
    assert [p.replace(str(ours_root).lstrip("/"), "") for p in ours[3]] == [
        p.replace(str(their_root).lstrip("/"), "") for p in theirs[3]
    ]
    _write_data_file(lt_file, ours_root, ours[1], ours[2])
    _write_data_file(lance_file, their_root, theirs[1], theirs[2])
    assert _files(ours_root) == _files(their_root)
    assert sorted(_files(ours_root)) == [
        "data/part.lance",
        "data/part/01000000000000000000000000000000.blob",
        "data/part/10000000000000000000000000000000.blob",
    ]


def _commit(side: Any, root: Path, fragment: Any, data_file: Any, rows: int, **kwargs: Any) -> Any:
    schema = pa.schema([pa.field("id", pa.int64()), side.blob.blob_field("blob")])
    frag = fragment(id=0, files=[data_file("part.lance", [0, 1], [0, 1], 2, 2)], physical_rows=rows)
    return side.LanceDataset.commit(str(root), side.LanceOperation.Overwrite(schema, [frag], **kwargs))


EXPECTED = [
    b"hello",
    b"ab",
    None,
    b"",
    b"xyz",
    b"large",
    b"!",
    b"vv",
    b"fx",
    b"D" * 1000 + b"E",
    b"inline bytes",
    b"",
    None,
    b"hello",
    b"ab",
    b"D" * 1000 + b"E",
    b"234",
]


@pytest.mark.parametrize("writer", ["ours", "theirs"])
def test_committed_sidecar_blobs_are_read_by_both(tmp_path: Path, writer: str) -> None:
    side, files, frag, data_file = (
        (lt, lt_file, FragmentMetadata, DataFile)
        if writer == "ours"
        else (lance, lance_file, TheirFragment, TheirDataFile)
    )
    root = tmp_path / "ds"
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / "m.bin").write_bytes(b"0123456789")
    _, column, field, _ = _sidecars(side, files, root)
    _write_data_file(files, root, column, field)
    _commit(side, root, frag, data_file, len(column))
    for reader in (lance.dataset(str(root)), lt.dataset(str(root))):
        got = [
            f.read() if f is not None else None
            for f in reader.take_blobs("blob", indices=list(range(len(column))))
        ]
        assert got == EXPECTED, type(reader)
    assert lt.dataset(str(root)).to_table().equals(lance.dataset(str(root)).to_table())


def test_a_managed_blob_whose_file_is_missing_names_the_data_file(tmp_path: Path) -> None:
    """A managed descriptor naming a file that does not exist is damage of the data file that
    holds it (CorruptFileError naming that file), not a missing file of the version."""
    root = tmp_path / "ds"
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / "m.bin").write_bytes(b"0123456789")
    builder = lt.BlobDescriptorArrayBuilder("blob")
    builder.append_managed("blobs/m.bin", 2, 3)
    builder.append_managed("blobs/gone.bin", 0, 4)
    _write_data_file(lt_file, root, builder.finish(), builder.field)
    _commit(lt, root, FragmentMetadata, DataFile, 2)
    ds = lt.dataset(str(root))
    assert ds.take_blobs("blob", indices=[0])[0].read() == b"234"
    with pytest.raises(CorruptFileError, match=r"blobs/gone\.bin") as info:
        ds.take_blobs("blob", indices=[1])
    assert "part.lance" in str(info.value)


def test_managed_blobs_under_a_base_path_are_read_by_both(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "x.bin").write_bytes(b"abcdefgh")
    for name, side, files, frag, data_file in (
        ("ours", lt, lt_file, FragmentMetadata, DataFile),
        ("theirs", lance, lance_file, TheirFragment, TheirDataFile),
    ):
        root = tmp_path / name
        builder = side.BlobDescriptorArrayBuilder("blob")
        builder.append_managed("sub/x.bin", 1, 4, base_id=1)
        builder.append_inline(b"in")
        _write_data_file(files, root, builder.finish(), builder.field)
        bases = [side.DatasetBasePath(str(base), name="b", id=1)]
        _commit(side, root, frag, data_file, 2, initial_bases=bases)
    for name in ("ours", "theirs"):
        for reader in (lance.dataset(str(tmp_path / name)), lt.dataset(str(tmp_path / name))):
            assert [f.read() for f in reader.take_blobs("blob", indices=[0, 1])] == [b"bcde", b"in"]
    assert _files(tmp_path / "ours") == _files(tmp_path / "theirs")


def _errors(side: Any, files: Any, root: Path) -> list[str]:
    session = files.LanceFileSession(str(root))
    calls = [
        lambda: session.open_packed_blob_writer("data/x.bin", 1),
        lambda: session.open_packed_blob_writer("data/x.lance", 0),
        lambda: session.open_dedicated_blob_writer("data/x.lance", 1 << 33),
        lambda: session.open_packed_blob_writer("data/x.lance", 3).write_blobs(pa.array(["text"])),
        lambda: side.BlobDescriptorArrayBuilder("c").extend_packed(1, [0, 1], [1]),
        lambda: side.BlobDescriptorArrayBuilder("c").append_managed("/abs", 0, 0),
        lambda: side.BlobDescriptorArrayBuilder("c").append_managed("a//b", 0, 0),
        lambda: side.BlobDescriptorArrayBuilder("c").append_managed("a/../b", 0, 0),
        lambda: side.BlobDescriptorArrayBuilder("c").append_managed("s3://b/k", 0, 0),
        lambda: side.BlobDescriptorArrayBuilder("c").append_managed("", 0, 0),
        lambda: side.BlobDescriptorArrayBuilder("c").append_managed("dir/", 0, 0),
    ]
    out = []
    for call in calls:
        try:
            call()
            out.append("ok")
        except (ValueError, OverflowError) as exc:
            out.append(type(exc).__name__)
    return out


def test_bad_calls_fail_as_in_pylance(tmp_path: Path) -> None:
    assert _errors(lt, lt_file, tmp_path / "o") == _errors(lance, lance_file, tmp_path / "t")
    for side, files, root in ((lt, lt_file, tmp_path / "o"), (lance, lance_file, tmp_path / "t")):
        session = files.LanceFileSession(str(root))
        packed = session.open_packed_blob_writer("data/y.lance", 5)
        assert (
            packed.finish() == [] and (root / "data" / "y" / "10100000000000000000000000000000.blob").exists()
        )
        with pytest.raises(ValueError):
            packed.write_blob(b"late")
        with pytest.raises(ValueError):
            session.open_packed_blob_writer("data/y.lance", 6).field  # noqa: B018
        dedicated = session.open_dedicated_blob_writer("data/y.lance", 7)
        dedicated.finish()
        with pytest.raises(ValueError):
            dedicated.write(b"late")
        builder = side.BlobDescriptorArrayBuilder("c")
        builder.finish()
        with pytest.raises(ValueError):
            builder.finish()
        with pytest.raises(ValueError):
            builder.append_null()


def test_finish_array_and_its_field_as_pylance(tmp_path: Path) -> None:
    out = []
    for files in (lt_file, lance_file):
        writer = files.LanceFileSession(str(tmp_path / files.__name__)).open_packed_blob_writer(
            "data/z.lance", 9
        )
        assert writer.blob_id == 9
        writer.write_blob(b"q")
        array = writer.finish_array("col")
        out.append((array.to_pylist(), writer.field))
    assert out[0][0] == out[1][0]
    assert out[0][1].equals(out[1][1], check_metadata=True)


def test_descriptor_rows_of_an_unknown_kind_are_refused(tmp_path: Path) -> None:
    builder = lt.BlobDescriptorArrayBuilder("blob")
    builder.append_inline(b"x")
    column = builder.finish()
    bad = pa.StructArray.from_arrays(
        [pa.array([9], pa.uint8()), *column.flatten()[1:]], fields=list(column.type)
    )
    schema = pa.schema([builder.field])
    writer = lt_file.LanceFileSession(str(tmp_path)).open_writer("data/k.lance", schema=schema, version="2.2")
    with pytest.raises(lt.SchemaError, match="kind"):
        writer.write_batch(pa.table([bad], schema=schema))


def test_writer_classes_have_pylances_members() -> None:
    for name in ("PackedBlobWriter", "DedicatedBlobWriter", "BlobDescriptorArrayBuilder", "BlobDescriptor"):
        theirs = {n for n in dir(getattr(lance, name)) if not n.startswith("_")}
        assert theirs - set(dir(getattr(lt, name))) == set(), name
        assert getattr(lt.blob, name) is getattr(lt, name)
    for method in ("open_packed_blob_writer", "open_dedicated_blob_writer"):
        assert hasattr(lt_file.LanceFileSession, method)


def test_write_dataset_refuses_a_descriptor_column_and_leaves_nothing(tmp_path: Path) -> None:
    """pylance's write_dataset stores a descriptor column's rows as they are (its packed and
    dedicated rows then name sidecars of another data file); lance_table refuses the column by
    name, for every format, and writes nothing."""
    builder = lt.BlobDescriptorArrayBuilder("blob")
    builder.append_inline(b"x")
    table = pa.table([builder.finish()], schema=pa.schema([builder.field]))
    for version in ("2.2", "2.1"):
        with pytest.raises((lt.UnsupportedOperationError, lt.UnsupportedFormatError), match="blob"):
            lt.write_dataset(table, str(tmp_path / version), data_storage_version=version)
        assert not (tmp_path / version).exists()


def _session_calls(files: Any, root: Path) -> list[Any]:
    (root / "a" / "b").mkdir(parents=True)
    (root / "x.txt").write_bytes(b"0123456789")
    (root / "a" / "y").write_bytes(b"yy")
    (root / "a" / "b" / "z").write_bytes(b"z")
    session = files.LanceFileSession(str(root))
    out: list[Any] = [
        [session.contains(p) for p in ("x.txt", "a", "nope", "a/b/z")],
        sorted(session.list()),
        sorted(session.list("a")),
        session.list("nope"),
    ]
    for where in (None, "a", "nope"):
        listed = session.list_with_delimiter(where)
        out.append((sorted(listed.common_prefixes), sorted(listed.objects)))
    out.append(session.read_range("x.txt", 2, 3))
    session.upload_file(root / "x.txt", "up/x2")
    (root / "dl").mkdir()
    session.download_file("a/y", root / "dl" / "y")
    out.append(((root / "up" / "x2").read_bytes(), (root / "dl" / "y").read_bytes()))
    session.delete_file("up/x2")
    out.append(session.contains("up/x2"))
    for call in (
        lambda: session.read_range("nope", 0, 1),
        lambda: session.read_range("x.txt", 8, 5),
        lambda: session.delete_file("nope"),
        lambda: session.download_file("nope", root / "q"),
        lambda: session.upload_file(root / "nope", "u"),
    ):
        with pytest.raises(OSError):
            call()
    out.append(sorted(p.name for p in root.iterdir()))
    return out


def test_session_file_helpers_as_pylance(tmp_path: Path) -> None:
    assert _session_calls(lt_file, tmp_path / "o") == _session_calls(lance_file, tmp_path / "t")
    theirs = {n for n in dir(lance_file.LanceFileSession) if not n.startswith("_")}
    assert theirs - set(dir(lt_file.LanceFileSession)) == set()
