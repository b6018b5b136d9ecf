"""Listings of ``_versions``: kept while the directory is unchanged, and read in bulk.

A kept listing must never hide a commit (by this process, by pylance, or by a writer that puts
the directory's times back); the newest version and the versions above one are found from the
names of V2, V1, detached and temporary files alike, and a mix of schemes is refused.
"""

from __future__ import annotations

import datetime as dt
import os
import time

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import CorruptFileError
from lance_table.format import paths
from lance_table.storage import listing_cache, open_storage
from lance_table.table import version_names, version_summaries, versions


@pytest.fixture
def small_listings_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the listings of small directories too (the tests' directories are small)."""
    monkeypatch.setattr(listing_cache, "MIN_NAMES", 1)
    listing_cache.clear()


def _settle(directory: str) -> None:
    """Wait (at most ``SETTLED_NS``) until a listing of ``directory`` may be kept."""
    deadline = time.monotonic() + 5
    while listing_cache._token(directory) is None:
        assert time.monotonic() < deadline, "listings of this file system are never kept"
        time.sleep(0.01)


def _kept(directory: str) -> bool:
    token = listing_cache._token(directory)
    hit = listing_cache._LISTINGS.get(os.path.abspath(directory))
    return token is not None and hit is not None and hit[0] == token


def _small(i: int) -> pa.Table:
    return pa.table({"id": [i]})


def test_kept_listing_never_hides_a_change(tmp_path, small_listings_kept) -> None:
    d = tmp_path / "dir"
    d.mkdir()
    for i in range(3):
        (d / f"f{i}").write_bytes(b"")
    _settle(str(d))
    first = listing_cache.list_names(str(d))
    assert sorted(first) == ["f0", "f1", "f2"]
    assert _kept(str(d))
    assert sorted(listing_cache.list_names(str(d))) == sorted(first)
    st = os.stat(d)
    (d / "f3").write_bytes(b"")
    os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old modification time put back
    assert not _kept(str(d))
    assert sorted(listing_cache.list_names(str(d))) == ["f0", "f1", "f2", "f3"]
    _settle(str(d))
    listing_cache.list_names(str(d))
    (d / "f0").unlink()
    assert sorted(listing_cache.list_names(str(d))) == ["f1", "f2", "f3"]


def test_commits_of_pylance_and_ours_are_seen_by_the_next_open(tmp_path, small_listings_kept) -> None:
    import lance

    uri = str(tmp_path / "ds")
    listed = os.path.join(uri, paths.VERSIONS_DIR)
    lt.write_dataset(_small(0), uri)
    for i in range(1, 4):
        lt.write_dataset(_small(i), uri, mode="append")
    _settle(listed)
    assert lt.dataset(uri).version == 4
    assert _kept(listed)
    assert lt.dataset(uri).version == 4  # from the kept listing
    lance.write_dataset(_small(9), uri, mode="append")
    ds = lt.dataset(uri)
    assert ds.version == 5 and ds.count_rows() == 5
    _settle(listed)
    ds = lt.dataset(uri)
    assert _kept(listed)
    ds.delete("id = 9")  # its commit lists the kept listing, then adds a version
    assert lt.dataset(uri).version == 6
    assert lance.dataset(uri).version == 6
    _settle(listed)
    lt.dataset(uri).checkout_version(1)
    lt.dataset(uri, version=2).restore()
    assert lt.dataset(uri).version == 7 == lance.dataset(uri).version
    assert lt.dataset(uri).to_table() == lance.dataset(uri).to_table()


def _names(versions_: list[int], scheme: str) -> list[str]:
    return [paths.manifest_name(v, scheme) for v in versions_]


def test_newest_and_newer_versions_from_v2_names_among_other_files() -> None:
    v2 = paths.ManifestNaming.V2
    names = [
        *_names([1, 2, 3, 10, 11], v2),
        ".tmp-0123456789abcdef0123456789abcdef",  # a commit in flight (sorts first)
        "latest_version_hint.json",
        paths.manifest_name(paths.DETACHED_VERSION_MASK | 5),
    ]
    listed = version_names.Listing(tuple(names))
    assert listed.only_v2()
    assert listed.latest() == version_names.VersionEntry(11, f"_versions/{names[4]}", -1, v2)
    assert [e.version for e in listed.after(2)] == [3, 10, 11]
    assert [e.version for e in listed.after(11)] == []
    assert [e.version for e in listed.entries()] == [1, 2, 3, 10, 11]
    assert [e.version for e in listed.after(3)] == [10, 11]  # from the parsed entries now
    assert version_names.Listing(("latest_version_hint.json",)).latest() is None


def test_v1_names_and_mixed_schemes(tmp_path) -> None:
    v1 = paths.ManifestNaming.V1
    listed = version_names.Listing((*_names([1, 2, 10], v1), "latest_version_hint.json"))
    assert not listed.only_v2()
    assert listed.latest() == version_names.VersionEntry(10, "_versions/10.manifest", -1, v1)
    assert [e.version for e in listed.after(1)] == [2, 10]
    mixed = [*_names([1, 2], v1), *_names([3], paths.ManifestNaming.V2)]
    with pytest.raises(version_names.MixedSchemesError):
        version_names.Listing(tuple(mixed)).latest()
    # through the storage: the directory is named
    storage = open_storage(str(tmp_path))
    for name in mixed:
        storage.write(f"{paths.VERSIONS_DIR}/{name}", b"")
    with pytest.raises(CorruptFileError, match="multiple manifest naming schemes"):
        versions.latest_entry(storage)
    with pytest.raises(CorruptFileError, match="multiple manifest naming schemes"):
        versions.list_versions(storage, after=1)


def test_v1_dataset_of_pylance_opens_latest(tmp_path, small_listings_kept) -> None:
    import lance

    uri = str(tmp_path / "v1")
    lance.write_dataset(_small(0), uri, enable_v2_manifest_paths=False)
    lance.write_dataset(_small(1), uri, mode="append")
    assert os.path.exists(os.path.join(uri, "_versions", "2.manifest"))
    _settle(os.path.join(uri, paths.VERSIONS_DIR))
    assert lt.dataset(uri).version == 2
    assert lt.dataset(uri).version == 2
    lt.write_dataset(_small(2), uri, mode="append")
    assert lt.dataset(uri).version == 3 == lance.dataset(uri).version
    assert os.path.exists(os.path.join(uri, "_versions", "3.manifest"))


def test_versions_from_a_kept_listing_see_every_change(tmp_path, small_listings_kept) -> None:
    """``versions()`` of a directory unchanged since the last call answers from that call (fresh
    dictionaries each time), and shows commits of either library and a cleanup at once."""
    import lance

    uri = str(tmp_path / "ds")
    listed = os.path.join(uri, paths.VERSIONS_DIR)
    lt.write_dataset(_small(0), uri)
    for i in range(1, 3):
        lt.write_dataset(_small(i), uri, mode="append")

    def shown() -> list[tuple[int, str]]:
        _settle(listed)
        ds = lt.dataset(uri)
        out = ds.versions()
        assert version_summaries._SHOWN.get(ds._storage.cache_key) is not None
        assert out == ds.versions()  # the second from what the first worked out
        return [(v["version"], v["metadata"]["total_rows"]) for v in out]

    assert shown() == [(1, "1"), (2, "2"), (3, "3")]
    first = lt.dataset(uri).versions()
    first[0]["metadata"]["total_rows"] = "changed"
    first[0]["transaction_properties"]["k"] = "v"
    again = lt.dataset(uri).versions()[0]
    assert again["metadata"]["total_rows"] == "1" and again["transaction_properties"] == {}
    lance.write_dataset(_small(3), uri, mode="append")
    assert shown() == [(1, "1"), (2, "2"), (3, "3"), (4, "4")]
    lt.write_dataset(_small(4), uri, mode="append")
    assert shown()[-1] == (5, "5")
    lt.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0))
    assert shown() == [(5, "5")]
    assert [v["version"] for v in lance.dataset(uri).versions()] == [5]


@pytest.mark.parametrize("where", [0, 137, -1])
def test_a_long_listing_finds_a_v1_name_anywhere_among_v2_names(where: int) -> None:
    v2 = paths.ManifestNaming.V2
    many = _names(list(range(1, version_names.BULK_NAMES + 300)), v2)
    others = ["latest_version_hint.json", "é" * 14 + "x", "x" * paths.V2_NAME_LENGTH, "ü" * 29]
    clean = version_names.Listing(tuple([*many[:50], *others, *many[50:]]))
    assert clean.only_v2()
    assert clean.latest() == version_names.VersionEntry(len(many), f"_versions/{many[-1]}", -1, v2)
    found = set(version_names._not_v2_long(clean.names))  # (names not in ASCII by their UTF-8 length)
    assert found == {"latest_version_hint.json", "ü" * 29}
    mixed = list(many)
    mixed.insert(where if where >= 0 else len(mixed), paths.manifest_name(7, paths.ManifestNaming.V1))
    listed = version_names.Listing(tuple(mixed))
    assert not listed.only_v2()
    with pytest.raises(version_names.MixedSchemesError):
        listed.latest()
