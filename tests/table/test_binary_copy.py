"""Compaction by binary copy (pylance's ``compaction_mode="try_binary_copy"`` and
``"force_binary_copy"``): the inputs' pages are copied as they are, and pylance reads the result,
appends to it and compacts it again; the fallbacks (deletions, other schemas, blobs) re-encode or
refuse, as pylance's do."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import BinaryCopyError
from lance_table.file.reader import LanceFileReader
from lance_table.table.verify import verify
from tests.helpers import assert_tables_equal

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

FORMATS = ["2.0", "2.1", "2.2"]


def _rows(start: int, n: int, nested: bool = True) -> pa.Table:
    ids = list(range(start, start + n))
    cols: dict[str, pa.Array | list] = {
        "id": pa.array(ids, pa.int64()),
        "f": pa.array([None if i % 5 == 0 else i * 0.5 for i in ids], pa.float64()),
        "cat": pa.array([None if i % 7 == 0 else f"c{i % 3}" for i in ids]),  # dictionary pages
        "const": pa.array([7] * n, pa.int32()),  # constant pages
        "long": pa.array([f"{i:08d}" * (40 + i % 9) for i in ids]),  # wide values
        "flag": pa.array([i % 2 == 0 for i in ids]),
    }
    if nested:
        cols["tags"] = pa.array([None if i % 11 == 0 else [f"t{i}", "x" * (i % 4)] for i in ids])
        cols["rec"] = pa.array(
            [{"a": i, "b": None if i % 3 == 0 else list(range(i % 4))} for i in ids],
            pa.struct([("a", pa.int64()), ("b", pa.list_(pa.int32()))]),
        )
        cols["vec"] = pa.array([[float(i)] * 4 for i in ids], pa.list_(pa.float32(), 4))
        # lists of wide values: full-zip pages with a repetition index
        cols["wide_list"] = pa.array(
            [None if i % 13 == 0 else [f"{i:08d}" * 40, "z" * (i % 300)] for i in ids]
        )
    return pa.table(cols)


def _make(uri: str, fmt: str, writer: str, sizes: list[int], **kwargs) -> pa.Table:
    lib = lt if writer == "ours" else lance
    start = 0
    for n in sizes:
        table = _rows(start, n, nested=fmt != "2.0")
        lib.write_dataset(table, uri, mode="append", data_storage_version=fmt, **kwargs)
        start += n
    return lance.dataset(uri).to_table()


def _data_file(uri: str, frag) -> LanceFileReader:
    return LanceFileReader(os.path.join(uri, "data", frag.files[0].path))


def _pages(uri: str) -> list[int]:
    """The pages of each column of the dataset's only fragment."""
    [frag] = lt.dataset(uri).get_fragments()
    reader = _data_file(uri, frag.metadata)
    return [len(col.pages) for col in reader.metadata.columns]


