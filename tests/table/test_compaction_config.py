"""Compaction options from the dataset's ``lance.compaction.*`` config, as pylance 14 reads them:
an option the call leaves out takes the config's value; an explicit one wins."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import BinaryCopyError, UnsupportedOperationError
from lance_table.optimize import Compaction
from lance_table.table.compaction_config import config_options

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop


def _make(uri: str, n: int = 4) -> None:
    for i in range(n):
        lance.write_dataset(pa.table({"id": range(i * 10, i * 10 + 10)}), uri, mode="append")


def _rows(uri: str, lib) -> list[int]:
    return [f.count_rows() for f in lib.dataset(uri).get_fragments()]


def test_config_target_rows_as_pylance(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    _make(ours)
    lance.dataset(ours).update_config({"lance.compaction.target_rows_per_fragment": "20"})
    shutil.copytree(ours, theirs)
    lt.dataset(ours).compact_files()
    lance.dataset(theirs).optimize.compact_files()
    assert _rows(ours, lance) == _rows(theirs, lance) == [20, 20]
    # an explicit option wins over the config
    lt.dataset(ours).compact_files(target_rows_per_fragment=40)
    assert _rows(ours, lance) == [40]


def test_config_compaction_mode_as_pylance(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    _make(ours)
    lance.dataset(ours).delete("id = 3")
    lance.dataset(ours).update_config({"lance.compaction.compaction_mode": "force_binary_copy"})
    shutil.copytree(ours, theirs)
    with pytest.raises(OSError, match="binary copy"):
        lance.dataset(theirs).optimize.compact_files()
    with pytest.raises(BinaryCopyError, match="binary copy"):
        lt.dataset(ours).compact_files()
    with pytest.raises(BinaryCopyError):  # the distributed plan reads the config too
        ds = lt.dataset(ours)
        plan = Compaction.plan(ds, {})
        Compaction.commit(ds, [task.execute(ds) for task in plan.tasks])
    lt.dataset(ours).compact_files(compaction_mode="reencode")
    assert _rows(ours, lance) == [39]


def test_config_values_are_checked(tmp_path):
    uri = str(tmp_path / "ds")
    _make(uri, 2)
    lance.dataset(uri).update_config({"lance.compaction.materialize_deletions_threshold": "lots"})
    with pytest.raises(ValueError, match="materialize_deletions_threshold"):
        lt.dataset(uri).compact_files()
    lance.dataset(uri).update_config({"lance.compaction.materialize_deletions_threshold": "0.5"})
    lance.dataset(uri).update_config({"lance.compaction.max_source_fragments": "1"})
    with pytest.raises(UnsupportedOperationError, match="max_source_fragments"):
        lt.dataset(uri).compact_files()


def test_config_parsing():
    config = {
        "lance.compaction.materialize_deletions": "False",
        "lance.compaction.batch_size": " 64 ",
        "lance.compaction.compaction_mode": "try_binary_copy",
        "lance.other": "x",
    }
    assert config_options(config) == {
        "materialize_deletions": False,
        "batch_size": 64,
        "compaction_mode": "try_binary_copy",
    }
