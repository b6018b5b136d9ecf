"""Datasets written by older pylance releases (``tests/corpus/older_pylance``, made by
``scripts/make_older_pylance_corpus.py``) read and continue as pylance 14 reads and continues them.

The corpus covers V1 manifest names, ``_latest.manifest``, manifests without ``data_format``, data
files recorded as version 0.0 / 0.2 (legacy) and 0.3 (2.0), 2.0 files whose strings are stored as
``list<u8>`` (pylance 0.13), and transaction files of older writers. pylance 14 is the oracle for
every version: nothing expected is stored.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import random
import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table._proto import table_pb2
from lance_table.errors import LanceTableError
from lance_table.file.reader import LanceFileReader
from lance_table.format import paths
from lance_table.format.manifest_file import decode_manifest_file
from lance_table.storage import open_storage
from lance_table.table import versions as versions_mod

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "older_pylance"
DATASETS = sorted(p for p in CORPUS.glob("*/*") if (p / paths.VERSIONS_DIR).is_dir())
# An unstable 2.1 (pylance 0.25) that pylance 14 cannot read either.
UNREADABLE = {"0.25.2/v2_1"}


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _manifests(path: Path) -> dict[int, Path]:
    out = {}
    for f in (path / paths.VERSIONS_DIR).iterdir():
        parsed = paths.parse_manifest_name(f.name)
        if parsed is not None:
            out[parsed[0]] = f
    return dict(sorted(out.items()))


def _version_cases() -> list:
    cases = []
    for path in DATASETS:
        if _name(path) in UNREADABLE:
            continue
        for version in _manifests(path):
            cases.append(pytest.param(path, version, id=f"{_name(path)}@v{version}"))
    return cases


def _is_legacy(manifest_file: Path) -> bool:
    m = decode_manifest_file(manifest_file.read_bytes(), str(manifest_file)).manifest
    return any(f.version == "0.1" for frag in m.fragments for f in frag.files)


def _dataset_cases() -> list:
    """One case per readable dataset."""
    return [pytest.param(path, id=_name(path)) for path in DATASETS if _name(path) not in UNREADABLE]


def _load_generator():  # type: ignore[no-untyped-def]
    """The corpus generator script (stdlib-only at import), for the rows it writes."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "make_older_pylance_corpus.py"
    spec = importlib.util.spec_from_file_location("make_older_pylance_corpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(start: int, n: int) -> pa.Table:
    """Rows of the corpus schema, as the generator writes them."""
    table: pa.Table = _GENERATOR._rows(start, n)
    return table


_GENERATOR = _load_generator()


def _copy(path: Path, tmp_path: Path, name: str = "ds") -> str:
    dst = tmp_path / name
    shutil.copytree(path, dst)
    return str(dst)


def _raw_manifest(path: Path) -> table_pb2.Manifest:
    data = path.read_bytes()
    pos = struct.unpack_from("<Q", data, len(data) - 16)[0]
    (length,) = struct.unpack_from("<I", data, pos)
    pb = table_pb2.Manifest()
    pb.ParseFromString(data[pos + 4 : pos + 4 + length])
    return pb


def _new_files(pb: table_pb2.Manifest, old: set[str]) -> list[tuple]:
    return sorted(
        (tuple(f.fields), tuple(f.column_indices), f.file_major_version, f.file_minor_version)
        for frag in pb.fragments
        for f in frag.files
        if f.path not in old
    )


def _file_paths(pb: table_pb2.Manifest) -> set[str]:
    return {f.path for frag in pb.fragments for f in frag.files}


def test_the_corpus_covers_what_it_claims():
    names = {_name(p) for p in DATASETS}
    assert {"0.10.18/legacy", "0.13.0/v2_0", "0.16.1/v2_0", "0.33.0/v2_1", "0.19.2/v2_0_v2paths"} <= names
    latest = CORPUS / "0.13.0" / "v2_0" / "_latest.manifest"
    assert latest.exists()
    first = _raw_manifest(_manifests(CORPUS / "0.13.0" / "v2_0")[1])
    assert not first.HasField("data_format")
    assert {(f.file_major_version, f.file_minor_version) for fr in first.fragments for f in fr.files} == {
        (0, 3)
    }
    assert _manifests(CORPUS / "0.13.0" / "v2_0")[1].name == "1.manifest"  # V1 names


@pytest.mark.parametrize(("path", "version"), _version_cases())
def test_every_version_reads_as_pylance_14_reads_it(path, version):
    theirs = lance.dataset(str(path), version=version)
    ours = lt.dataset(str(path), version=version)
    assert_tables_equal(ours.to_table(), theirs.to_table())
    assert ours.count_rows() == theirs.count_rows()
    assert ours.count_rows("id > 2") == theirs.count_rows("id > 2")
    assert ours.version == theirs.version
    taken = ours.to_table(filter="s IS NOT NULL", columns=["id", "s", "ls"])
    assert_tables_equal(taken, theirs.to_table(filter="s IS NOT NULL", columns=["id", "s", "ls"]))


@pytest.mark.parametrize("path", _dataset_cases())
def test_versions_and_tags_are_pylance_14s(path):
    ours = lt.dataset(str(path), version=1)
    theirs = lance.dataset(str(path))
    mine, yours = ours.versions(), theirs.versions()
    assert [v["version"] for v in mine] == [v["version"] for v in yours]
    for a, b in zip(mine, yours):
        # pylance converts the nanoseconds through a float (256 ns steps at today's timestamps)
        assert abs(a["timestamp"] - b["timestamp"]) <= dt.timedelta(microseconds=1)
    assert {k: t.version for k, t in ours.tags.list().items()} == {
        k: t["version"] for k, t in theirs.tags.list().items()
    }


_PYLANCE_OPS = {"Overwrite": "overwrite", "Append": "append", "Delete": "delete", "Rewrite": "rewrite"}


@pytest.mark.parametrize("path", DATASETS, ids=_name)
def test_older_transactions_decode_as_pylance_14_decodes_them(path):
    """Manifest-level only, so the legacy datasets and the unreadable 2.1 one take part too."""
    storage = open_storage(str(path))
    theirs = lance.dataset(str(path), version=1)
    for entry in versions_mod.list_versions(storage):
        mf = versions_mod.read_manifest_file(storage, entry)
        ours = versions_mod.read_transaction(storage, mf)
        txn = theirs.read_transaction(entry.version)
        assert ours is not None and txn is not None
        assert ours.read_version == txn.read_version
        expected = _PYLANCE_OPS.get(type(txn.operation).__name__, "reserve_fragments")
        assert ours.operation.name == expected
        # the data format, inferred when the manifest records none
        assert (
            mf.manifest.data_storage_version
            == lance.dataset(str(path), version=entry.version).data_storage_version
        )


@pytest.mark.parametrize("path", [p for p in DATASETS if _name(p) in UNREADABLE], ids=_name)
def test_a_dataset_pylance_14_cannot_read_is_refused_with_a_typed_error(path):
    with pytest.raises(Exception):  # noqa: B017  (pylance raises an untyped error)
        lance.dataset(str(path)).to_table()
    with pytest.raises(LanceTableError):
        lt.dataset(str(path)).to_table()


def _expected_after(base: pa.Table, added: pa.Table, deleted: set[int]) -> pa.Table:
    both = pa.concat_tables([base, added.cast(base.schema)])
    return both.filter(pc.invert(pc.is_in(both["id"], pa.array(sorted(deleted), pa.int64()))))


@pytest.mark.parametrize("path", _dataset_cases())
def test_lance_table_continues_an_older_dataset_as_pylance_14_does(path, tmp_path):
    ours_uri = _copy(path, tmp_path, "ours")
    theirs_uri = _copy(path, tmp_path, "theirs")
    before = lance.dataset(str(path)).to_table()
    old_manifests = _manifests(path)
    old_files = _file_paths(_raw_manifest(old_manifests[max(old_manifests)]))

    lt.write_dataset(_rows(100, 3), ours_uri, mode="append")
    lt.dataset(ours_uri).delete("id = 100 OR id = 0")
    lance.write_dataset(_rows(100, 3), theirs_uri, mode="append")
    lance.dataset(theirs_uri).delete("id = 100 OR id = 0")

    expected = _expected_after(before, _rows(100, 3), {0, 100})
    assert_tables_equal(lance.dataset(ours_uri).to_table(), expected)
    assert_tables_equal(lt.dataset(ours_uri).to_table(), expected)
    assert lance.dataset(ours_uri).version == lance.dataset(theirs_uri).version
    # the same manifest names, data format and data file versions as pylance 14 writes
    ours_names = sorted(p.name for p in _manifests(Path(ours_uri)).values())
    theirs_names = sorted(p.name for p in _manifests(Path(theirs_uri)).values())
    assert ours_names == theirs_names
    ours_pb = _raw_manifest(max(_manifests(Path(ours_uri)).items())[1])
    theirs_pb = _raw_manifest(max(_manifests(Path(theirs_uri)).items())[1])
    assert ours_pb.data_format == theirs_pb.data_format
    assert _new_files(ours_pb, old_files) == _new_files(theirs_pb, old_files)
    # ``_latest.manifest`` of the oldest releases is left as it was, by both
    latest = path / "_latest.manifest"
    if latest.exists():
        assert (Path(ours_uri) / "_latest.manifest").read_bytes() == latest.read_bytes()
        assert (Path(theirs_uri) / "_latest.manifest").read_bytes() == latest.read_bytes()


@pytest.mark.parametrize("path", _dataset_cases())
def test_lance_table_reads_what_pylance_14_adds_to_an_older_dataset(path, tmp_path):
    uri = _copy(path, tmp_path)
    before = lance.dataset(uri).version
    lance.write_dataset(_rows(200, 4), uri, mode="append")
    lance.dataset(uri).delete("id = 201 OR id = 2")
    lance.dataset(uri).optimize.compact_files()
    for version in range(before, lance.dataset(uri).version + 1):
        assert_tables_equal(
            lt.dataset(uri, version=version).to_table(), lance.dataset(uri, version=version).to_table()
        )


def test_a_manifest_without_data_format_is_continued_in_2_0(tmp_path):
    """pylance 0.13 recorded no data_format, and 2.0 files as 0.3. Appending to such a version keeps
    the dataset in 2.0 and records the format, as pylance 14 does. (The corpus dataset's own
    compaction turned it into legacy files, so its history is cut before that: the copies end at the
    last version without legacy files.)"""
    path = CORPUS / "0.13.0" / "v2_0"
    manifests = _manifests(path)
    last = max(v for v, m in manifests.items() if not _is_legacy(m))
    uris = []
    for name in ("ours", "theirs"):
        uri = _copy(path, tmp_path, name)
        for v in manifests:
            if v > last:
                (Path(uri) / paths.VERSIONS_DIR / manifests[v].name).unlink()
        (Path(uri) / "_latest.manifest").unlink()
        uris.append(uri)
    ours_uri, theirs_uri = uris
    assert not _raw_manifest(_manifests(Path(ours_uri))[last]).HasField("data_format")
    before = lance.dataset(theirs_uri).to_table()
    lt.write_dataset(_rows(100, 2), ours_uri, mode="append")
    lance.write_dataset(_rows(100, 2), theirs_uri, mode="append")

    expected = _expected_after(before, _rows(100, 2), set())
    for uri in uris:
        assert_tables_equal(lt.dataset(uri).to_table(), expected)
        assert_tables_equal(lance.dataset(uri).to_table(), expected)
    ours_pb = _raw_manifest(_manifests(Path(ours_uri))[last + 1])
    theirs_pb = _raw_manifest(_manifests(Path(theirs_uri))[last + 1])
    assert (ours_pb.data_format.file_format, ours_pb.data_format.version) == ("lance", "2.0")
    assert ours_pb.data_format == theirs_pb.data_format
    old = _file_paths(_raw_manifest(manifests[last]))
    assert _new_files(ours_pb, old) == _new_files(theirs_pb, old)
    assert _new_files(ours_pb, old)  # the appended file


def test_damaged_early_2_0_files_raise_typed_errors():
    """Strings stored as list<u8> (pylance 0.13) are read from two columns: damage to either, or to
    the metadata that says which, gives a typed error naming the file, never a crash."""
    data_dir = CORPUS / "0.13.0" / "v2_0" / paths.DATA_DIR
    first = _raw_manifest(_manifests(CORPUS / "0.13.0" / "v2_0")[1])
    original = (data_dir / first.fragments[0].files[0].path).read_bytes()
    assert LanceFileReader(original).read_all().column("s").null_count == 1
    rng = random.Random(13)
    for _ in range(300):
        damaged = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        with contextlib.suppress(LanceTableError):
            LanceFileReader(bytes(damaged)).read_all()
    for cut in range(1, len(original), 37):
        with pytest.raises(LanceTableError):
            LanceFileReader(original[:-cut]).read_all()
