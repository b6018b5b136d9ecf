"""Writes of datasets with stable row ids (``enable_stable_row_ids=True``, which lancedb uses): the
same operations run by lance_table on one dataset and by pylance (the oracle) on another give the
same row ids, row versions and ``_take_rows`` answers, and each library keeps writing the other's."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import lance.fragment
import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.interop

SYSTEM = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def _rows(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table({"a": pa.array(ids, pa.int64()), "s": pa.array([f"r{i}" for i in ids], pa.string())})


def _view(uri: Path) -> pa.Table:
    """What pylance reads: the rows with their ids and versions, in ``a`` order."""
    return lance.dataset(uri).to_table(columns=["a", "s", *SYSTEM]).sort_by("a")


def _same(ours: Path, theirs: Path) -> None:
    assert _view(ours).equals(_view(theirs))
    assert lt.dataset(ours).manifest.next_row_id == lt.dataset(theirs).manifest.next_row_id
    ids = _view(theirs)["_rowid"].to_pylist()
    sample = ids[::3] + ids[-1:]
    assert lance.dataset(ours)._take_rows(sample).equals(lance.dataset(theirs)._take_rows(sample))
    assert lt.dataset(ours).to_table().sort_by("a").equals(lance.dataset(theirs).to_table().sort_by("a"))


def _delete(lib: Any, uri: Path, predicate: str) -> None:
    (lt.dataset(uri) if lib is lt else lance.dataset(uri)).delete(predicate)


def _compact(lib: Any, uri: Path, **options: Any) -> None:
    if lib is lt:
        lt.dataset(uri).compact_files(**options)
    else:
        lance.dataset(uri).optimize.compact_files(**options)


Step = Callable[[Any, Path], None]

STEPS: list[Step] = [
    lambda lib, uri: lib.write_dataset(_rows(0, 20), uri, max_rows_per_file=6, enable_stable_row_ids=True),
    lambda lib, uri: lib.write_dataset(_rows(20, 7), uri, mode="append"),
    lambda lib, uri: _delete(lib, uri, "a % 3 = 0"),
    lambda lib, uri: _delete(lib, uri, "a >= 12 AND a < 18"),  # a whole fragment and parts of others
    lambda lib, uri: _compact(lib, uri, target_rows_per_fragment=8),
    lambda lib, uri: lib.write_dataset(_rows(100, 5), uri, mode="append"),
    lambda lib, uri: _delete(lib, uri, "a = 101"),
    lambda lib, uri: _compact(lib, uri),
]


def test_the_same_writes_give_the_same_row_ids(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for step in STEPS:
        step(lt, ours)
        step(lance, theirs)
        _same(ours, theirs)


@pytest.mark.parametrize("split", [1, 3, 5])
def test_each_library_keeps_writing_the_other_s(tmp_path: Path, split: int) -> None:
    """lance_table runs the first steps, pylance the rest (and the reverse); the result equals
    pylance running them all."""
    oracle = tmp_path / "oracle"
    for step in STEPS:
        step(lance, oracle)
    for first, then in ((lt, lance), (lance, lt)):
        uri = tmp_path / f"{first.__name__}-{split}"
        for i, step in enumerate(STEPS):
            step(first if i < split else then, uri)
        _same(uri, oracle)


def test_an_overwrite_continues_the_ids(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for lib, uri in ((lt, ours), (lance, theirs)):
        lib.write_dataset(_rows(0, 5), uri, enable_stable_row_ids=True)
        lib.write_dataset(_rows(10, 3), uri, mode="overwrite")
    _same(ours, theirs)
    assert _view(ours)["_rowid"].to_pylist() == [5, 6, 7]


def test_an_empty_dataset_keeps_using_stable_row_ids(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for lib, uri in ((lt, ours), (lance, theirs)):
        lib.write_dataset(_rows(0, 0), uri, enable_stable_row_ids=True)
        lib.write_dataset(_rows(0, 4), uri, mode="append")
    _same(ours, theirs)
    assert _view(ours)["_rowid"].to_pylist() == [0, 1, 2, 3]


def test_the_option_is_ignored_for_an_existing_dataset(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for lib, uri in ((lt, ours), (lance, theirs)):
        lib.write_dataset(_rows(0, 4), uri)
        lib.write_dataset(_rows(4, 4), uri, mode="append", enable_stable_row_ids=True)
    assert not lt.dataset(ours).manifest.next_row_id
    assert (
        lance.dataset(ours)
        .to_table(with_row_id=True)
        .equals(lance.dataset(theirs).to_table(with_row_id=True))
    )


def test_commits_of_lance_operations_give_row_ids(tmp_path: Path) -> None:
    """An Append and an Update committed by hand on copies of one dataset, one copy by each library."""
    ours = tmp_path / "ours"
    lance.write_dataset(_rows(0, 10), ours, max_rows_per_file=5, enable_stable_row_ids=True)
    new = lance.fragment.write_fragments(_rows(50, 3), ours)
    updated = lance.dataset(ours).get_fragment(0).delete("a = 2")
    moved = lance.fragment.write_fragments(pa.table({"a": [2], "s": ["two"]}), ours)
    theirs = tmp_path / "theirs"
    shutil.copytree(ours, theirs)
    lt.LanceDataset.commit(ours, lt.LanceOperation.Append(new), read_version=1)
    lance.LanceDataset.commit(theirs, lance.LanceOperation.Append(new), read_version=1)
    _same(ours, theirs)
    lt.LanceDataset.commit(
        ours, lt.LanceOperation.Update(updated_fragments=[updated], new_fragments=moved), read_version=2
    )
    lance.LanceDataset.commit(
        theirs, lance.LanceOperation.Update(updated_fragments=[updated], new_fragments=moved), read_version=2
    )
    _same(ours, theirs)


def test_a_new_dataset_committed_by_hand_uses_stable_row_ids(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    frags = lt.fragment.write_fragments(_rows(0, 6), ours, max_rows_per_file=4)
    shutil.copytree(ours, theirs)
    schema = _rows(0, 1).schema
    lt.LanceDataset.commit(ours, lt.LanceOperation.Overwrite(schema, frags), enable_stable_row_ids=True)
    pylance_frags = [lance.fragment.FragmentMetadata.from_json(json.dumps(f.to_json())) for f in frags]
    lance.LanceDataset.commit(
        theirs, lance.LanceOperation.Overwrite(schema, pylance_frags), enable_stable_row_ids=True
    )
    _same(ours, theirs)


def test_a_rewrite_committed_by_hand_keeps_the_row_ids(tmp_path: Path) -> None:
    """Fragments rewritten by a worker without row ids get the ids of the rows they hold (the live
    rows of the old fragments, in order), as compaction gives them."""
    uri = tmp_path / "ds"
    lance.write_dataset(_rows(0, 10), uri, max_rows_per_file=5, enable_stable_row_ids=True)
    lance.dataset(uri).delete("a IN (1, 7)")
    before = _view(uri)
    old = lance.dataset(uri).get_fragments()
    live = lance.dataset(uri).to_table().sort_by("a")
    new = lt.fragment.write_fragments(live, uri)
    group = lt.LanceOperation.RewriteGroup([f.metadata for f in old], new)
    lt.LanceDataset.commit(uri, lt.LanceOperation.Rewrite([group]), read_version=2)
    assert _view(uri).equals(before)
    ids = before["_rowid"].to_pylist()
    assert lance.dataset(uri)._take_rows(ids).to_pydict() == before.select(["a", "s"]).to_pydict()
    short = lt.fragment.write_fragments(_rows(0, 3), uri)
    group = lt.LanceOperation.RewriteGroup([f.metadata for f in lance.dataset(uri).get_fragments()], short)
    with pytest.raises(ValueError, match="live rows"):
        lt.LanceDataset.commit(uri, lt.LanceOperation.Rewrite([group]), read_version=3)
    assert lt.dataset(uri).version == 3
