"""Every spelling of a local dataset location names the same directory (issue 32, URIs)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table
from lance_table.errors import InvalidURIError
from lance_table.storage.uris import local_path

TABLE = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})


def spellings(path: Path) -> list[str]:
    text = str(path)
    return [
        text,
        f"file:{text}",
        f"file://{text}",
        f"file://localhost{text}",
        f"file://LOCALHOST{text}",
        path.as_uri(),
    ]


def test_every_spelling_reads_the_same_dataset(tmp_path: Path) -> None:
    target = tmp_path / "a b%c"  # a space and a percent sign, quoted in URIs only
    lance_table.write_dataset(TABLE, target)
    for uri in [*spellings(target)[:1], target.as_uri(), f"file:{target.as_uri()[len('file://') :]}"]:
        assert lance_table.dataset(uri).to_table().equals(TABLE), uri


@pytest.mark.parametrize("form", range(6))
def test_a_write_through_a_file_uri_lands_at_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: int
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "out" / "ds"
    uri = spellings(target)[form]
    lance_table.write_dataset(TABLE, uri)
    assert not (tmp_path / "file:").exists()
    assert (target / "_versions").is_dir()
    lance_table.write_dataset(TABLE, uri, mode="append")
    assert lance_table.dataset(str(target)).count_rows() == 6


def test_relative_and_home_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    lance_table.write_dataset(TABLE, "~/rel")
    assert (tmp_path / "rel" / "_versions").is_dir()
    assert lance_table.dataset("rel").to_table().equals(TABLE)
    assert lance_table.dataset("./rel").to_table().equals(TABLE)
    assert lance_table.dataset(f"file:{tmp_path}/rel").to_table().equals(TABLE)


def test_pylance_and_lance_table_agree_on_file_uris(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance_table.write_dataset(TABLE, f"file:{ours}")
    lance.write_dataset(TABLE, f"file:{theirs}")
    assert lance.dataset(f"file://{ours}").to_table().equals(TABLE)
    assert lance_table.dataset(f"file://localhost{theirs}").to_table().equals(TABLE)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("file://otherhost/data/ds", "host 'otherhost'"),
        ("file:relative/ds", "not an absolute"),
        ("file://localhost", "not an absolute"),
    ],
)
def test_file_uris_that_name_no_local_directory_are_refused(uri: str, message: str) -> None:
    with pytest.raises(InvalidURIError, match=message) as info:
        lance_table.dataset(uri)
    assert isinstance(info.value, ValueError)


def test_non_local_uris_are_left_to_their_filesystems() -> None:
    assert local_path("s3://bucket/x") is None
    assert local_path("memory://x") is None
    assert local_path("file:/a/./b/../c%2Fd") == os.path.abspath("/a/c/d")