@pytest.mark.parametrize("writer", ["ours", "pylance"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_copied_pages_read_the_same_in_both_libraries(tmp_path, fmt, writer):
    uri = str(tmp_path / "ds")
    expected = _make(uri, fmt, writer, [50, 120, 7])
    # each column's pages' priorities (their first top-level rows in 2.1+), moved to the output
    starts: list[list[int]] = []
    for frag, first_row in zip(lt.dataset(uri).get_fragments(), [0, 50, 170]):
        columns = _data_file(uri, frag.metadata).metadata.columns
        starts = starts or [[] for _ in columns]
        for out, col in zip(starts, columns):
            out += [p.priority + (first_row if fmt != "2.0" else 0) for p in col.pages]
    inputs = [
        len(c.pages) for c in _data_file(uri, lt.dataset(uri).get_fragments()[0].metadata).metadata.columns
    ]
    reencoded = str(tmp_path / "reencoded")
    shutil.copytree(uri, reencoded)

    metrics = lt.dataset(uri).compact_files(compaction_mode="force_binary_copy")
    assert (metrics.fragments_removed, metrics.fragments_added) == (3, 1)
    lt.dataset(reencoded).compact_files()

    # every input page is in the output, as it was (three inputs of as many pages each)
    assert _pages(uri) == [3 * n for n in inputs]
    assert_tables_equal(lance.dataset(uri).to_table(), expected)
    assert_tables_equal(lt.dataset(uri).to_table(), expected)
    assert_tables_equal(lt.dataset(reencoded).to_table(), lt.dataset(uri).to_table())
    assert verify(uri).ok
    lance.dataset(uri).validate()
    [frag] = lt.dataset(uri).get_fragments()
    assert [
        [p.priority for p in col.pages] for col in _data_file(uri, frag.metadata).metadata.columns
    ] == starts
    if fmt != "2.0":
        assert starts[0] == [0, 50, 170]
    picks = [0, 49, 50, 169, 170, 176]
    assert_tables_equal(lance.dataset(uri).take(picks), expected.take(picks))
    assert_tables_equal(lt.dataset(uri).take(picks), expected.take(picks))

    # pylance appends to the result and copies it again with its own binary copy
    more = _rows(177, 30, nested=fmt != "2.0")
    lance.write_dataset(more, uri, mode="append")
    lance.dataset(uri).optimize.compact_files(compaction_mode="force_binary_copy")
    lance.dataset(uri).validate()
    both = pa.concat_tables([expected, more])
    assert_tables_equal(lt.dataset(uri).to_table(), both)
    assert_tables_equal(lance.dataset(uri).to_table(), both)
    # and so do we, on pylance's output
    lt.write_dataset(_rows(207, 3, nested=fmt != "2.0"), uri, mode="append")
    lt.dataset(uri).compact_files(compaction_mode="force_binary_copy")
    assert len(lance.dataset(uri).get_fragments()) == 1
    assert_tables_equal(lance.dataset(uri).to_table(), pa.concat_tables([both, _rows(207, 3, fmt != "2.0")]))


def test_inputs_of_several_pages_per_column(tmp_path):
    # pylance writes a page of each few batches of wide values (our own files of several pages
    # per column are the outputs of a copy, which the first test copies again)
    uri = str(tmp_path / "ds")
    rng = np.random.default_rng(0)
    tables = []
    for k in range(2):
        ids = range(k * 1500, (k + 1) * 1500)
        table = pa.table({"id": pa.array(ids, pa.int64()), "text": [rng.bytes(3000).hex() for _ in ids]})
        batches = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=300))
        lance.write_dataset(batches, uri, mode="append", data_storage_version="2.2")
        tables.append(table)
    first = lt.dataset(uri).get_fragments()[0].metadata
    inputs = [len(c.pages) for c in _data_file(uri, first).metadata.columns]
    assert max(inputs) > 1
    lt.dataset(uri).compact_files(compaction_mode="force_binary_copy")
    assert _pages(uri) == [2 * n for n in inputs]
    assert_tables_equal(lance.dataset(uri).to_table(), pa.concat_tables(tables))


def test_read_batches_do_not_change_the_bytes(tmp_path):
    uri = str(tmp_path / "ds")
    _make(uri, "2.2", "pylance", [40, 60])
    small = str(tmp_path / "small")
    shutil.copytree(uri, small)
    lt.dataset(uri).compact_files(compaction_mode="try_binary_copy")
    lt.dataset(small).compact_files(compaction_mode="try_binary_copy", binary_copy_read_batch_bytes=100)

    def data(root: str) -> bytes:
        [frag] = lt.dataset(root).get_fragments()
        return Path(root, "data", frag.metadata.files[0].path).read_bytes()

    assert data(uri) == data(small)
    with pytest.raises(ValueError, match="binary_copy_read_batch_bytes"):
        lt.dataset(uri).compact_files(compaction_mode="try_binary_copy", binary_copy_read_batch_bytes=-1)


def test_max_bytes_per_file_ends_a_file_after_an_input(tmp_path):
    uri = str(tmp_path / "ds")
    expected = _make(uri, "2.2", "ours", [30, 30, 30, 30])
    size = max(f.metadata.files[0].file_size_bytes for f in lt.dataset(uri).get_fragments())
    lt.dataset(uri).compact_files(compaction_mode="force_binary_copy", max_bytes_per_file=size + 1)
    assert [f.count_rows() for f in lance.dataset(uri).get_fragments()] == [60, 60]
    assert_tables_equal(lance.dataset(uri).to_table(), expected)


