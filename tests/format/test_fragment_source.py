"""Fragments checked in bulk when a manifest is decoded and converted when first asked for
(lance_table.format.fragment_source): the same facts, rows, errors and bytes as converting each
fragment, for manifests lance_table and pylance write."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table._proto import table_pb2
from lance_table.errors import CorruptFileError
from lance_table.format import fragment as fragment_module
from lance_table.format import fragment_facts, fragment_source, manifest_file
from lance_table.format.manifest_file import _parse, decode_manifest_file, encode_manifest_file
from lance_table.storage import open_storage
from lance_table.table import versions
from lance_table.table.session import clear_caches

lance = pytest.importorskip("lance")


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "s": [f"r{i}" for i in range(n)]})


def _history(root: Path, writer: str, **options: Any) -> str:
    """Five appends of different sizes, a delete in two fragments, then a column added (two data
    files in every fragment), written by ``writer``."""
    uri = str(root / writer)
    write = lt.write_dataset if writer == "lance_table" else lance.write_dataset
    opened = lt.dataset if writer == "lance_table" else lance.dataset
    for i, n in enumerate((30, 10, 20, 5, 40)):
        write(_rows(i * 100, n), uri, mode="append" if i else "create", **(options if not i else {}))
    opened(uri).delete("id = 3 OR id = 101 OR id = 102")
    if writer == "lance_table":
        lt.dataset(uri).add_columns({"y": "id * 2"})
    else:
        lance.dataset(uri).add_columns({"y": "id * 2"})
    return uri


def _manifests(uri: str) -> list[tuple[bytes, str]]:
    storage = open_storage(uri)
    return [(storage.read(e.path), e.path) for e in versions.list_versions(storage)]


def _converted(data: bytes, path: str) -> Any:
    """The manifest of ``data`` decoded as before: every fragment converted one by one."""
    pb, _, _ = _parse(data, path)
    fragments = fragment_module.checked_fragments(pb.fragments, path)
    return fragments, pb


@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
@pytest.mark.parametrize("options", [{}, {"data_storage_version": "2.0"}, {"enable_stable_row_ids": True}])
def test_bulk_facts_rows_and_bytes_equal_the_converted_fragments(tmp_path, writer, options):
    uri = _history(tmp_path, writer, **options)
    for data, path in _manifests(uri):
        m = decode_manifest_file(data, path).manifest
        source = m.fragment_source
        assert source is not None, path  # every version here has the common shape
        fragments, pb = _converted(data, path)
        assert source.raws == [f.SerializeToString() for f in pb.fragments]  # canonical bytes
        assert source.facts == fragment_facts._first(fragments)
        assert m.num_rows == sum(f.num_rows for f in fragments)
        assert m.data_formats == frozenset().union(*(f.formats for f in fragments))
        # written back unconverted: the very bytes of the converted manifest
        written = encode_manifest_file(m, b"txn")
        assert m.fragment_source is source and source._converted is None
        assert m.fragments == fragments
        assert written == encode_manifest_file(dataclasses.replace(m, fragments=fragments), b"txn")
    facts = m.fragment_facts  # (the history has the shapes it should)
    assert facts.deletions and facts.row_ids == bool(options.get("enable_stable_row_ids"))
    assert all(len(f.files) == 2 for f in m.fragments)


def test_the_converted_tuple_is_kept_with_its_facts(tmp_path):
    uri = _history(tmp_path, "lance_table")
    data, path = _manifests(uri)[-1]
    m = decode_manifest_file(data, path).manifest
    first = m.fragments
    assert m.fragments is first
    assert fragment_facts.facts(first) is m.fragment_source.facts  # (not walked again)
    ds = lt.dataset(uri)
    ds.insert(_rows(1000, 3))  # an append extends the facts of the tuple it read
    assert ds.count_rows() == lance.dataset(uri).count_rows() == 105 - 3 + 3


def _edit_fragments(data: bytes, path: str, edit: Callable[[Any], None]) -> bytes:
    """The manifest file ``data`` with its fragments edited (the framing rebuilt)."""
    _, pb = _converted(data, path)
    edit(pb)
    m = decode_manifest_file(data, path).manifest
    new = tuple(fragment_module.Fragment.from_pb(f) for f in pb.fragments)
    return encode_manifest_file(dataclasses.replace(m, fragments=new), b"")


@pytest.mark.parametrize(
    "edit, bulk",
    [
        (lambda pb: pb.fragments[0].deletion_file.CopyFrom(_deletion(4)), True),  # of 30 rows
        # 11 of 30 rows, more than the smallest fragment holds (5)
        (lambda pb: pb.fragments[0].deletion_file.CopyFrom(_deletion(11)), False),
        (lambda pb: setattr(pb.fragments[0].files[0], "path", "sub/a..b.lance"), False),  # nested
        (lambda pb: setattr(pb.fragments[0].files[0], "path", "d/" * 130 + "x.lance"), False),  # long
        (lambda pb: setattr(pb.fragments[2], "physical_rows", 2**32), True),
        (lambda pb: setattr(pb.fragments[0], "id", 1), True),  # an id repeated
        (lambda pb: setattr(pb.fragments[3], "id", 0), False),  # id 0 twice: neither is written
    ],
)
def test_other_shapes_are_converted_one_by_one_with_the_same_result(tmp_path, edit, bulk):
    uri = str(tmp_path / "ds")
    for i, n in enumerate((30, 10, 20, 5)):
        lt.write_dataset(_rows(i * 100, n), uri, mode="append" if i else "create")
    data, path = _manifests(uri)[-1]
    data = _edit_fragments(data, path, edit)
    m = decode_manifest_file(data, path).manifest
    assert (m.fragment_source is not None) == bulk
    fragments, _ = _converted(data, path)
    assert m.fragments == fragments
    assert m.fragment_facts == fragment_facts._first(fragments)
    assert m.num_rows == sum(f.num_rows for f in fragments)


def _deletion(n: int) -> Any:
    return table_pb2.DeletionFile(file_type=0, read_version=1, id=5, num_deleted_rows=n)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda pb: setattr(pb.fragments[1].files[0], "path", "../x.lance"), "inside the dataset"),
        (lambda pb: setattr(pb.fragments[1].files[0], "path", ""), "is empty"),
        (lambda pb: setattr(pb.fragments[1].files[0], "path", "a\nb"), "control character"),
        (lambda pb: setattr(pb.fragments[1], "physical_rows", 2**33), "more than 2\\*\\*32"),
        (lambda pb: pb.fragments[1].deletion_file.CopyFrom(_deletion(0)), "deletes 0 of its 10 rows"),
        (lambda pb: pb.fragments[0].deletion_file.CopyFrom(_deletion(31)), "deletes 31 of its 30 rows"),
        (lambda pb: setattr(pb.fragments[2].files[0], "file_minor_version", 1), "has format 2.1"),
    ],
)
def test_damaged_fragments_give_the_error_of_the_conversion(tmp_path, edit, message):
    uri = str(tmp_path / "ds")
    for i, n in enumerate((30, 10, 20)):
        lt.write_dataset(_rows(i * 100, n), uri, mode="append" if i else "create")
    data, path = _manifests(uri)[-1]
    data = _edit_fragments(data, path, edit)
    with pytest.raises(CorruptFileError, match=message) as info:
        decode_manifest_file(data, path)
    assert info.value.path == path


def test_open_count_tag_and_restore_convert_no_fragment(tmp_path, monkeypatch):
    uri = _history(tmp_path, "pylance")
    expected = lance.dataset(uri, version=3).to_table()

    def refuse(pb: Any, where: str) -> Any:
        raise AssertionError("a fragment was converted")

    clear_caches()
    monkeypatch.setattr(fragment_module, "_checked_fragment", refuse)
    ds = lt.dataset(uri)
    assert ds.count_rows() == lance.dataset(uri).count_rows() == 102
    ds.tags.create("t", 3)
    lt.dataset(uri, version=3).restore()  # the latest's fragments and version 3's: written as read
    monkeypatch.undo()
    restored = lance.dataset(uri)
    assert restored.version == 8 and restored.tags.list()["t"]["version"] == 3
    assert restored.to_table() == expected == lt.dataset(uri).to_table()
    assert [f.fragment_id for f in restored.get_fragments()] == [0, 1, 2]


def test_a_source_pickles_and_copies(tmp_path):
    import copy
    import pickle

    uri = _history(tmp_path, "lance_table")
    data, path = _manifests(uri)[-1]
    m = decode_manifest_file(data, path).manifest
    for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert other.fragment_source is not None and other.fragment_source.raws == m.fragment_source.raws
        assert other == m and other.num_rows == m.num_rows


def test_read_fragments_takes_only_plain_paths():
    from lance_table.format.paths import check_relative_path

    plain = [b"a.lance", b"b-1_x.lance", b"x" * 255, b"a..b", b"a.", b"0", b"_a"]
    assert fragment_source._plain(plain)
    for bad in ["", ".a", "a/.b", "a//b", "a/", "/a", "a\\b", "a\nb", "a:b", "é", "x" * 256, "sub/a", "-x"]:
        assert not fragment_source._plain([b"ok.lance", bad.encode()]), bad
        assert not fragment_source._plain([bad.encode(), b"ok.lance"]), bad
        slow_but_plain = bad in (".a", "a/.b", "é", "sub/a", "-x")  # accepted, the slower way
        with contextlib.nullcontext() if slow_but_plain else pytest.raises(CorruptFileError):
            check_relative_path(bad, "w", "p")


def test_a_damaged_column_list_is_refused_when_the_fragment_is_made(tmp_path):
    """The fields and columns of a data file are facts of the fragment objects only: a garbled
    list of them is refused (typed, naming the manifest) when the fragments are made, not when
    the manifest is decoded (as before)."""
    uri = str(tmp_path / "ds")
    for i, n in enumerate((30, 10)):
        lt.write_dataset(_rows(i * 100, n), uri, mode="append" if i else "create")
    data, path = _manifests(uri)[-1]
    m = decode_manifest_file(data, path).manifest
    good = m.fragments[1]
    file = table_pb2.DataFile()
    good.files[0].to_pb(file)
    file.ClearField("fields")
    garbled = file.SerializeToString() + b"\x12\x02\xff\xff"  # ``fields``: a varint that never ends
    frag = table_pb2.DataFragment(id=1, physical_rows=10)
    raw = frag.SerializeToString() + b"\x12" + bytes([len(garbled)]) + garbled
    bad = dataclasses.replace(good)
    bad.__dict__["pb_bytes"] = raw
    manifest_file._ENTRIES.clear()  # (entries kept for equal fragments would be joined instead)
    data = encode_manifest_file(dataclasses.replace(m, fragments=(m.fragments[0], bad)), b"")
    with pytest.raises(CorruptFileError, match="does not parse"):
        _parse(data, path)  # the whole manifest as a protobuf: refused at once
    fragment_module._FRAGMENTS.clear()
    decoded = decode_manifest_file(data, path).manifest
    assert decoded.num_rows == 40
    with pytest.raises(CorruptFileError, match="fragment 1 of the manifest does not parse") as info:
        decoded.fragments  # noqa: B018
    assert info.value.path == path


@pytest.mark.parametrize("writer", ["lance_table", "pylance"])
def test_a_take_converts_only_the_fragments_it_touches(tmp_path, monkeypatch, writer):
    """A take maps its rows to fragments from the bulk row counts (less the rows each deletion
    file records) and converts only the fragments that hold them. It returns pylance's rows."""
    uri = str(tmp_path / writer)
    write = lt.write_dataset if writer == "lance_table" else lance.write_dataset
    sizes = (7, 3, 11, 1, 5, 9, 2)
    start = 0
    for i, n in enumerate(sizes):
        write(_rows(start, n), uri, mode="append" if i else "create")
        start += n
    converted: list[int] = []
    original = fragment_module._checked_fragment

    def counting(pb: Any, where: str) -> Any:
        converted.append(pb.id)
        return original(pb, where)

    monkeypatch.setattr(fragment_module, "_checked_fragment", counting)
    indices = [33, 0, 10, 22, 21]
    for deleted, touched, ids in (
        (None, [0, 2, 3, 4, 5], [33, 0, 10, 22, 21]),
        ("id = 12", [0, 2, 4, 5], [34, 0, 10, 23, 22]),  # a deletion file in fragment 2
        ("id = 1 OR id = 24", [0, 2, 4, 6], [36, 0, 11, 25, 23]),  # and in 0 and 4
        # a deletion file of two rows where a fragment holds one: the bulk checks cannot tell
        # them apart, so every fragment is converted (and checked) one by one
        ("id = 5", list(range(len(sizes))), [37, 0, 13, 26, 25]),
    ):
        if deleted:
            lance.dataset(uri).delete(deleted)
        clear_caches()
        converted.clear()
        got = lt.dataset(uri).take(indices)
        assert got == lance.dataset(uri).take(indices)
        assert sorted(converted) == touched
        assert got.column("id").to_pylist() == ids
    last = sum(sizes) - 4  # four rows were deleted
    assert lt.dataset(uri).take([last - 1]).column("id").to_pylist() == [sum(sizes) - 1]
    with pytest.raises(IndexError):
        lt.dataset(uri).take([last])
    clear_caches()
    lance.dataset(uri).optimize.compact_files()  # no deletion file again: one fragment
    assert lt.dataset(uri).take([0, last - 1]) == lance.dataset(uri).take([0, last - 1])
