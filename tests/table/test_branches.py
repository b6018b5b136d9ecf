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
