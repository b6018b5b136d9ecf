"""Branches as pylance 14 stores them: cleanup keeps what branches read; branches created by either
library are listed, read and written by the other."""

from __future__ import annotations

import datetime as dt

import lance
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import BranchError, CorruptFileError

NOW = dt.timedelta(0)


def _rows(ds) -> list[int]:
    return sorted(ds.to_table(columns=["x"]).column("x").to_pylist())


@pytest.fixture
def branched(tmp_path) -> str:
    """A pylance dataset whose branch ``feat`` was created from version 1, then main overwritten:
    only the branch still reads version 1's data file."""
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(pa.table({"x": [1, 2, 3]}), uri)
    ds.create_branch("feat", 1)
    lance.write_dataset(pa.table({"x": [4]}), uri, mode="overwrite")
    return uri


def test_cleanup_keeps_the_version_a_branch_was_created_from(branched):
    stats = lt.dataset(branched).cleanup_old_versions(older_than=NOW)
    assert stats.old_versions == 0 and stats.data_files_removed == 0
    assert _rows(lt.dataset(f"{branched}/tree/feat")) == [1, 2, 3]
    assert _rows(lance.dataset(f"{branched}/tree/feat")) == [1, 2, 3]
    assert [v["version"] for v in lt.dataset(branched).versions()] == [1, 2]


