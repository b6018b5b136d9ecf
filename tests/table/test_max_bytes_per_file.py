"""``max_bytes_per_file`` as pylance 14 applies it, against pylance on the same data: a file ends
after the batch that takes the bytes its writer has written past the limit. Writers write a
column's page once it holds 8 MiB, so small writes stay one file whatever the limit, and a file
can be far larger than the limit.

(Where the two libraries' encoders fill pages differently, e.g. many batches of strings, a file
may end a batch earlier or later in one than in the other; these cases split the same.)
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.fragment import write_fragments

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop


def _rows(uri: str, lib) -> list[int]:
    return [f.count_rows() for f in lib.dataset(uri).get_fragments()]


def test_a_file_ends_after_the_batch_that_passes_the_limit(tmp_path):
    # two batches of 8.5 MB of text: the first fills a page, which is written: the file ends
    # (distinct values: a page of one value repeated is a few bytes here, a constant page there)
    batch = pa.record_batch([pa.array([f"{i:06d}" + "0" * 1018 for i in range(8500)])], names=["a"])
    reader = lambda: pa.RecordBatchReader.from_batches(batch.schema, [batch, batch])  # noqa: E731
    ours = write_fragments(reader(), str(tmp_path / "ours"), max_bytes_per_file=1024)
    theirs = lance.fragment.write_fragments(reader(), str(tmp_path / "theirs"), max_bytes_per_file=1024)
    assert [f.physical_rows for f in ours] == [f.physical_rows for f in theirs] == [8500, 8500]


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_small_writes_stay_one_file(tmp_path, version):
    table = pa.table({"x": pa.array(range(30000)), "s": [f"v{i}" for i in range(30000)]})
    for lib, name in ((lt, "ours"), (lance, "theirs")):
        uri = str(tmp_path / name)
        lib.write_dataset(
            table.to_batches(max_chunksize=5000),
            uri,
            schema=table.schema,
            max_bytes_per_file=20_000,
            data_storage_version=version,
        )
    assert _rows(str(tmp_path / "ours"), lt) == _rows(str(tmp_path / "theirs"), lance) == [30000]


def test_compaction_splits_where_pylance_s_does(tmp_path):
    # 16 MiB of fixed-size lists in two fragments, compacted in batches of 1 MiB with a tiny limit:
    # each new file ends once a page (8 MiB) is written
    values = pa.FixedSizeListArray.from_arrays(pa.array(range(2 * 1024 * 1024)), 1024)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(pa.table({"a": values}), ours, max_rows_per_file=1024, data_storage_version="2.1")
    lt.write_dataset(
        pa.table({"a": [[0] * 1024]}, schema=pa.schema([pa.field("a", values.type)])), ours, mode="append"
    )
    shutil.copytree(ours, theirs)
    options = dict(target_rows_per_fragment=100 * 1024, max_bytes_per_file=1000, batch_size=128)
    got = lt.dataset(ours).optimize.compact_files(**options)
    want = lance.dataset(theirs).optimize.compact_files(**options)
    assert (got.fragments_removed, got.fragments_added) == (want.fragments_removed, want.fragments_added)
    assert _rows(ours, lt) == _rows(theirs, lance) == [1024, 1024, 1]
    assert lt.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())


def _compacted_both(tmp_path, table, version, options, *, plan=False):
    """Compact copies of one pylance-written dataset (four fragments) with each library."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(table, ours, max_rows_per_file=table.num_rows // 4, data_storage_version=version)
    shutil.copytree(ours, theirs)
    if plan:  # the distributed form: plan, execute each task, commit
        from lance.optimize import Compaction as TheirCompaction

        from lance_table.optimize import Compaction

        for ds, compaction in ((lt.dataset(ours), Compaction), (lance.dataset(theirs), TheirCompaction)):
            tasks = compaction.plan(ds, options).tasks
            compaction.commit(ds, [t.execute(ds) for t in tasks])
    else:
        lt.dataset(ours).optimize.compact_files(**options)
        lance.dataset(theirs).optimize.compact_files(**options)
    assert lt.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
    return _rows(ours, lt), _rows(theirs, lance)


@pytest.mark.parametrize(
    ("version", "dim", "rows", "batch", "plan"),
    [
        ("2.0", 128, 20000, 128, False),  # batches restart at each fragment: files of 8200, 8208 rows
        ("2.1", 128, 20000, 128, True),  # the options of Compaction.plan (batch_size too) apply
        ("2.2", 16, 100000, 100, False),  # an 8 MiB page of many small batches fills where pylance's does
        ("2.2", 512, 4096, None, False),  # without batch_size: one batch per fragment (pylance's scan)
    ],
)
def test_compaction_files_end_where_pylance_s_do(tmp_path, version, dim, rows, batch, plan):
    values = pa.FixedSizeListArray.from_arrays(pa.array(range(rows * dim)), dim)
    options = dict(target_rows_per_fragment=10**6, max_bytes_per_file=1000)
    if batch:
        options["batch_size"] = batch
    ours, theirs = _compacted_both(tmp_path, pa.table({"a": values}), version, options, plan=plan)
    assert ours == theirs
    assert len(ours) > 1