@pytest.mark.parametrize(
    ("sizes", "target"),
    [
        ([30] * 5, 50),
        ([600] * 3, 1000),
        ([700] * 3, 1000),
        ([500, 400, 300, 800], 1000),
        ([990, 20, 990], 1000),
        ([701, 700, 700], 1000),
        ([700] * 5, 1000),
    ],
)
@pytest.mark.parametrize("mode", ["force_binary_copy", "reencode"])
def test_a_bin_splits_into_files_as_in_pylance(tmp_path, sizes, target, mode):
    # as many files as the rows hold targets: copied, each ends after the input reaching the
    # target; re-encoded, they hold even rows
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    start = 0
    for n in sizes:
        lt.write_dataset(pa.table({"id": pa.array(range(start, start + n), pa.int64())}), ours, mode="append")
        start += n
    shutil.copytree(ours, theirs)
    lt.dataset(ours).compact_files(compaction_mode=mode, target_rows_per_fragment=target)
    lance.dataset(theirs).optimize.compact_files(compaction_mode=mode, target_rows_per_fragment=target)
    rows = [f.count_rows() for f in lance.dataset(theirs).get_fragments()]
    assert [f.count_rows() for f in lance.dataset(ours).get_fragments()] == rows
    assert lance.dataset(ours).to_table()["id"].to_pylist() == list(range(start))


def test_reencoded_files_hold_even_live_rows_as_in_pylance(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for k in range(3):
        lt.write_dataset(
            pa.table({"id": pa.array(range(k * 700, k * 700 + 700), pa.int64())}), ours, mode="append"
        )
    lt.dataset(ours).delete("id < 5")
    shutil.copytree(ours, theirs)
    lt.dataset(ours).compact_files(target_rows_per_fragment=1000)
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1000)
    rows = [f.count_rows() for f in lance.dataset(theirs).get_fragments()]
    assert [f.count_rows() for f in lance.dataset(ours).get_fragments()] == rows == [1048, 1047]


def _files(uri: str) -> set[str]:
    return {str(p.relative_to(uri)) for p in Path(uri).rglob("*") if p.is_file()}


def test_deletions_fall_back_or_refuse(tmp_path):
    uri = str(tmp_path / "ds")
    _make(uri, "2.2", "pylance", [40, 40])
    lt.dataset(uri).delete("id = 3")
    expected = lance.dataset(uri).to_table()
    before, version = _files(uri), lt.dataset(uri).version
    with pytest.raises(BinaryCopyError, match="deletion file") as info:
        lt.dataset(uri).compact_files(compaction_mode="force_binary_copy")
    assert isinstance(info.value, OSError)  # as pylance raises
    assert _files(uri) == before and lt.dataset(uri).version == version
    # the same as pylance: its force refuses, its try re-encodes
    theirs = str(tmp_path / "theirs")
    shutil.copytree(uri, theirs)
    with pytest.raises(OSError, match="binary copy"):
        lance.dataset(theirs).optimize.compact_files(compaction_mode="force_binary_copy")

    lt.dataset(uri).compact_files(compaction_mode="try_binary_copy")
    assert_tables_equal(lance.dataset(uri).to_table(), expected)
    assert len(lance.dataset(uri).get_fragments()) == 1
    assert max(_pages(uri)) == 1  # re-encoded: one page per column


def test_schema_changes_fall_back(tmp_path):
    uri = str(tmp_path / "ds")
    _make(uri, "2.2", "ours", [20, 20], max_rows_per_file=20)
    lt.dataset(uri).drop_columns(["flag"])
    with pytest.raises(BinaryCopyError, match="schema"):
        lt.dataset(uri).compact_files(compaction_mode="force_binary_copy")
    expected = lance.dataset(uri).to_table()
    lt.dataset(uri).compact_files(compaction_mode="try_binary_copy")
    assert_tables_equal(lance.dataset(uri).to_table(), expected)
    [frag] = lance.dataset(uri).get_fragments()
    assert "flag" not in [f.name for f in _data_file(uri, frag.metadata).metadata.fields]

    other = str(tmp_path / "added")
    _make(other, "2.2", "ours", [20, 20])
    lt.dataset(other).add_columns({"twice": "id * 2"})
    with pytest.raises(BinaryCopyError, match="2 data files"):
        lt.dataset(other).compact_files(compaction_mode="force_binary_copy")