def test_cleanup_of_a_branch_keeps_what_its_child_branches_read(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(pa.table({"x": [1]}), uri)
    feat = ds.create_branch("feat")
    lance.write_dataset(pa.table({"x": [2]}), feat.uri, mode="append")  # feat v2
    ds.create_branch("feat/sub", ("feat", 2))
    lance.write_dataset(pa.table({"x": [3]}), feat.uri, mode="overwrite")  # feat v3
    lt.dataset(feat.uri).cleanup_old_versions(older_than=NOW)
    assert _rows(lance.dataset(f"{uri}/tree/feat/sub")) == [1, 2]
    assert _rows(lt.dataset(f"{uri}/tree/feat")) == [3]
    assert [v["version"] for v in lt.dataset(feat.uri).versions()] == [2, 3]


def test_cleanup_stops_at_a_damaged_branch_file(branched):
    lt_path = f"{branched}/_refs/branches/feat.json"
    with open(lt_path, "w") as f:
        f.write("{not json")
    with pytest.raises(CorruptFileError):
        lt.dataset(branched).cleanup_old_versions(older_than=NOW)
    assert [v["version"] for v in lance.dataset(branched).versions()] == [1, 2]


def test_branch_error_is_pylance_builtins():
    assert issubclass(BranchError, ValueError) and issubclass(BranchError, OSError)


def _names(ds) -> list[str]:
    return sorted(ds.branches.list())


def test_pylance_branches_are_listed_read_and_written_here(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(pa.table({"x": [1, 2, 3]}), uri)
    lance.write_dataset(pa.table({"x": [4]}), uri, mode="append")
    ds.create_branch("feat", 1)
    ds.create_branch("a/b", ("feat", 1))
    ours = lt.dataset(uri)
    assert ours.branches.list() == lance.dataset(uri).branches.list()
    assert [n for n, _ in ours.branches.list_ordered("asc")] == [
        n for n, _ in lance.dataset(uri).branches.list_ordered("asc")
    ]
    feat = ours.checkout_version(("feat", None))
    assert _rows(feat) == [1, 2, 3] and ours.version == 2
    feat.insert(pa.table({"x": [9]}))
    feat.delete("x = 1")
    assert _rows(lance.dataset(uri).checkout_version(("feat", None))) == [2, 3, 9]
    assert _rows(lance.dataset(uri)) == [1, 2, 3, 4]
    assert _rows(ours.checkout_version(("main", 1))) == [1, 2, 3]


def test_branches_created_here_are_pylances(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lt.write_dataset(pa.table({"x": [1, 2, 3]}), uri)
    ds.insert(pa.table({"x": [4]}))
    feat = ds.create_branch("feat", 1)
    assert feat.version == 1 and _rows(feat) == [1, 2, 3]
    feat.insert(pa.table({"x": [100]}))
    sub = ds.create_branch("feat/sub", ("feat", 2))
    sub.delete("x = 1")
    theirs = lance.dataset(uri)
    assert theirs.branches.list() == ds.branches.list()
    assert _rows(theirs.checkout_version(("feat", None))) == [1, 2, 3, 100]
    assert _rows(theirs.checkout_version(("feat/sub", None))) == [2, 3, 100]
    lance.write_dataset(pa.table({"x": [55]}), f"{uri}/tree/feat", mode="append")  # pylance writes ours
    assert _rows(ds.checkout_version(("feat", None))) == [1, 2, 3, 55, 100]
    assert _rows(ds) == [1, 2, 3, 4]
    ds.tags.create("t1", 2)
    assert _rows(ds.create_branch("from-tag", "t1")) == [1, 2, 3, 4]


def test_branch_names_and_deletes_as_pylance(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lt.write_dataset(pa.table({"x": [1]}), uri)
    for bad in ("main", "bad name", "x..y"):
        with pytest.raises(OSError):  # BranchError
            ds.create_branch(bad)
    ds.create_branch("feat")
    with pytest.raises(BranchError, match="exists"):
        ds.create_branch("feat")
    ds.create_branch("feat/sub", ("feat", None))
    with pytest.raises(BranchError, match="feat/sub"):
        ds.branches.delete("feat")
    with pytest.raises(ValueError):
        ds.checkout_version(("nope", None))
    with pytest.raises(ValueError):
        ds.branches.delete("nope")
    with pytest.raises(ValueError, match="sort order"):
        ds.branches.list_ordered("sideways")
    ds.branches.replace_metadata("feat", {"k": "v"})
    assert lance.dataset(uri).branches.list()["feat"]["metadata"] == {"k": "v"}
    ds.branches.delete("feat/sub")
    ds.branches.delete("feat")
    assert _names(ds) == [] and _names(lance.dataset(uri)) == []
    ds.create_branch("feat")  # the name is free again
    assert _names(lance.dataset(uri)) == ["feat"]


def test_deep_clone_copies_every_file(tmp_path):
    uri, target = str(tmp_path / "ds"), str(tmp_path / "copy")
    ds = lt.write_dataset(pa.table({"x": [1, 2, 3]}), uri)
    feat = ds.create_branch("feat")
    feat.insert(pa.table({"x": [4]}))
    feat.delete("x = 2")
    clone = ds.deep_clone(target, ("feat", None))
    assert _rows(clone) == [1, 3, 4] and clone.base_paths() == {}
    theirs = lance.dataset(target)
    assert _rows(theirs) == [1, 3, 4] and theirs.version == feat.version
    lt.LanceDataset.drop(uri)
    assert _rows(lt.dataset(target)) == [1, 3, 4]
    with pytest.raises(lt.DatasetAlreadyExistsError):
        clone.deep_clone(target, clone.version)


def test_shallow_clone_of_a_branch(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lt.write_dataset(pa.table({"x": [1, 2]}), uri)
    ds.create_branch("feat").insert(pa.table({"x": [3]}))
    clone = ds.shallow_clone(str(tmp_path / "clone"), ("feat", None))
    assert _rows(clone) == [1, 2, 3] and _rows(lance.dataset(str(tmp_path / "clone"))) == [1, 2, 3]


def test_a_tag_on_a_branch_version_opens_it_and_keeps_it_from_cleanup(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(pa.table({"x": [1]}), uri)
    feat = ds.create_branch("feat")
    lance.write_dataset(pa.table({"x": [2]}), feat.uri, mode="append")  # feat v2
    lance.write_dataset(pa.table({"x": [3]}), feat.uri, mode="overwrite")  # feat v3
    ds.tags.create("on-feat", ("feat", 2))
    ours = lt.dataset(uri)
    assert ours.tags.list()["on-feat"]["branch"] == "feat"
    assert _rows(ours.checkout("on-feat")) == _rows(lt.dataset(uri, version="on-feat")) == [1, 2]
    with pytest.raises(lt.TagError):
        lt.dataset(feat.uri).cleanup_old_versions(older_than=NOW)
    lt.dataset(feat.uri).cleanup_old_versions(older_than=NOW, error_if_tagged_old_versions=False)
    assert _rows(lance.dataset(uri, version="on-feat")) == [1, 2]
    lt.dataset(uri).cleanup_old_versions(older_than=NOW)  # main's cleanup: the tag is not main's
    assert _rows(lance.dataset(uri, version="on-feat")) == [1, 2]


@pytest.mark.parametrize("policy", [{"older_than": NOW}, {"retain_versions": 1}, {"retain_versions": 3}])
def test_explain_cleanup_names_the_branches_that_keep_versions(tmp_path, policy):
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(pa.table({"x": [1]}), uri)
    ds = lance.write_dataset(pa.table({"x": [2]}), uri, mode="append")
    ds.create_branch("feat", 1)
    ds.create_branch("f2", 2)
    lance.write_dataset(pa.table({"x": [3]}), uri, mode="append")

    def shown(plan) -> list[tuple]:
        return [(b.name, b.referenced_version, b.cleanup_candidate) for b in plan.referenced_branches]

    ours = lt.dataset(uri).explain_cleanup_old_versions(**policy)
    assert shown(ours) == shown(lance.dataset(uri).explain_cleanup_old_versions(**policy))
    assert isinstance(
        ours.referenced_branches[0] if ours.referenced_branches else None, lt.CleanupReferencedBranch | None
    )


def test_a_tag_made_through_a_branch_handle_keeps_its_version(tmp_path):
    uri = str(tmp_path / "ds")
    feat = lt.write_dataset(pa.table({"x": [1]}), uri).create_branch("feat")
    feat.insert(pa.table({"x": [2]}))  # feat v2
    feat.tags.create("mine", 2)
    feat.insert(pa.table({"x": [3]}), mode="overwrite")  # feat v3
    lt.dataset(feat.uri).cleanup_old_versions(older_than=NOW, error_if_tagged_old_versions=False)
    assert _rows(lt.dataset(feat.uri, version=2)) == [1, 2]
