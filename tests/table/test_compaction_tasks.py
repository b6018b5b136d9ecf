"""Distributed compaction with pylance's objects: ``Compaction.plan``, ``CompactionTask.execute`` on
workers (pickled tasks, fresh handles), ``Compaction.commit`` on the driver; compared with pylance's
own distributed compaction of a copy of the same dataset."""

from __future__ import annotations

import pickle
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.optimize import Compaction, CompactionPlan, RewriteResult


def _dataset(path: Path) -> str:
    uri = str(path)
    for start in range(0, 1000, 100):  # ten fragments of 100 rows
        rows = pa.table({"id": pa.array(range(start, start + 100), pa.int64()), "s": [f"v{start}"] * 100})
        lt.write_dataset(rows, uri, mode="append")
    lt.dataset(uri).delete("id % 10 = 3")
    return uri


def _rows(table: pa.Table) -> list[tuple[int, str]]:
    return sorted(zip(table["id"].to_pylist(), table["s"].to_pylist()))


def _run_distributed(module, compaction, uri: str, options: dict) -> tuple[object, object]:
    ds = module.dataset(uri)
    plan = compaction.plan(ds, options)
    rewrites = [task.execute(module.dataset(uri)) for task in plan.tasks]
    return plan, compaction.commit(ds, rewrites)


@pytest.mark.interop
def test_plan_execute_commit_as_pylance(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    from lance.optimize import Compaction as TheirCompaction

    ours = _dataset(tmp_path / "ours")
    theirs = str(tmp_path / "theirs")
    shutil.copytree(ours, theirs)
    expected = _rows(lance.dataset(ours).to_table())
    options = {"target_rows_per_fragment": 400}

    plan, metrics = _run_distributed(lt, Compaction, ours, options)
    their_plan, their_metrics = _run_distributed(lance, TheirCompaction, theirs, options)

    assert plan.num_tasks() == their_plan.num_tasks() == 2
    assert repr(plan) == repr(their_plan) == "CompactionPlan(read_version=11, tasks=<2 compaction tasks>)"
    assert [[f.id for f in t.fragments] for t in plan.tasks] == [
        [f.id for f in t.fragments] for t in their_plan.tasks
    ]
    assert (metrics.fragments_removed, metrics.fragments_added) == (
        their_metrics.fragments_removed,
        their_metrics.fragments_added,
    )
    for uri in (ours, theirs):  # each library reads both results
        assert _rows(lance.dataset(uri).to_table()) == expected
        assert _rows(lt.dataset(uri).to_table()) == expected
        assert len(lance.dataset(uri).get_fragments()) == len(lt.dataset(theirs).get_fragments())
    # pylance keeps writing on the result
    lance.write_dataset(pa.table({"id": pa.array([5000], pa.int64()), "s": ["x"]}), ours, mode="append")
    assert lt.dataset(ours).count_rows() == len(expected) + 1


def test_tasks_and_results_pickle_and_the_handle_moves(tmp_path: Path) -> None:
    uri = _dataset(tmp_path / "ds")
    ds = lt.dataset(uri)
    before = _rows(ds.to_table())
    plan = pickle.loads(pickle.dumps(Compaction.plan(ds, {"target_rows_per_fragment": 1000})))
    assert isinstance(plan, CompactionPlan) and plan.read_version == ds.version
    rewrites = [pickle.loads(pickle.dumps(t.execute(lt.dataset(uri)))) for t in plan.tasks]
    assert all(isinstance(r, RewriteResult) for r in rewrites)
    # pylance's repr: the fragments, new before old, no metrics
    assert re.fullmatch(
        r"RewriteResult\(read_version=\d+, new_fragments=\[FragmentMetadata\(.+\)\], "
        r"old_fragments=\[FragmentMetadata\(.+\)\]\)",
        repr(rewrites[0]),
    )
    assert sum(len(r.new_fragments) for r in rewrites) == 1
    metrics = Compaction.commit(ds, rewrites)
    assert ds.version == plan.read_version + 2  # ReserveFragments, then Rewrite, as pylance
    assert metrics.fragments_removed == 10 and metrics.fragments_added == 1
    assert _rows(ds.to_table()) == before
    assert len(ds.get_fragments()) == 1


def test_commit_rebases_over_an_append_and_refuses_a_lost_fragment(tmp_path: Path) -> None:
    uri = _dataset(tmp_path / "ds")
    ds = lt.dataset(uri)
    plan = Compaction.plan(ds, {"target_rows_per_fragment": 1000})
    rewrites = [t.execute(lt.dataset(uri)) for t in plan.tasks]
    lt.write_dataset(pa.table({"id": pa.array([9999], pa.int64()), "s": ["late"]}), uri, mode="append")
    Compaction.commit(ds, rewrites)
    latest = lt.dataset(uri)
    assert latest.count_rows() == 901 and len(latest.get_fragments()) == 2

    # a plan of a version whose fragments a later compaction replaced
    other = tmp_path / "other"
    uri2 = _dataset(other)
    stale = Compaction.plan(lt.dataset(uri2), {"target_rows_per_fragment": 1000})
    results = [t.execute(lt.dataset(uri2)) for t in stale.tasks]
    lt.dataset(uri2).optimize.compact_files(target_rows_per_fragment=1000)
    with pytest.raises(lt.CommitConflictError):
        Compaction.commit(lt.dataset(uri2), results)
    assert lt.dataset(uri2).count_rows() == 900


def test_results_of_two_versions_and_empty_plans(tmp_path: Path) -> None:
    uri = _dataset(tmp_path / "ds")
    ds = lt.dataset(uri)
    first = Compaction.plan(ds, {"target_rows_per_fragment": 300}).tasks[0].execute(ds)
    lt.write_dataset(pa.table({"id": pa.array([1], pa.int64()), "s": ["a"]}), uri, mode="append")
    second = Compaction.plan(lt.dataset(uri), {"target_rows_per_fragment": 300}).tasks[0].execute(ds)
    with pytest.raises(ValueError, match="different versions"):
        Compaction.commit(lt.dataset(uri), [first, second])
    big = lt.dataset(uri)
    big.optimize.compact_files(target_rows_per_fragment=10_000)
    assert Compaction.plan(big, {"target_rows_per_fragment": 10_000}).num_tasks() == 0
    with pytest.raises(TypeError):
        Compaction.plan(big, {"no_such_option": 1})  # type: ignore[typeddict-unknown-key]
