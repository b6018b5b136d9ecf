"""Tag files are untrusted input, tag names become file names, and a bad tag stops cleanup cold."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CorruptFileError, LanceTableError, TagError, VersionNotFoundError


@pytest.fixture
def ds(tmp_path):
    uri = tmp_path / "ds"
    lt.write_dataset(pa.table({"id": np.arange(10)}), uri)
    lt.write_dataset(pa.table({"id": np.arange(10, 20)}), uri, mode="append")
    return lt.write_dataset(pa.table({"id": np.arange(20, 30)}), uri, mode="append")


def _tag_file(ds, name):
    return Path(ds.uri) / "_refs" / "tags" / f"{name}.json"


def _edit_version(path: Path, version: object) -> None:
    body = json.loads(path.read_text())
    body["version"] = version
    path.write_text(json.dumps(body))


@pytest.mark.parametrize("version", [True, 1.5, "1", -1, 0, 2**64, None, [1]], ids=lambda v: f"version={v!r}")
def test_a_tag_version_must_be_a_positive_integer(ds, version):
    ds.tags.create("t", 1)
    path = _tag_file(ds, "t")
    _edit_version(path, version)
    for call in (ds.tags.list, lambda: ds.tags.get_version("t"), lambda: lt.dataset(ds.uri, version="t")):
        with pytest.raises(CorruptFileError, match=r"t\.json") as info:
            call()
        assert str(path) in str(info.value)


@pytest.mark.parametrize("content", [b"", b"[]", b"{", b"\xff\xfe", b'{"version": 1, "metadata": 3}', b"1"])
def test_a_damaged_tag_file_stops_cleanup_before_anything_is_deleted(ds, content):
    ds.tags.create("good", 2)
    path = _tag_file(ds, "bad")
    path.write_bytes(content)
    before = [v["version"] for v in ds.versions()]
    with pytest.raises(CorruptFileError) as info:
        ds.cleanup_old_versions(older_than=dt.timedelta(0), error_if_tagged_old_versions=False)
    assert str(path) in str(info.value)
    assert [v["version"] for v in ds.versions()] == before
    with pytest.raises(CorruptFileError):
        ds.tags.list()
    assert ds.tags.get_version("good") == 2  # the other tags still work one by one


def test_tag_names_follow_pylance(ds):
    ds.tags.create("-1", 1)  # pylance accepts a leading dash
    assert lt.dataset(ds.uri, version="-1").version == 1
    for bad in ["x" * 300, "", ".a", "a..b", "a.lock", "a/b", "a b"]:
        with pytest.raises(TagError):
            ds.tags.create(bad, 1)


def test_versions_that_do_not_name_a_version(ds):
    with pytest.raises(VersionNotFoundError):
        lt.dataset(ds.uri, version=-1)
    with pytest.raises(TagError, match="does not exist"):
        lt.dataset(ds.uri, version="-1")
    with pytest.raises(TagError):
        lt.dataset(ds.uri, version="x" * 300)
    for bad in (0, -1, 99, True):
        with pytest.raises(VersionNotFoundError):
            ds.tags.create("t", bad)


def test_a_tag_naming_a_missing_version_names_the_tag_file(ds):
    ds.tags.create("t", 1)
    _edit_version(_tag_file(ds, "t"), 77)
    with pytest.raises(VersionNotFoundError, match=r"t\.json"):
        lt.dataset(ds.uri, version="t")


@pytest.mark.interop
def test_tags_written_by_each_side_read_by_the_other(ds):
    lance = pytest.importorskip("lance")
    ds.tags.create("ours", 1)
    ds.tags.update("ours", 2)
    theirs = lance.dataset(ds.uri)
    assert theirs.tags.list()["ours"]["version"] == 2
    theirs.tags.create("theirs", 3)
    assert ds.tags.get_version("theirs") == 3
    ds.tags.delete("theirs")
    assert set(lance.dataset(ds.uri).tags.list()) == {"ours"}
    # our lock and pin folders are invisible to pylance, and survive its cleanup
    theirs.cleanup_old_versions(older_than=dt.timedelta(0), error_if_tagged_old_versions=False)
    assert lt.dataset(ds.uri, version="ours").to_table().num_rows == 20


def test_every_tag_error_is_a_lance_table_error(ds):
    for call in (lambda: ds.tags.delete("nope"), lambda: ds.tags.update("nope", 1)):
        with pytest.raises(LanceTableError):
            call()
