"""A Spark task of one core decodes on its own thread, not on the thread pools (Spark runs a task
on each core, so the pools would only share the task's core with it); a task of more cores, or a
read outside Spark, uses the pools. The rows are the same either way, and those pylance reads."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
from lance_table import _parallel
from lance_table.spark import worker
from lance_table.spark.source import LanceTableDataSource

lance = pytest.importorskip("lance")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two fragments of pylance 2.2 files: numbers, strings with nulls, vectors."""
    uri = str(tmp_path_factory.mktemp("task_cores") / "ds")
    rng = np.random.default_rng(11)
    n = 6000
    table = pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "x": pa.array(rng.random(n), mask=rng.random(n) < 0.1),
            "name": pa.array([f"name-{i % 53}" if i % 13 else None for i in range(n)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4),
        }
    )
    lance.write_dataset(table, uri, max_rows_per_file=3500, data_storage_version="2.2")
    return uri


def _read(uri: str, monkeypatch: pytest.MonkeyPatch, cores: int | None) -> tuple[pa.Table, set[str]]:
    """The rows of every task of a read whose tasks have ``cores`` cores (None: outside Spark),
    and the pools the read asked for."""
    monkeypatch.setattr(worker, "task_cores", lambda: cores)
    # every map of the read's decoding goes to a pool, however few its values
    monkeypatch.setattr("lance_table.file.reader.PARALLEL_MIN_VALUES", 0)
    asked: set[str] = set()
    real_pool = _parallel.pool

    def pool(name: str):  # type: ignore[no-untyped-def]
        asked.add(name)
        return real_pool(name)

    monkeypatch.setattr(_parallel, "pool", pool)
    source = LanceTableDataSource({"path": uri, "batch_size": "1000"})
    reader = source.reader(source.schema())
    task = pickle.loads(pickle.dumps(reader))
    batches = [b for p in reader.partitions() for b in task.read(p)]
    return pa.Table.from_batches(batches), asked


def test_a_task_of_one_core_decodes_on_its_own_thread(dataset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = lance.dataset(dataset).to_table()
    one, asked_one = _read(dataset, monkeypatch, 1)
    assert not asked_one  # no pool: every map ran on the task's thread
    assert not _parallel.runs_inline(_parallel.DECODE)  # the thread is not left marked
    for cores in (2, None):
        got, asked = _read(dataset, monkeypatch, cores)
        assert _parallel.DECODE in asked
        assert got.equals(one)
    assert one.column("vec").type == pa.list_(pa.float32())  # Spark's array type
    assert one.drop_columns(["vec"]).equals(expected.drop_columns(["vec"]))
    assert one.column("vec").to_pylist() == expected.column("vec").to_pylist()


def test_the_thread_is_marked_only_while_a_step_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def steps() -> Iterator[int]:
        for i in range(3):
            seen.append(_parallel.runs_inline(_parallel.DECODE))
            yield i

    monkeypatch.setattr(worker, "task_cores", lambda: 1)
    held = []
    for item in worker.on_task_cores(steps()):
        held.append((item, _parallel.runs_inline(_parallel.DECODE)))
    assert seen == [True, True, True]
    assert held == [(0, False), (1, False), (2, False)]
    monkeypatch.setattr(worker, "task_cores", lambda: 4)
    seen.clear()
    assert list(worker.on_task_cores(steps())) == [0, 1, 2]
    assert seen == [False, False, False]


def test_task_cores_outside_spark_is_none() -> None:
    assert worker.task_cores() is None
