"""merge_insert, update, delete, compaction and add_columns as Spark jobs, each compared with
pylance's single-machine operation on a copy of the same dataset; task retries and failed jobs
leave no second copy of rows and no files behind."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
lance = pytest.importorskip("lance")

import lance_table.spark as lts  # noqa: E402
from lance_table.errors import FilterError, MergeSourceError  # noqa: E402
from lance_table.spark.jobs import FAIL_PROPERTY  # noqa: E402
from lance_table.storage import open_storage  # noqa: E402
from lance_table.table import versions  # noqa: E402
from lance_table.table.operations.cleanup_references import referenced_files  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.interop]

ROWS = 3000


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pylance dataset of 3000 rows in 5 fragments, a few rows deleted."""
    root = tmp_path_factory.mktemp("jobs") / "base"
    ids = np.arange(ROWS, dtype=np.int64)
    table = pa.table(
        {
            "id": ids,
            "name": pa.array([f"n{i}" for i in ids]),
            "score": (ids % 97).astype(np.float64),
        }
    )
    ds = lance.write_dataset(table, str(root), max_rows_per_file=600)
    ds.delete("id % 50 = 7")
    return root


@pytest.fixture
def pair(base: Path, tmp_path: Path) -> tuple[str, str]:
    """Two copies of the base dataset: one for the Spark job, one for pylance."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    shutil.copytree(base, ours)
    shutil.copytree(base, theirs)
    return str(ours), str(theirs)


@pytest.fixture
def failing(spark: object) -> Iterator[object]:
    """Sets the jobs' failure hook for jobs started in this test (cleared afterwards)."""
    sc = spark.sparkContext  # type: ignore[attr-defined]
    yield sc
    sc.setLocalProperty(FAIL_PROPERTY, None)


def contents(uri: str) -> pa.Table:
    """The dataset's rows as pylance reads them, sorted by id."""
    return lance.dataset(uri).to_table().sort_by("id")


def unreferenced(uri: str) -> set[str]:
    """Data and deletion files no version references."""
    storage = open_storage(uri)
    keep: set[str] = set()
    for entry in versions.list_versions(storage):
        keep |= referenced_files(versions.read_manifest_file(storage, entry).manifest)
    present = set()
    for folder in ("data", "_deletions"):
        if os.path.isdir(os.path.join(uri, folder)):
            present |= {f"{folder}/{name}" for name in os.listdir(os.path.join(uri, folder))}
    return present - keep


def files_of(uri: str) -> set[str]:
    return {
        str(p.relative_to(uri))
        for p in Path(uri).rglob("*")
        if p.is_file() and "_transactions" not in p.parts
    }


def source(spark: object, ids: np.ndarray, tag: str) -> tuple[object, pa.Table]:
    table = pa.table(
        {"id": ids.astype(np.int64), "name": pa.array([f"{tag}{i}" for i in ids]), "score": ids * 0.5}
    )
    return spark.createDataFrame(table.to_pandas()), table  # type: ignore[attr-defined]


def test_merge_insert_upsert_matches_pylance(spark: object, pair: tuple[str, str]) -> None:
    ours, theirs = pair
    df, table = source(spark, np.arange(2500, 3500), "new")  # 500 matched (some deleted), 500 new
    got = lts.merge_insert(df, ours, "id")
    want = (
        lance.dataset(theirs).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    ).execute(table)
    assert got == want
    assert contents(ours).equals(contents(theirs))
    assert lance.dataset(ours).version == lance.dataset(theirs).version
    assert unreferenced(ours) == set()


def test_merge_insert_delete_by_source_with_a_retried_task(
    spark: object, pair: tuple[str, str], failing: object
) -> None:
    """The first attempt of a task crashes after writing its files: the retry's files are
    committed, the crashed attempt's are deleted, and no row is there twice."""
    ours, theirs = pair
    df, table = source(spark, np.arange(1000, 3300, 2), "src")
    failing.setLocalProperty(FAIL_PROPERTY, "first-attempt")  # type: ignore[attr-defined]
    got = lts.merge_insert(df, ours, ["id"], when_matched="do_nothing", when_not_matched_by_source="delete")
    want = (
        lance.dataset(theirs)
        .merge_insert("id")
        .when_not_matched_insert_all()
        .when_not_matched_by_source_delete()
    ).execute(table)
    assert got == want
    assert contents(ours).equals(contents(theirs))
    assert unreferenced(ours) == set()


