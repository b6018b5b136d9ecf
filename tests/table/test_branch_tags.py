"""Tags made through a branch handle, as pylance 14 keeps them: one set of tags at the dataset's
root (``_refs/tags``) shared by all branches, each tag recording the branch of its version."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import lance
import pyarrow as pa
import pytest

import lance_table as lt

NOW = dt.timedelta(0)
# each reference form pylance's Tags.create takes, tried from a handle on branch "dev" (at v2)
REFERENCES = [
    ("t_none", None),
    ("t_int", 2),
    ("t_main", ("main", 1)),
    ("t_latest_main", (None, None)),
    ("t_dev", ("dev", 1)),
    ("t_tag", "t_int"),
]


def _rows(ds) -> list[int]:
    return sorted(ds.to_table(columns=["x"]).column("x").to_pylist())


def _branched(uri: str) -> None:
    """main v1 [1] and v2 [1, 2]; branch dev from main v1, then v2 [1, 3] (all written by pylance)."""
    lance.write_dataset(pa.table({"x": [1]}), uri)
    lance.write_dataset(pa.table({"x": [2]}), uri, mode="append")
    lance.dataset(uri, version=1).create_branch("dev")
    lance.dataset(uri).checkout_version(("dev", None)).insert(pa.table({"x": [3]}))


def _tag_files(uri: str) -> dict[str, tuple]:
    """Every tag file under the dataset: (branch, version, manifest size is that version's)."""
    out = {}
    for top, _, files in os.walk(uri):
        for name in files:
            if os.path.basename(top) == "tags":
                with open(os.path.join(top, name)) as file:
                    body = json.load(file)
                where = os.path.relpath(os.path.join(top, name), uri)
                out[where] = (body["branch"], body["version"], body["manifestSize"])
    return out


def _manifest_size(uri: str, branch: str | None, version: int) -> int:
    where = uri if branch is None else f"{uri}/tree/{branch}"
    return os.path.getsize(f"{where}/_versions/{2**64 - 1 - version}.manifest")


@pytest.fixture
def two(tmp_path) -> dict[str, str]:
    """The same branched dataset twice, for tagging from a branch handle with each library."""
    out = {}
    for name in ("lance", "lt"):
        out[name] = str(tmp_path / name)
        _branched(out[name])
    return out


def _shown(lib, uri: str) -> list:
    """What ``lib`` says of the tags from main and from the branch: lists, versions, rows."""
    main, dev = lib.dataset(uri), lib.dataset(uri).checkout_version(("dev", None))
    out: list = [
        sorted((n, t["branch"], t["version"]) for n, t in h.tags.list().items()) for h in (main, dev)
    ]
    out.append([t["version"] for _, t in dev.tags.list_ordered()])  # ties: in no set order
    for name, _ in REFERENCES:
        out.append(
            (
                name,
                main.tags.get_version(name),
                dev.tags.get_version(name),
                _rows(main.checkout_version(name)),
                _rows(dev.checkout_version(name)),
                _rows(lib.dataset(uri, version=name)),
            )
        )
    return out


def test_tags_made_on_a_branch_live_at_the_root_as_pylance_writes_them(two):
    for lib, uri in ((lance, two["lance"]), (lt, two["lt"])):
        dev = lib.dataset(uri).checkout_version(("dev", None))
        for name, reference in REFERENCES:
            dev.tags.create(name, reference)
    files = {k: _tag_files(uri) for k, uri in two.items()}
    expected = {
        "t_none": ("dev", 2),
        "t_int": ("dev", 2),
        "t_main": (None, 1),
        "t_latest_main": (None, 2),
        "t_dev": ("dev", 1),
        "t_tag": ("dev", 2),
    }
    for uri, found in zip(two.values(), files.values(), strict=True):
        assert {k: v[:2] for k, v in found.items()} == {
            f"_refs/tags/{n}.json": e for n, e in expected.items()
        }
        assert all(size == _manifest_size(uri, b, v) for b, v, size in found.values())
    # each library reads either dataset the same way, and as pylance reads pylance's
    shown = _shown(lance, two["lance"])
    assert shown[0] == shown[1] == sorted((n, *e) for n, e in expected.items())
    assert _shown(lt, two["lance"]) == _shown(lance, two["lt"]) == _shown(lt, two["lt"]) == shown


def test_update_and_delete_on_a_branch_handle_move_the_shared_tag(two):
    for lib, uri in ((lance, two["lance"]), (lt, two["lt"])):
        lance.dataset(uri).tags.create("moving", 1)
        dev = lib.dataset(uri).checkout_version(("dev", None))
        dev.tags.update("moving", 2)  # dev's v2 now
        assert [lib.dataset(uri).tags.list()["moving"][k] for k in ("branch", "version")] == ["dev", 2]
        assert _rows(lance.dataset(uri, version="moving")) == [1, 3]
        dev.tags.update("moving", ("main", 2))
        assert _rows(lance.dataset(uri, version="moving")) == [1, 2]
        dev.tags.create("gone", 1)
        dev.tags.delete("gone")
    assert _tag_files(two["lance"]).keys() == _tag_files(two["lt"]).keys() == {"_refs/tags/moving.json"}
    assert all(v[:2] == (None, 2) for f in map(_tag_files, two.values()) for v in f.values())


def test_bad_references_raise_what_pylance_raises(two):
    for lib, uri in ((lance, two["lance"]), (lt, two["lt"])):
        dev = lib.dataset(uri).checkout_version(("dev", None))
        with pytest.raises(ValueError):
            dev.tags.create("t", 9)  # dev has no v9 (main has none either)
        with pytest.raises(ValueError):
            dev.tags.create("t", ("nope", 1))
        with pytest.raises(TypeError):
            dev.tags.create("t", ("dev", "1"))
        assert _tag_files(uri) == {}


def test_a_branch_created_from_a_tag_on_a_branch_descends_from_that_branch(two):
    for lib, uri in ((lance, two["lance"]), (lt, two["lt"])):
        lib.dataset(uri).checkout_version(("dev", None)).tags.create("on-dev", 2)
        child = lib.dataset(uri).create_branch("child", "on-dev")
        assert _rows(child) == [1, 3]
        made = lance.dataset(uri).branches.list()["child"]
        assert (made["parent_branch"], made["parent_version"]) == ("dev", 2)


def test_cleanup_keeps_a_branch_version_tagged_through_the_branch(tmp_path):
    uri = str(tmp_path / "ds")
    _branched(uri)
    dev = lt.dataset(uri).checkout_version(("dev", None))
    dev.tags.create("kept", 2)
    dev.insert(pa.table({"x": [4]}), mode="overwrite")  # dev v3
    dev.insert(pa.table({"x": [5]}))  # dev v4
    lt.dataset(dev.uri).cleanup_old_versions(older_than=NOW, error_if_tagged_old_versions=False)
    assert _rows(lance.dataset(uri, version="kept")) == _rows(lt.dataset(uri, version="kept")) == [1, 3]
    assert [v["version"] for v in lance.dataset(dev.uri).versions()] == [2, 4]


def test_cleanup_still_keeps_versions_tagged_in_the_branch_directory(tmp_path):
    """Tags an earlier lance_table wrote in ``tree/<branch>/_refs/tags`` still keep their version."""
    uri = str(tmp_path / "ds")
    _branched(uri)
    dev = lt.dataset(uri).checkout_version(("dev", None))
    dev.tags.create("old-style", 2)
    os.makedirs(f"{dev.uri}/_refs/tags")
    shutil.move(f"{uri}/_refs/tags/old-style.json", f"{dev.uri}/_refs/tags/old-style.json")
    dev.insert(pa.table({"x": [4]}), mode="overwrite")  # dev v3
    lt.dataset(dev.uri).cleanup_old_versions(older_than=NOW, error_if_tagged_old_versions=False)
    assert _rows(lt.dataset(dev.uri, version=2)) == [1, 3]
    assert lt.dataset(uri).tags.list() == {}  # no longer one of the dataset's tags
