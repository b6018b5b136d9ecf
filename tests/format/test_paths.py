"""Every on-disk name: manifests in both naming schemes, data, deletion and transaction files, refs."""

from __future__ import annotations

import pytest

from lance_table.errors import CorruptFileError
from lance_table.format import paths


@pytest.mark.parametrize("version", [1, 2, 10, 12345, 2**63 - 1])
@pytest.mark.parametrize("scheme", [paths.ManifestNaming.V1, paths.ManifestNaming.V2])
def test_manifest_names_round_trip(version, scheme):
    name = paths.manifest_name(version, scheme)
    assert paths.parse_manifest_name(name) == (version, scheme)
    assert paths.manifest_path(version, scheme) == f"_versions/{name}"


@pytest.mark.parametrize("scheme", [paths.ManifestNaming.V1, paths.ManifestNaming.V2])
def test_detached_versions_are_named_apart_from_the_version_line(scheme):
    """A version with the top bit set is detached: ``d{version}.manifest`` in both schemes (as
    pylance names it), listed after every manifest of the line and not parsed as one of them."""
    version = 2**63 + 12345
    assert paths.is_detached_version(version) and not paths.is_detached_version(2**63 - 1)
    name = paths.manifest_name(version, scheme)
    assert name == f"d{version}.manifest"
    assert paths.parse_manifest_name(name) is None
    assert name > paths.manifest_name(1, paths.ManifestNaming.V2)


def test_v2_manifest_names_sort_newest_first():
    names = [paths.manifest_name(v) for v in (1, 2, 9, 10, 100)]
    assert sorted(names) == names[::-1]
    assert paths.manifest_name(1) == "18446744073709551614.manifest"


@pytest.mark.parametrize(
    "name", [".tmp-abc", "1.manifest.tmp-x", "d1.manifest", "latest_version_hint.json", "x"]
)
def test_other_files_in_versions_are_not_manifests(name):
    assert paths.parse_manifest_name(name) is None


def test_data_file_names_look_like_pylance_and_carry_write_tags():
    name = paths.new_data_file_name("abc123")
    assert len(name) == 24 + 26 + len(".lance") and set(name[:24]) <= {"0", "1"}
    assert paths.has_write_tag(name, "abc123") and not paths.has_write_tag(name, "abc124")
    with pytest.raises(ValueError):
        paths.new_data_file_name("not-hex")


def test_deletion_and_transaction_paths():
    assert paths.deletion_file_path(3, 7, 42, bitmap=True) == "_deletions/3-7-42.bin"
    assert paths.deletion_file_path(3, 7, 42, bitmap=False) == "_deletions/3-7-42.arrow"
    assert paths.transaction_path(paths.transaction_file_name(5, "u")) == "_transactions/5-u.txn"


@pytest.mark.parametrize(
    "good", ["a.lance", "sub/dir/a.lance", "0101abc.lance", "x-y_z.lance", "é.lance", ".hidden"]
)
def test_relative_paths_inside_the_dataset_pass(good):
    assert paths.check_relative_path(good, "m.manifest", "data file") == good


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "../x.lance",
        "a/../../x",
        "/etc/passwd",
        "s3://b/k",
        "C:x",
        "a\\b",
        "a//b",
        "a/./b",
        "a\0b",
        "a\nb",
        ".",
    ],
)
def test_paths_escaping_the_dataset_are_corrupt(bad):
    with pytest.raises(CorruptFileError, match=r"m\.manifest"):
        paths.check_relative_path(bad, "m.manifest", "data file")


def test_refs_live_beside_the_tags():
    assert paths.tag_path("t") == "_refs/tags/t.json"
    assert paths.pin_path("p").startswith("_refs/pins/")
    assert paths.tag_lock_path("t").startswith("_refs/locks/")