def test_blob_columns_are_written_anew(tmp_path):
    uri = str(tmp_path / "ds")
    field = pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    schema = pa.schema([pa.field("id", pa.int64()), field])
    for k in range(2):
        table = pa.table({"id": [k], "blob": [b"x" * (k + 5)]}, schema=schema)
        lance.write_dataset(table, uri, mode="append", data_storage_version="2.1")
    with pytest.raises(BinaryCopyError, match="blob"):
        lt.dataset(uri).compact_files(compaction_mode="force_binary_copy")
    lt.dataset(uri).compact_files(compaction_mode="try_binary_copy")
    assert len(lance.dataset(uri).get_fragments()) == 1
    assert lance.dataset(uri).to_table(columns=["id"])["id"].to_pylist() == [0, 1]
    blobs = lance.dataset(uri).take_blobs("blob", indices=[0, 1])
    assert [b.readall() for b in blobs] == [b"x" * 5, b"x" * 6]


def test_stable_row_ids_are_carried(tmp_path):
    uri = str(tmp_path / "ds")
    _make(uri, "2.2", "pylance", [10, 15, 5], enable_stable_row_ids=True)
    before = lance.dataset(uri).to_table(with_row_id=True)
    lt.dataset(uri).compact_files(compaction_mode="force_binary_copy")
    assert_tables_equal(lance.dataset(uri).to_table(with_row_id=True), before)


def test_reencode_is_the_default_and_modes_are_checked(tmp_path):
    uri = str(tmp_path / "ds")
    _make(uri, "2.2", "ours", [20, 20])
    with pytest.raises(ValueError, match="compaction_mode"):
        lt.dataset(uri).compact_files(compaction_mode="copy")
    lt.dataset(uri).compact_files()
    assert max(_pages(uri)) == 1


def test_a_distributed_task_copies(tmp_path):
    from lance_table.optimize import Compaction, CompactionTask

    uri = str(tmp_path / "ds")
    expected = _make(uri, "2.2", "ours", [20, 20, 20])
    ds = lt.dataset(uri)
    plan = Compaction.plan(ds, {"compaction_mode": "force_binary_copy"})
    task = CompactionTask.from_json(plan.tasks[0].json())
    result = task.execute(lt.dataset(uri))
    Compaction.commit(ds, [result])
    assert _pages(uri)[0] == 3
    assert_tables_equal(lance.dataset(uri).to_table(), expected)


def test_a_damaged_input_fails_with_the_dataset_unchanged(tmp_path):
    from lance_table.errors import CorruptFileError

    uri = str(tmp_path / "ds")
    _make(uri, "2.2", "ours", [20, 20])
    frag = lt.dataset(uri).get_fragments()[1].metadata
    path = Path(uri, "data", frag.files[0].path)
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\x00" * (len(data) - 100))  # pages and footer zeroed
    before, version = _files(uri), lt.dataset(uri).version
    with pytest.raises(CorruptFileError, match=frag.files[0].path):
        lt.dataset(uri).compact_files(compaction_mode="try_binary_copy")
    assert _files(uri) == before and lt.dataset(uri).version == version


@pytest.mark.s3
def test_copy_on_object_storage(s3_uri, s3_options):
    tables = [_rows(k * 40, 40) for k in range(3)]
    for table in tables:
        lt.write_dataset(table, s3_uri, mode="append", storage_options=s3_options)
    lt.dataset(s3_uri, storage_options=s3_options).compact_files(
        compaction_mode="force_binary_copy", binary_copy_read_batch_bytes=1000
    )
    ds = lance.dataset(s3_uri, storage_options=s3_options)
    assert len(ds.get_fragments()) == 1
    assert_tables_equal(ds.to_table(), pa.concat_tables(tables))


def test_indexed_rows_moved_by_a_copy_are_recorded_as_pylance_does(tmp_path):
    from tests.table.test_indices import _indexed, _reuse_content, assert_indices_answer, described

    base = _indexed(tmp_path / "base", "2.2", False)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    lt.dataset(ours).compact_files(target_rows_per_fragment=1000, compaction_mode="force_binary_copy")
    lance.dataset(theirs).optimize.compact_files(
        target_rows_per_fragment=1000, compaction_mode="force_binary_copy", defer_index_remap=True
    )
    # files of 300 rows: an output ends after the input that takes it to 1000 rows, as in pylance
    assert sorted((f.fragment_id, f.count_rows()) for f in lance.dataset(ours).get_fragments()) == sorted(
        (f.fragment_id, f.count_rows()) for f in lance.dataset(theirs).get_fragments()
    )
    assert sorted(f.count_rows() for f in lance.dataset(ours).get_fragments()) == [250, 800, 1200]
    assert described(ours) == described(theirs)
    assert _reuse_content(ours) == _reuse_content(theirs) and _reuse_content(ours) is not None
    assert_indices_answer(ours)
