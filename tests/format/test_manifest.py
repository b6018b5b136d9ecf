"""Manifest files: the framing, the dataclasses and their protobuf edge."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest

from lance_table.errors import CorruptFileError
from lance_table.format.manifest import (
    DELETION_ARROW,
    DELETION_BITMAP,
    DataFile,
    DeletionFile,
    Fragment,
    Manifest,
)
from lance_table.format.manifest_file import decode_manifest_file, encode_manifest_file
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


def test_a_decoded_manifest_converts_its_schema_once(monkeypatch):
    from lance_table.format import manifest as manifest_module

    calls = []
    convert = manifest_module.fields_from_pb
    monkeypatch.setattr(manifest_module, "fields_from_pb", lambda pb: calls.append(1) or convert(pb))
    manifest_module._SCHEMAS.clear()
    m = _manifest(schema_metadata={"meta": b"x"})
    mf = decode_manifest_file(encode_manifest_file(m, b""), "x.manifest")
    assert mf.manifest == m
    assert len(calls) == 1  # the schema check's fields are the manifest's
    # the same schema's bytes again (another version): its fields as they were converted
    again = decode_manifest_file(encode_manifest_file(replace(m, version=m.version + 1), b""), "y.manifest")
    assert again.manifest.fields is mf.manifest.fields
    assert len(calls) == 1
    # (made without its __init__: every field is set all the same)
    from dataclasses import fields

    assert {f.name for f in fields(Manifest)} <= set(vars(mf.manifest))


@pytest.mark.parametrize("kept", ["nothing", "branch", "aux", "base_paths"])
def test_the_manifest_fields_lance_table_does_not_use_are_carried_forward(kept):
    from lance_table._proto import table_pb2

    rest = table_pb2.Manifest()
    if kept == "branch":
        rest.branch = "dev"
    elif kept == "aux":
        rest.version_aux_data = 7
    elif kept == "base_paths":
        rest.base_paths.add(id=1, path="s3://elsewhere", is_dataset_root=True)
    m = _manifest(passthrough=rest.SerializeToString())
    back = decode_manifest_file(encode_manifest_file(m, b""), "x.manifest").manifest
    assert back.passthrough == m.passthrough
    assert (back.passthrough == b"") == (kept == "nothing")
    assert back.config == {} and back.table_metadata == {} and back.schema_metadata == {}


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


@pytest.mark.parametrize(
    "fragment",
    [
        Fragment(3, (DataFile("a.lance", (0, 1), (0, 1), 2, 0, 1234),), 10),
        Fragment(
            4, (DataFile("a.lance", (0,), (0,), 2, 1), DataFile("b/c.lance", (1,), (), 2, 1, base_id=2)), 7
        ),
        Fragment(5, (DataFile("a.lance", (0,), (0,), 2, 1),), 10, DeletionFile("bitmap", 3, 9, 2)),
    ],
)
def test_fragments_converted_in_one_pass_are_those_from_pb_makes(fragment):
    from lance_table._proto import table_pb2
    from lance_table.format import fragment as fragment_module

    pb = table_pb2.DataFragment()
    fragment.to_pb(pb)
    got = fragment_module._checked_fragment(pb, "x.manifest")
    assert got == Fragment.from_pb(pb) == fragment
    assert got.formats == fragment.formats


@pytest.mark.parametrize(
    "fragment, problem",
    [
        (Fragment(0, (DataFile("../x.lance", (0,), (0,), 2, 0),), 10), "data file of fragment 0"),
        (
            Fragment(1, (DataFile("a.lance", (0,), (0,), 2, 0), DataFile("/b.lance", (1,), (1,), 2, 0)), 5),
            "absolute",
        ),
        (Fragment(2, (DataFile("a.lance", (0,), (0,), 2, 0),), 2**33), "physical rows"),
        (
            Fragment(3, (DataFile("a.lance", (0,), (0,), 2, 0),), 10, DeletionFile("arrow", 1, 1, 11)),
            "deletes 11",
        ),
    ],
)
def test_fragments_converted_in_one_pass_are_checked(fragment, problem):
    from lance_table._proto import table_pb2
    from lance_table.format import fragment as fragment_module

    pb = table_pb2.DataFragment()
    fragment.to_pb(pb)
    with pytest.raises(CorruptFileError, match=problem) as one_pass:
        fragment_module._checked_fragment(pb, "x.manifest")
    with pytest.raises(CorruptFileError) as both:
        fragment_module.check_fragments([pb], "x.manifest")
    assert str(one_pass.value) == str(both.value)


def test_fragments_shared_by_versions_are_converted_once(tmp_path, monkeypatch):
    import pyarrow as pa

    import lance_table as lt
    from lance_table.format import fragment as fragment_module
    from lance_table.format import manifest_file
    from lance_table.storage import open_storage
    from lance_table.table import versions

    uri = str(tmp_path / "ds")
    for i in range(5):
        lt.write_dataset(pa.table({"id": [i]}), uri, mode="append" if i else "create")
    fragment_module._FRAGMENTS.clear()
    converted = []
    real = fragment_module._checked_fragment

    def counting(pb, where):
        converted.append(pb.id)
        return real(pb, where)

    monkeypatch.setattr(fragment_module, "_checked_fragment", counting)
    storage = open_storage(uri)
    decoded = [
        manifest_file.decode_manifest_file(storage.read(e.path), e.path).manifest
        for e in versions.list_versions(storage)
    ]
    assert converted == []  # decoding converts none (they are converted when first asked for)
    assert [m.num_rows for m in decoded] == [1, 2, 3, 4, 5]
    assert [[f.id for f in m.fragments] for m in decoded] == [list(range(i + 1)) for i in range(5)]
    assert sorted(converted) == [0, 1, 2, 3, 4]  # 15 fragments in 5 manifests, 5 distinct
    assert decoded[4].fragments[0] is decoded[0].fragments[0]


def test_versions_decode_no_fragments_and_agree_with_pylance(tmp_path, monkeypatch):
    import pyarrow as pa

    import lance_table as lt
    from lance_table.format import manifest_file

    uri = str(tmp_path / "ds")
    for i in range(4):
        lt.write_dataset(pa.table({"id": [i]}), uri, mode="append" if i else "create", commit_message=f"m{i}")
    lt.dataset(uri).delete("id = 1")

    def refuse(*args):
        raise AssertionError("versions() converted a fragment")

    ds = lt.dataset(uri)
    monkeypatch.setattr(manifest_file, "checked_fragments", refuse)
    ours = ds.versions()
    assert [(v["version"], v["operation"]) for v in ours] == [
        (1, "overwrite"),
        (2, "append"),
        (3, "append"),
        (4, "append"),
        (5, "delete"),
    ]
    assert [v["commit_message"] for v in ours][:4] == ["m0", "m1", "m2", "m3"]
    lance = pytest.importorskip("lance")
    theirs = lance.dataset(uri).versions()
    assert [v["version"] for v in theirs] == [v["version"] for v in ours]
    assert [v["timestamp"] for v in theirs] == [v["timestamp"] for v in ours]


def test_opening_and_committing_parse_a_bounded_number_of_version_names(tmp_path, monkeypatch):
    """With V2 manifest names, the newest version is the smallest name and the versions a commit
    must rebase over are the names below its read version's: neither depends on the history's length."""
    import pyarrow as pa

    import lance_table as lt
    from lance_table.format import paths

    uri = str(tmp_path / "ds")
    for i in range(30):
        lt.write_dataset(pa.table({"id": [i]}), uri, mode="append" if i else "create")
    parsed: list[str] = []

    def counting(real):
        def count(name: str):
            parsed.append(name)
            return real(name)

        return count

    for name in ("parse_manifest_name", "is_v2_name", "is_v1_name"):  # each look at one name
        monkeypatch.setattr(paths, name, counting(getattr(paths, name)))
    ds = lt.dataset(uri)
    assert ds.version == 30 and len(parsed) <= 2, parsed  # the smallest name, the hint file's
    old = lt.dataset(uri, version=3)
    assert old.count_rows() == 3
    parsed.clear()
    ds = lt.write_dataset(pa.table({"id": [99]}), uri, mode="append")
    assert ds.version == 31 and len(parsed) <= 3, parsed
    parsed.clear()
    lt.write_dataset(pa.table({"id": [100]}), uri, mode="append")
    ds.delete("id = 0")  # read version 31: rebases over version 32 only
    assert lt.dataset(uri).count_rows() == 31 and len(parsed) <= 8, parsed


def test_flags_and_other_changes_are_made_in_one_copy():
    from dataclasses import replace

    from lance_table.format.transaction import Append, Transaction
    from lance_table.table.commit.apply import next_manifest

    m = _manifest(index_section=b"idx")
    assert m.reader_feature_flags and m.writer_feature_flags  # (a deletion file)
    bare = replace(m, reader_feature_flags=0, writer_feature_flags=0)
    flags = (m.reader_feature_flags, m.writer_feature_flags)
    again = bare.with_flags(version=9, tag="t")
    assert (again.version, again.tag) == (9, "t")
    assert (again.reader_feature_flags, again.writer_feature_flags) == flags
    frag = Fragment(id=0, files=(DataFile("b.lance", (0, 1), (0, 1), 2, 0, 50),), physical_rows=4)
    txn = Transaction(m.version, Append((frag,)))
    nxt = next_manifest(bare, txn, now_ns=5)
    assert nxt.version == m.version + 1 and nxt.timestamp_ns == m.timestamp_ns + 1
    assert [f.id for f in nxt.fragments] == [0, 1] and nxt.max_fragment_id == 1
    assert nxt.index_section == b"idx" and nxt.tag == ""
    assert (nxt.reader_feature_flags, nxt.writer_feature_flags) == flags
    assert nxt.transaction_file.startswith(f"{m.version}-")
