"""A commit on a long local history reads and lists no more than on a short one.

Each commit (append, delete, overwrite, restore, tag creation) is run on copies of two datasets
that differ only in their number of versions: the reads it makes (counted by the storage
layer's own read statistics, with the paths read) and the directories it lists must be the same
on both. The only thing that may grow with the history is the length of the one listing of
``_versions`` that finds the newest version (a local directory is read whole; an object store's
ordered listing is bounded too: see ``test_s3_history``).
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.format import paths
from lance_table.storage.io_stats import IOStats, collecting
from lance_table.storage.local import LocalStorage

SHORT, LONG = 3, 30


def _rows(i: int) -> pa.Table:
    return pa.table({"id": [i, i + 1000]})


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    """Two datasets alike but for their number of versions (the same rows overwritten, so that
    every version has as many fragments)."""
    out = {}
    for n in (SHORT, LONG):
        uri = str(tmp_path_factory.mktemp("history") / "ds")
        for i in range(n):
            lt.write_dataset(_rows(0), uri, mode="overwrite" if i else "create")
        out[n] = uri
    return out


class _Calls:
    """The files read (by the storage layer's ``read``) and the directories listed."""

    def __init__(self) -> None:
        self.read: list[str] = []
        self.listed: Counter[str] = Counter()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Calls]:
    out = _Calls()
    read, listdir, scandir = LocalStorage.read, os.listdir, os.scandir

    def recording_read(self: LocalStorage, path: str) -> bytes:
        out.read.append(path)
        return read(self, path)

    def listing(real: Callable[..., object]) -> Callable[..., object]:
        def call(path: str = ".") -> object:
            out.listed[os.path.basename(os.fspath(path))] += 1
            return real(path)

        return call

    monkeypatch.setattr(LocalStorage, "read", recording_read)
    monkeypatch.setattr(os, "listdir", listing(listdir))
    monkeypatch.setattr(os, "scandir", listing(scandir))
    yield out


COMMITS: dict[str, Callable[[str], object]] = {
    "append": lambda uri: lt.write_dataset(_rows(99), uri, mode="append"),
    "delete": lambda uri: lt.dataset(uri).delete("id = 0"),
    "overwrite": lambda uri: lt.write_dataset(_rows(99), uri, mode="overwrite"),
    "restore": lambda uri: lt.dataset(uri, version=1).restore(),
    "tag": lambda uri: lt.dataset(uri).tags.create("t", 1),
}


@pytest.mark.parametrize("name", list(COMMITS))
def test_a_commit_reads_and_lists_as_much_on_a_long_history_as_on_a_short_one(
    name: str, histories: dict[int, str], tmp_path: Path, calls: _Calls
) -> None:
    seen = {}
    for n, uri in histories.items():
        copy = str(tmp_path / f"copy{n}")
        shutil.copytree(uri, copy)
        calls.read.clear()
        calls.listed.clear()
        stats = IOStats()
        with collecting(stats):
            COMMITS[name](copy)
        manifests = [p for p in calls.read if p.startswith(paths.VERSIONS_DIR + "/")]
        # which versions' manifests were read, as offsets from the newest (1 for version 1)
        newest = n
        offsets = sorted({(v if v == 1 else v - newest) for v in (_version_of(p) for p in manifests)})
        seen[n] = (stats.requests, offsets, dict(calls.listed))
        assert calls.listed[paths.VERSIONS_DIR] <= 2, calls.listed
        assert set(calls.listed) <= {paths.VERSIONS_DIR}, calls.listed  # no other directory listed
        assert len(manifests) <= 3, manifests
    assert seen[SHORT] == seen[LONG]


def _version_of(path: str) -> int:
    parsed = paths.parse_manifest_name(path.rsplit("/", 1)[-1])
    assert parsed is not None, path
    return parsed[0]
