"""Restore and tag creation cost the same however long the history: a restore lists ``_versions``
once (its commit finds the latest version itself) and reads the manifests of two versions only;
a tag creation lists nothing. What they commit is what pylance commits."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.format import paths
from lance_table.storage.local import LocalStorage
from lance_table.table.verify import verify

VERSIONS = 30


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = str(tmp_path_factory.mktemp("restore") / "ds")
    lt.write_dataset(pa.table({"id": [0]}), uri)
    for i in range(1, VERSIONS):
        lt.write_dataset(pa.table({"id": [i]}), uri, mode="append")
    return uri


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """The listings and reads lance_table makes of local storage, as (method, path)."""
    seen: list[tuple[str, str]] = []
    for name in ("list_names", "list_dir", "list_tree", "read"):
        original = getattr(LocalStorage, name)

        def call(self: LocalStorage, path: str, *args: object, _name: str = name, _f=original, **kw: object):
            seen.append((_name, path))
            return _f(self, path, *args, **kw)

        monkeypatch.setattr(LocalStorage, name, call)
    yield seen


def _copy(uri: str, where: Path) -> str:
    shutil.copytree(uri, where)
    return str(where)


def test_a_restore_lists_once_and_reads_two_manifests(
    history: str, tmp_path: Path, calls: list[tuple[str, str]]
) -> None:
    ours, theirs = _copy(history, tmp_path / "ours"), _copy(history, tmp_path / "theirs")
    old = lt.dataset(ours, version=3)
    calls.clear()
    old.restore()
    listings = [c for c in calls if c[0].startswith("list")]
    assert listings == [("list_names", paths.VERSIONS_DIR)]
    manifests = {p for m, p in calls if m == "read" and p.startswith(paths.VERSIONS_DIR)}
    assert manifests == {paths.manifest_path(3), paths.manifest_path(VERSIONS)}
    assert old.version == VERSIONS + 1
    lance.dataset(theirs, version=3).restore()
    got, want = lance.dataset(ours), lance.dataset(theirs)
    assert got.version == want.version and got.to_table().equals(want.to_table())
    mine, pylance_txn = got.get_transactions(1)[0], want.get_transactions(1)[0]
    assert mine.read_version == pylance_txn.read_version == VERSIONS
    assert mine.operation == pylance_txn.operation
    # the transaction file is named by that read version (as the manifest records it), alone
    assert verify(ours).ok
    txns = sorted(p.name.split("-")[0] for p in Path(ours, "_transactions").iterdir())
    assert txns == sorted(p.name.split("-")[0] for p in Path(theirs, "_transactions").iterdir())


def test_restoring_the_latest_version_commits_on_it(history: str, tmp_path: Path) -> None:
    uri = _copy(history, tmp_path / "ds")
    ds = lt.dataset(uri)
    ds.restore()
    assert ds.version == VERSIONS + 1
    assert lance.dataset(uri).get_transactions(1)[0].read_version == VERSIONS
    assert lt.dataset(uri).to_table().equals(lance.dataset(uri, version=VERSIONS).to_table())


def test_a_tag_creation_lists_nothing(history: str, tmp_path: Path, calls: list[tuple[str, str]]) -> None:
    uri = _copy(history, tmp_path / "ds")
    ds = lt.dataset(uri)
    calls.clear()
    ds.tags.create("t", 1)
    assert not [c for c in calls if c[0].startswith("list")]
    assert lance.dataset(uri).tags.list()["t"]["version"] == 1
