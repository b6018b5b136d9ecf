"""A manifest this process commits is kept as if its file had been decoded (the next open of the
latest version finds it): it must equal what decoding the file's bytes gives, for every kind of
commit and data format."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.format.manifest_file import decode_manifest_file
from lance_table.table import versions


def _same_as_decoded(uri: str) -> None:
    storage = lt.dataset(uri)._snapshot.storage
    entry = versions.latest_entry(storage)
    data = storage.read(entry.path)
    kept_bytes, kept = versions._DECODED[(storage.cache_key, entry.path)]
    fresh = decode_manifest_file(data, entry.path)
    assert kept_bytes == data
    assert kept.manifest == fresh.manifest
    assert kept.transaction == fresh.transaction and kept.size == fresh.size
    assert dict(kept.manifest.dictionaries).keys() == dict(fresh.manifest.dictionaries).keys()


@pytest.mark.parametrize("fmt", ["legacy", "2.0", "2.2"])
def test_each_commit_kind_keeps_what_decoding_gives(tmp_path: Path, fmt: str) -> None:
    uri = str(tmp_path / "ds")
    t = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})
    lt.write_dataset(t, uri, data_storage_version=fmt)
    _same_as_decoded(uri)
    lt.write_dataset(t, uri, mode="append")
    _same_as_decoded(uri)
    lt.dataset(uri).delete("a = 2")
    _same_as_decoded(uri)
    lt.dataset(uri).compact_files()
    _same_as_decoded(uri)
    lt.dataset(uri, version=1).restore()
    _same_as_decoded(uri)
    lt.write_dataset(t, uri, mode="overwrite")
    _same_as_decoded(uri)
    assert lt.dataset(uri).to_table().equals(lance.dataset(uri).to_table())


def test_an_append_to_a_pylance_dataset_keeps_what_decoding_gives(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": [1, 2]}), uri)
    lt.write_dataset(pa.table({"a": [3]}), uri, mode="append")
    _same_as_decoded(uri)
    assert lance.dataset(uri).to_table().column("a").to_pylist() == [1, 2, 3]
