"""The bytes and names a commit leaves on disk, as LANCE_FORMAT.md describes them."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import make_rows
from pyroaring import BitMap

import lance_table as lt
from lance_table._proto import table_pb2, transaction_pb2
from lance_table.format import flags, paths
from lance_table.format.manifest_file import decode_manifest_file, encode_manifest_file
from lance_table.storage import open_storage
from lance_table.table import versions
from lance_table.table.deletion import choose_kind, encode_deletions, read_deletions


def _manifest_pb(path: Path) -> tuple[table_pb2.Manifest, bytes]:
    data = path.read_bytes()
    pos, major, minor = struct.unpack_from("<QHH", data, len(data) - 16)
    assert data[-4:] == b"LANC" and (major, minor) == (0, 2)
    (length,) = struct.unpack_from("<I", data, pos)
    assert pos + 4 + length + 16 == len(data)
    pb = table_pb2.Manifest()
    pb.ParseFromString(data[pos + 4 : pos + 4 + length])
    return pb, data


def test_manifest_framing_names_and_fields(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 100), uri, commit_message="hello", data_storage_version="2.0")
    names = sorted(os.listdir(uri / "_versions"))
    assert names == ["18446744073709551614.manifest", "latest_version_hint.json"]
    assert (uri / "_versions/latest_version_hint.json").read_bytes() == b'{"version":1}'
    pb, data = _manifest_pb(uri / "_versions/18446744073709551614.manifest")
    assert pb.version == 1
    assert pb.HasField("transaction_section") and pb.transaction_section == 0
    assert not pb.HasField("transaction_section_deprecated")
    assert pb.HasField("max_fragment_id") and pb.max_fragment_id == 0
    assert pb.writer_version.library == "lance_table"
    assert (pb.data_format.file_format, pb.data_format.version) == ("lance", "2.0")
    assert pb.timestamp.seconds > 1_700_000_000
    assert pb.reader_feature_flags == 0 and pb.writer_feature_flags == 0
    frag = pb.fragments[0]
    assert (frag.files[0].file_major_version, frag.files[0].file_minor_version) == (2, 0)
    assert list(frag.files[0].fields) == list(range(len(pb.fields)))
    assert len(frag.files[0].path) == 56 and set(frag.files[0].path[:24]) <= {"0", "1"}
    # inline transaction == .txn file, named {read_version}-{uuid}.txn
    (txn_len,) = struct.unpack_from("<I", data, 0)
    inline = data[4 : 4 + txn_len]
    txn_file = uri / "_transactions" / pb.transaction_file
    assert pb.transaction_file.startswith("0-") and txn_file.read_bytes() == inline
    txn = transaction_pb2.Transaction()
    txn.ParseFromString(inline)
    assert txn.WhichOneof("operation") == "overwrite"
    assert txn.transaction_properties["__lance_commit_message"] == "hello"
    assert len(txn.overwrite.fragments) == 1 and txn.overwrite.fragments[0].id == 0


def test_empty_dataset_has_no_max_fragment_id(tmp_path):
    ds = lt.write_dataset(make_rows(0, 0), tmp_path / "ds")
    pb, _ = _manifest_pb(tmp_path / "ds/_versions" / paths.manifest_name(1))
    assert not pb.HasField("max_fragment_id")
    assert ds.count_rows() == 0 and ds.to_table().num_rows == 0
    assert ds.schema == make_rows(0, 0).schema


def test_flags_follow_deletions(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(make_rows(0, 100), uri)
    ds.delete("id < 20")  # 20% deleted: above the 10% materialization threshold
    assert (ds.manifest.reader_feature_flags, ds.manifest.writer_feature_flags) == (1, 1)
    ds.compact_files()
    assert ds.count_rows() == 80
    assert (ds.manifest.reader_feature_flags, ds.manifest.writer_feature_flags) == (0, 0)


def test_fragment_ids_keep_increasing_through_overwrite(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 30), uri, max_rows_per_file=10)
    ds = lt.write_dataset(make_rows(0, 20), uri, mode="overwrite", max_rows_per_file=10)
    assert [f.id for f in ds.manifest.fragments] == [3, 4]
    assert ds.manifest.max_fragment_id == 4
    assert [f.id for f in ds.manifest.fields] == list(range(len(ds.manifest.fields)))


def test_hint_is_only_a_hint(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    lt.write_dataset(make_rows(10, 10), uri, mode="append")
    for bad in (b'{"version":1}', b'{"version":7}', b"garbage"):
        (uri / "_versions/latest_version_hint.json").write_bytes(bad)
        assert lt.dataset(uri).version == 2
    (uri / "_versions/latest_version_hint.json").unlink()
    assert lt.dataset(uri).version == 2


def test_v1_names_are_read_and_kept(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    lt.write_dataset(make_rows(10, 10), uri, mode="append")
    for v in (1, 2):
        os.rename(uri / "_versions" / paths.manifest_name(v), uri / "_versions" / f"{v}.manifest")
    assert lt.dataset(uri).version == 2
    assert lt.dataset(uri, version=1).count_rows() == 10
    lt.write_dataset(make_rows(20, 10), uri, mode="append")
    assert (uri / "_versions/3.manifest").exists()
    (uri / "_versions" / paths.manifest_name(9)).write_bytes(b"x")
    with pytest.raises(lt.CorruptFileError, match="naming schemes"):
        lt.dataset(uri)


def _set_flags(uri: Path, reader: int, writer: int) -> None:
    storage = open_storage(str(uri))
    entry = versions.latest_entry(storage)
    mf = versions.read_manifest_file(storage, entry)
    from dataclasses import replace

    m = replace(mf.manifest, reader_feature_flags=reader, writer_feature_flags=writer)
    storage.write(entry.path, encode_manifest_file(m, mf.transaction or b""))


@pytest.mark.parametrize("flag", [64, 512, 4096])
def test_unknown_reader_flags_refuse_to_read(tmp_path, flag):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    _set_flags(uri, flag, 0)
    with pytest.raises(lt.UnsupportedFormatError, match="reader features"):
        lt.dataset(uri)


def test_the_base_paths_flag_is_read_and_written(tmp_path):
    """Datasets with base paths are read and written; each commit sets the flag from the bases the
    manifest registers (none here: it is cleared)."""
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    _set_flags(uri, flags.BASE_PATHS, flags.BASE_PATHS)
    assert lt.dataset(uri).count_rows() == 10
    ds = lt.write_dataset(make_rows(10, 10), uri, mode="append")
    assert ds.count_rows() == 20
    assert not ds.manifest.writer_feature_flags & flags.BASE_PATHS


@pytest.mark.parametrize("flag", [64, 1 << 20])
def test_unsupported_writer_flags_refuse_to_write(tmp_path, flag):
    uri = tmp_path / "ds"
    lt.write_dataset(make_rows(0, 10), uri)
    _set_flags(uri, 0, flag)
    assert lt.dataset(uri).count_rows() == 10  # reading is fine
    with pytest.raises(lt.UnsupportedFormatError, match="writer features"):
        lt.write_dataset(make_rows(10, 10), uri, mode="append")
    with pytest.raises(lt.UnsupportedFormatError, match="writer features"):
        lt.dataset(uri).delete("id = 1")
    assert lt.dataset(uri).version == 1


def test_2_2_datasets_stay_2_2_and_pylance_keeps_writing_them(tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    cols = ["id", "x", "s", "v"]
    lance.write_dataset(make_rows(0, 10).select(cols), uri)  # pylance's default format
    ds = lt.write_dataset(make_rows(10, 10).select(cols), uri, mode="append")
    ds.delete("id = 3")
    ds.compact_files()
    expected = pa.concat_tables([make_rows(0, 10), make_rows(10, 10)]).select(cols)
    expected = expected.filter(pc.not_equal(expected["id"], 3))
    theirs = lance.dataset(uri)
    assert theirs.to_table().sort_by("id").equals(expected)
    versions = {
        (f.file_major_version, f.file_minor_version) for fr in theirs.get_fragments() for f in fr.data_files()
    }
    assert versions == {(2, 2)} and ds.data_storage_version == "2.2"
    lance.write_dataset(make_rows(20, 5).select(cols), uri, mode="append")
    assert (
        lt.dataset(uri)
        .to_table()
        .sort_by("id")
        .equals(pa.concat_tables([expected, make_rows(20, 5).select(cols)]))
    )
    ds = lt.write_dataset(make_rows(30, 4).select(cols), uri, mode="overwrite")
    assert ds.data_storage_version == "2.2"
    assert lance.dataset(uri).to_table().equals(make_rows(30, 4).select(cols))


def test_manifest_round_trips_through_our_codec(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(make_rows(0, 50), uri, max_rows_per_file=20)
    ds.delete("id < 5")
    path = uri / "_versions" / paths.manifest_name(ds.version)
    mf = decode_manifest_file(path.read_bytes(), str(path))
    assert encode_manifest_file(mf.manifest, mf.transaction or b"") == path.read_bytes()


# -- deletion files ------------------------------------------------------------------------------


def test_deletion_kind_rules_follow_pylance():
    assert choose_kind(None, 4999) == "arrow"
    assert choose_kind(None, 5000) == "bitmap"
    from lance_table.format.manifest import DeletionFile

    arrow = DeletionFile("arrow", 1, 1, 4999)
    bitmap = DeletionFile("bitmap", 1, 1, 6000)
    assert choose_kind(arrow, 5000) == "arrow"
    assert choose_kind(arrow, 5001) == "bitmap"
    assert choose_kind(bitmap, 10) == "bitmap"


def test_incremental_deletes_switch_to_bitmap_after_5000(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(pa.table({"id": np.arange(20_000)}), uri)
    kinds = []
    for hi in (4999, 5000, 5001):
        ds.delete(f"id < {hi}")
        df = ds.manifest.fragments[0].deletion_file
        kinds.append((df.kind, df.num_deleted_rows))
        name = paths.deletion_file_path(0, df.read_version, df.id, df.kind == "bitmap")
        assert (uri / name).exists()
    assert kinds == [("arrow", 4999), ("arrow", 5000), ("bitmap", 5001)]
    assert ds.count_rows() == 20_000 - 5001


def test_arrow_deletion_file_format(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(pa.table({"id": np.arange(100)}), uri)
    ds.delete("id = 7 OR id = 3")
    df = ds.manifest.fragments[0].deletion_file
    data = (uri / paths.deletion_file_path(0, df.read_version, df.id, False)).read_bytes()
    assert data[:6] == b"ARROW1" and data[-6:] == b"ARROW1"
    table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    assert table.schema == pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])
    assert sorted(table.column(0).to_pylist()) == [3, 7]


def test_readers_accept_unsorted_arrow_and_both_roaring_forms(tmp_path):
    uri = tmp_path / "ds"
    # the manifest must count the rows the rewritten file deletes
    ds = lt.write_dataset(pa.table({"id": np.arange(10_000)}), uri)
    ds.delete("id IN (0, 1, 5, 9)")
    frag = ds.manifest.fragments[0]
    storage = open_storage(str(uri))
    df = frag.deletion_file
    path = uri / paths.deletion_file_path(0, df.read_version, df.id, False)
    unsorted = pa.table(
        [pa.array([9, 1, 5, 0], pa.uint32())], schema=pa.schema([pa.field("row_id", pa.uint32(), False)])
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, unsorted.schema) as w:
        w.write_table(unsorted)
    path.write_bytes(sink.getvalue().to_pybytes())
    assert read_deletions(storage, frag).tolist() == [0, 1, 5, 9]
    from dataclasses import replace

    values = list(range(100, 7000))
    for bitmap in (BitMap(values), _plain_bitmap(values)):
        bfrag = replace(frag, deletion_file=replace(df, kind="bitmap", num_deleted_rows=len(values)))
        bpath = uri / paths.deletion_file_path(0, df.read_version, df.id, True)
        bpath.write_bytes(bitmap.serialize())
        assert read_deletions(storage, bfrag).tolist() == values


def _plain_bitmap(values: list[int]) -> BitMap:
    b = BitMap()
    for v in values:
        b.add(v)
    return b


def test_bitmap_bytes_match_pylance_cookie():
    data = encode_deletions(np.arange(5000), "bitmap")
    assert struct.unpack_from("<I", data, 0)[0] == 12346  # no run containers, as pylance writes


def test_tag_file_format(tmp_path):
    uri = tmp_path / "ds"
    ds = lt.write_dataset(make_rows(0, 10), uri)
    ds.tags.create("v1", 1)
    body = json.loads((uri / "_refs/tags/v1.json").read_text())
    assert set(body) == {"branch", "version", "createdAt", "updatedAt", "manifestSize", "metadata"}
    assert body["version"] == 1 and body["branch"] is None and body["metadata"] == {}
    assert body["manifestSize"] == (uri / "_versions" / paths.manifest_name(1)).stat().st_size
    assert body["createdAt"].endswith("Z") and len(body["createdAt"]) == 30
    assert (uri / "_refs/tags/v1.json").read_text().startswith('{\n  "branch": null')
