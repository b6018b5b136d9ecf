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


def test_a_restore_decodes_none_of_the_latest_versions_fragments(
    history: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The latest version (30 fragments) is read for its number, time, flags and fragment id
    high-water mark only; the fragment ids after the restore are pylance's."""
    from lance_table.format import fragment

    ours, theirs = _copy(history, tmp_path / "ours"), _copy(history, tmp_path / "theirs")
    old = lt.dataset(ours, version=3)
    converted: list[int] = []
    original = fragment._checked_fragment

    def counting(pb, where):  # type: ignore[no-untyped-def]
        converted.append(pb.id)
        return original(pb, where)

    monkeypatch.setattr(fragment, "_checked_fragment", counting)
    lt.table.session.clear_caches()
    old.restore()
    # at most the restored version's fragments are converted (with the bulk checks of
    # fragment_source, none: they are written back as read)
    assert set(converted) <= {0, 1, 2}
    monkeypatch.undo()
    lance.dataset(theirs, version=3).restore()
    for uri in (ours, theirs):
        lt.write_dataset(pa.table({"id": [100]}), uri, mode="append")
    for got in (lt.dataset(ours), lance.dataset(ours)):
        want = lance.dataset(theirs)
        assert [f.fragment_id for f in got.get_fragments()] == [f.fragment_id for f in want.get_fragments()]
        assert [f.fragment_id for f in got.get_fragments()] == [0, 1, 2, VERSIONS]
        assert got.to_table().equals(want.to_table())


def test_the_rest_of_a_manifest_is_the_whole_manifest_but_its_fragments(history: str, tmp_path: Path) -> None:
    """For manifests of both libraries; a manifest whose rest depends on its fragments (no
    fragment id high-water mark recorded) is decoded whole."""
    from dataclasses import replace

    from lance_table.format.manifest_file import decode_manifest_file, decode_manifest_rest
    from lance_table.storage import open_storage
    from lance_table.table import versions

    theirs = str(tmp_path / "theirs")
    lance.write_dataset(pa.table({"id": [0, 1], "s": ["a", "b"]}, metadata={"k": "v"}), theirs)
    lance.write_dataset(pa.table({"id": [2], "s": ["c"]}), theirs, mode="append")
    for uri in (history, theirs):
        for path in sorted(Path(uri, "_versions").glob("*.manifest")):
            data = path.read_bytes()
            whole = decode_manifest_file(data, str(path))
            found = decode_manifest_rest(data, str(path))
            assert found is not None
            rest, transaction = found
            assert rest.fragments == () and transaction == whole.transaction
            assert replace(rest, fragments=whole.manifest.fragments) == whole.manifest
    # without max_fragment_id the next fragment id is worked out from the fragments: whole
    from lance_table._proto import table_pb2
    from lance_table.format.manifest_file import MANIFEST_FOOTER, MANIFEST_FOOTER_SIZE

    path = sorted(Path(theirs, "_versions").glob("*.manifest"))[0]
    data = path.read_bytes()
    pos = MANIFEST_FOOTER.unpack_from(data, len(data) - MANIFEST_FOOTER_SIZE)[0]
    size = int.from_bytes(data[pos : pos + 4], "little")
    pb = table_pb2.Manifest.FromString(data[pos + 4 : pos + 4 + size])
    pb.ClearField("max_fragment_id")
    body = pb.SerializeToString()
    stripped = data[:pos] + len(body).to_bytes(4, "little") + body + data[pos + 4 + size :]
    stripped = stripped[:-MANIFEST_FOOTER_SIZE] + MANIFEST_FOOTER.pack(pos, 0, 2) + b"LANC"
    assert decode_manifest_rest(stripped, str(path)) is None
    lt.table.session.clear_caches()
    storage = open_storage(theirs)
    assert versions.read_manifest_rest(storage, versions.find_entry(storage, 2)).manifest.fragments == ()
