"""A task reads the version the driver planned from the pickled reader alone (no Spark session):
it never lists the store nor reads a manifest, so a read planned on one version stays exact
whatever is committed or cleaned up meanwhile."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt

pytest.importorskip("pyspark")

from lance_table.spark.source import LanceTableDataSource


@pytest.mark.parametrize("options", [{}, {"version": "2"}], ids=["latest", "pinned"])
def test_tasks_read_the_planned_version_without_the_version_files(tmp_path, options):
    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"id": np.arange(300)}), uri, max_rows_per_file=100)
    lt.dataset(uri).delete("id % 3 = 0")  # version 2: deletion files the tasks must apply
    expected = lt.dataset(uri, version=2).to_table()["id"].to_pylist()
    source = LanceTableDataSource({"path": uri, **options})
    reader = source.reader(source.schema())
    shipped = pickle.dumps(reader)  # what Spark sends to the executors
    partitions = [pickle.loads(pickle.dumps(p)) for p in reader.partitions()]
    lt.write_dataset(pa.table({"id": np.arange(1000, 1010)}), uri, mode="append")  # version 3
    shutil.rmtree(Path(uri) / "_versions")  # any listing or manifest read would now fail
    task = pickle.loads(shipped)
    got = [i for p in partitions for b in task.read(p) for i in b.column(0).to_pylist()]
    assert sorted(got) == expected


def test_small_fragments_share_tasks_and_each_row_is_read_once(tmp_path):
    from lance_table.spark import read

    uri = str(tmp_path / "ds")
    lt.write_dataset(pa.table({"id": np.arange(3000)}), uri, max_rows_per_file=10)  # 300 fragments
    lt.write_dataset(pa.table({"id": np.arange(3000, 4000)}), uri, mode="append")  # one of 1000
    source = LanceTableDataSource({"path": uri, "max_rows_per_partition": "700"})
    reader = source.reader(source.schema())
    parts = reader.partitions()
    sizes = [sum(hi - lo for _, lo, hi in ((p.fragment, p.start, p.stop), *p.more)) for p in parts]
    assert read.MIN_PARTITION_ROWS > 700  # so the bound is max_rows_per_partition
    # 4000 rows in parts of 700 at most: 6 about equal parts, cut at fragment boundaries; the big
    # fragment is split in two equal halves, which cannot join the 330 rows before them
    assert sizes == [670, 660, 670, 670, 330, 500, 500]
    assert [(p.slot, p.slots) for p in parts] == [(i, 7) for i in range(7)]
    task = pickle.loads(pickle.dumps(reader))
    batches = [list(task.read(p)) for p in parts]
    assert [len(b) for b in batches] == [1] * 7  # the rows of a task's small fragments in one batch
    got = [i for part in batches for b in part for i in b.column(0).to_pylist()]
    assert sorted(got) == list(range(4000))


def test_a_small_read_is_split_evenly_over_the_cores():
    from lance_table.format.manifest import Fragment
    from lance_table.spark.read import MIN_PARTITION_ROWS, _packed, _ranges, task_rows

    def frag(i: int, rows: int) -> Fragment:
        return Fragment(id=i, files=(), physical_rows=rows)

    eight = [frag(i, 50_001) for i in range(7)] + [frag(7, 49_993)]
    share = task_rows(400_000, 1 << 20, cores=2)
    assert share == 200_000
    groups = _packed(_ranges(eight, share), share, 1 << 20)
    assert [[f.id for f, _, _ in g] for g in groups] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # as many as cores
    assert task_rows(400_000, 1 << 20, cores=16) == MIN_PARTITION_ROWS  # never tiny tasks
    assert task_rows(50_000_000, 1 << 20, cores=2) == 1 << 20  # never above max_rows_per_partition
    one = [frag(0, 400_000)]  # one big fragment: even ranges, one per core
    assert [(lo, hi) for _, lo, hi in _ranges(one, share)] == [(0, 200_000), (200_000, 400_000)]