def test_merge_insert_refuses_ambiguous_source(spark: object, pair: tuple[str, str]) -> None:
    ours, _ = pair
    before = files_of(ours)
    df, _ = source(spark, np.array([10, 10, 4000]), "dup")
    with pytest.raises(MergeSourceError, match="multiple source rows"):
        lts.merge_insert(df, ours, "id")
    assert files_of(ours) == before
    with pytest.raises(MergeSourceError, match="unexpected"):
        lts.merge_insert(df.withColumnRenamed("score", "other"), ours, "id")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="when_matched"):
        lts.merge_insert(df, ours, "id", when_matched="delete")


def test_update_matches_pylance(spark: object, pair: tuple[str, str]) -> None:
    ours, theirs = pair
    updates = {"score": "score * 2 + 1", "name": "concat(name, '!')"}
    got = lts.update(spark, ours, updates, where="id >= 1100 AND id < 2000")
    want = lance.dataset(theirs).update(updates, where="id >= 1100 AND id < 2000")
    assert got == want
    assert contents(ours).equals(contents(theirs))
    assert unreferenced(ours) == set()


def test_delete_matches_pylance(spark: object, pair: tuple[str, str]) -> None:
    ours, theirs = pair
    got = lts.delete(spark, ours, "id < 700 OR score > 90")
    want = lance.dataset(theirs).delete("id < 700 OR score > 90")
    assert got == want
    assert contents(ours).equals(contents(theirs))
    assert [f.metadata.id for f in lance.dataset(ours).get_fragments()] == [
        f.metadata.id for f in lance.dataset(theirs).get_fragments()
    ]
    with pytest.raises(FilterError):
        lts.delete(spark, ours, "no_such_column = 1")


def test_failed_job_leaves_the_dataset_as_it_was(
    spark: object, pair: tuple[str, str], failing: object
) -> None:
    """Every attempt crashes after writing its deletion files: the job fails, and neither a
    version nor a file of it remains."""
    ours, _ = pair
    before, version = files_of(ours), lance.dataset(ours).version
    failing.setLocalProperty(FAIL_PROPERTY, "always")  # type: ignore[attr-defined]
    with pytest.raises(Exception, match=r"exited|crashed|Python worker"):
        lts.delete(spark, ours, "id < 2000")
    assert lance.dataset(ours).version == version
    assert files_of(ours) == before
    assert lance.dataset(ours).count_rows() == lance.dataset(pair[1]).count_rows()


def test_compact_matches_pylance(spark: object, pair: tuple[str, str]) -> None:
    ours, theirs = pair
    for uri in pair:
        lance.dataset(uri).delete("id % 3 = 0 AND id < 1500")  # deletions to materialize
    got = lts.compact(spark, ours, target_rows_per_fragment=1000)
    want = lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1000)
    assert (got.fragments_removed, got.fragments_added) == (want.fragments_removed, want.fragments_added)
    assert contents(ours).equals(contents(theirs))
    assert [f.count_rows() for f in lance.dataset(ours).get_fragments()] == [
        f.count_rows() for f in lance.dataset(theirs).get_fragments()
    ]
    assert unreferenced(ours) == set()


def test_add_columns_matches_pylance(spark: object, pair: tuple[str, str]) -> None:
    ours, theirs = pair
    lts.add_columns(spark, ours, {"double_score": "score * 2", "tag": "concat('t', name)"})
    lance.dataset(theirs).add_columns({"double_score": "score * 2", "tag": "concat('t', name)"})

    def model(batch: pa.RecordBatch) -> pa.RecordBatch:  # a "model" backfilling a column
        return pa.record_batch([pa.compute.multiply(batch.column("id"), 10)], names=["embedding"])

    lts.add_columns(spark, ours, model, read_columns=["id"])
    lance.dataset(theirs).add_columns(model, read_columns=["id"])
    assert contents(ours).equals(contents(theirs))
    assert lance.dataset(ours).schema == lance.dataset(theirs).schema
    assert unreferenced(ours) == set()
