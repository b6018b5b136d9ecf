"""pylance's JSON of distributed compaction (``CompactionPlan``, ``CompactionTask``,
``RewriteResult`` ``.json()`` / ``.from_json()``): the same JSON as pylance's for the same
dataset, and a plan made by either library executed by workers of the other and committed by
the first."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.optimize import Compaction, CompactionPlan, CompactionTask, RewriteResult

lance = pytest.importorskip("lance")
from lance.optimize import Compaction as PCompaction  # noqa: E402

_OPTIONS = {"target_rows_per_fragment": 1000, "batch_size": 7}


def _copies(tmp_path) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lt.write_dataset(
        pa.table({"id": pa.array(range(30), pa.int64()), "v": ["a"] * 30}), ours, max_rows_per_file=10
    )
    lt.dataset(ours).delete("id = 3")
    shutil.copytree(ours, theirs)
    return ours, theirs


def _rows(uri: str) -> list[dict]:
    return sorted(lance.dataset(uri).to_table().to_pylist(), key=lambda r: r["id"])


def test_json_is_pylances(tmp_path) -> None:
    ours, theirs = _copies(tmp_path)
    plan, pplan = (
        Compaction.plan(lt.dataset(ours), _OPTIONS),
        PCompaction.plan(lance.dataset(theirs), _OPTIONS),
    )
    assert json.loads(plan.json()) == json.loads(pplan.json())
    assert json.loads(plan.tasks[0].json()) == json.loads(pplan.tasks[0].json())
    back = CompactionPlan.from_json(plan.json())
    assert back.read_version == plan.read_version and back.tasks[0].fragments == plan.tasks[0].fragments
    assert CompactionTask.from_json(plan.tasks[0].json()).options["batch_size"] == 7
    result = plan.tasks[0].execute(lt.dataset(ours))
    presult = pplan.tasks[0].execute(lance.dataset(theirs))
    mine, theirs_json = json.loads(result.json()), json.loads(presult.json())
    for doc in (mine, theirs_json):  # (new data file names and sizes are the writers' own)
        for frag in doc["new_fragments"]:
            frag["files"] = [
                {k: v for k, v in f.items() if k not in ("path", "file_size_bytes")} for f in frag["files"]
            ]
    assert mine == theirs_json


def test_plans_cross_between_the_libraries(tmp_path) -> None:
    ours, theirs = _copies(tmp_path)
    # our plan -> pylance's workers -> our driver
    plan = lance.optimize.CompactionPlan.from_json(Compaction.plan(lt.dataset(ours), _OPTIONS).json())
    results = [task.execute(lance.dataset(ours)) for task in plan.tasks]
    Compaction.commit(lt.dataset(ours), [RewriteResult.from_json(r.json()) for r in results])
    # pylance's plan -> our workers -> pylance's driver
    pplan = CompactionPlan.from_json(PCompaction.plan(lance.dataset(theirs), _OPTIONS).json())
    presults = [CompactionTask.from_json(t.json()).execute(lt.dataset(theirs)) for t in pplan.tasks]
    PCompaction.commit(
        lance.dataset(theirs), [lance.optimize.RewriteResult.from_json(r.json()) for r in presults]
    )
    for uri in (ours, theirs):
        assert len(lt.dataset(uri).get_fragments()) == 1
        assert _rows(uri) == [{"id": i, "v": "a"} for i in range(30) if i != 3]
        assert lt.dataset(uri).to_table().sort_by("id").equals(lance.dataset(uri).to_table().sort_by("id"))


@pytest.mark.parametrize("cls", [CompactionPlan, CompactionTask, RewriteResult])
@pytest.mark.parametrize("text", ["not json", "[]", '{"read_version": 1}'])
def test_bad_json_is_a_value_error(cls, text) -> None:
    with pytest.raises(ValueError, match="Could not load"):
        cls.from_json(text)
