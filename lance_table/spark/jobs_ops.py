"""update, delete, compaction and add_columns as Spark jobs: one task per fragment (per group of
fragments for compaction) runs the single-machine code for its share on an executor, and the
driver commits once, as the single-machine operation commits (see :mod:`lance_table.spark.jobs`
for retries, speculation and clean-up)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_table.errors import InputTypeError
from lance_table.format.manifest import Fragment
from lance_table.format.operations import REWRITE_ROWS, Update
from lance_table.format.transaction import Delete
from lance_table.spark.jobs import (
    JobSpec,
    TaskOutput,
    commit_transaction,
    new_job,
    run_fragment_tasks,
    run_job,
)
from lance_table.table import versions
from lance_table.table.commit import check_can_commit
from lance_table.table.operations.compaction import (
    DEFAULT_MATERIALIZE_DELETIONS,
    DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD,
    DEFAULT_TARGET_ROWS,
    CompactionJob,
    CompactionMetrics,
    commit_compaction,
    plan_compaction,
    rewrite_fragments,
)
from lance_table.table.operations.delete import delete_in_fragment
from lance_table.table.operations.schema_add import merge_pending, plan_null_columns
from lance_table.table.operations.schema_udf import normalize, write_transform
from lance_table.table.operations.update import compile_assignments, update_format, update_fragment
from lance_table.table.scan import make_spec
from lance_table.table.snapshot import Snapshot
from lance_table.udf import BatchUDF


def _open(uri: str, storage_options: Mapping[str, Any] | None) -> Snapshot:
    import lance_table as lt

    snap: Snapshot = lt.dataset(uri, storage_options=storage_options)._snapshot
    versions.check_writable(snap.manifest, snap.uri)
    check_can_commit(snap.commit_options, snap.storage)
    return snap


def _per_fragment(
    spark: Any, job: JobSpec, items: Sequence[Any], work: Callable[[Snapshot, Any], tuple[Any, Sequence[str]]]
) -> Callable[[], list[TaskOutput]]:
    """The launcher of one task per item: ``work(planned version, item)`` on an executor."""

    def task(item: Any) -> TaskOutput:
        return job.run_task(lambda snap: work(snap, item))

    return lambda: run_fragment_tasks(spark, job, items, task)


def update(
    spark: Any,
    uri: str,
    updates: Mapping[str, str],
    where: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Set the columns ``updates`` (``{column: SQL expression}``) of the rows matching ``where``
    (all rows when None), as pylance's ``update``, as a Spark job: one task per fragment writes
    its matching rows with their new values into new fragments and deletes them where they were;
    the driver commits one ``Update``. Returns pylance's ``{"num_rows_updated": n}``.

    Raises:
        TypeError: ``updates`` is not a mapping of strings to strings.
        UpdateError: no columns are given, or a nested field or blob column is named.
        ColumnNotFoundError: a column the dataset does not have.
        FilterError: ``where`` or a value does not compile.
        UnsupportedFormatError: a dataset format lance_table does not write.
        DatasetNotFoundError: there is no dataset at ``uri``.
        CommitConflictError: a concurrent commit makes the update impossible (nothing changes).

    Example:
        ```python
        import lance_table.spark as lts

        lts.update(spark, uri, {"score": "score * 2"}, where="id < 100")  # {'num_rows_updated': 100}
        ```
    """
    snap = _open(uri, storage_options)
    data_format = update_format(snap)
    assignments = compile_assignments(snap, updates)  # (its errors, on the driver)
    make_spec(snap.schema, [], where, False, None, None, None)
    job = new_job(uri, storage_options, snap.version)
    plain = dict(updates)

    def work(s: Snapshot, fid: int) -> tuple[Any, Sequence[str]]:
        done = update_fragment(s, fid, compile_assignments(s, plain), where, data_format, write_tag=job.tag)
        return done, done.written

    def commit(parts: list[Any]) -> dict[str, int]:
        op = Update(
            tuple(i for p in parts for i in p.removed),
            tuple(f for p in parts for f in p.updated),
            tuple(f for p in parts for f in p.new),
            (),
            assignments.field_ids,
            REWRITE_ROWS,
        )
        commit_transaction(job, op)
        return {"num_rows_updated": sum(p.count for p in parts)}

    ids = [f.id for f in snap.manifest.fragments]
    return run_job(job, _per_fragment(spark, job, ids, work), commit)


def delete(
    spark: Any, uri: str, where: str, *, storage_options: Mapping[str, Any] | None = None
) -> dict[str, int]:
    """Delete the rows matching ``where`` (SQL), as pylance's ``delete``, as a Spark job: one task
    per fragment writes the fragment's new deletion file; the driver commits one ``Delete``.
    Returns pylance's ``{"num_deleted_rows": n}``.

    Raises:
        FilterError: ``where`` does not parse.
        DatasetNotFoundError: there is no dataset at ``uri``.
        CommitConflictError: a concurrent commit makes the delete impossible (nothing changes).

    Example:
        ```python
        import lance_table.spark as lts

        lts.delete(spark, uri, "score < 0.1")
        ```
    """
    snap = _open(uri, storage_options)
    make_spec(snap.schema, [], where, False, None, None, None)
    job = new_job(uri, storage_options, snap.version)
    ids = [f.id for f in snap.manifest.fragments]

    def work(s: Snapshot, fid: int) -> tuple[Any, Sequence[str]]:
        old = next(f for f in s.manifest.fragments if f.id == fid)
        frag = delete_in_fragment(s, fid, where, tag=job.tag)
        if frag == old:
            return (fid, old), []
        files = [frag.deletion_file.path(fid)] if frag is not None and frag.deletion_file else []
        return (fid, frag), files

    def commit(parts: list[tuple[int, Fragment | None]]) -> dict[str, int]:
        old = {f.id: f for f in snap.manifest.fragments}
        removed = tuple(fid for fid, frag in parts if frag is None)
        changed = tuple(frag for fid, frag in parts if frag is not None and frag != old[fid])
        deleted = sum(old[fid].num_rows for fid in removed)
        deleted += sum(f.num_deleted - old[f.id].num_deleted for f in changed)
        commit_transaction(job, Delete(changed, removed, where))
        return {"num_deleted_rows": deleted}

    return run_job(job, _per_fragment(spark, job, ids, work), commit)


def compact(
    spark: Any,
    uri: str,
    target_rows_per_fragment: int = DEFAULT_TARGET_ROWS,
    *,
    materialize_deletions: bool = DEFAULT_MATERIALIZE_DELETIONS,
    materialize_deletions_threshold: float = DEFAULT_MATERIALIZE_DELETIONS_THRESHOLD,
    max_bytes_per_file: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> CompactionMetrics:
    """Compact the dataset as ``dataset.optimize.compact_files`` does, as a Spark job: the driver
    plans the groups of fragments as the single-machine compaction does, one task per group
    rewrites it into new fragments, and the driver commits as the single-machine compaction
    does (``ReserveFragments``, then a ``Rewrite`` with the fragment reuse index when indexed
    rows moved). Returns pylance's metrics (zero when there is nothing to compact).

    Raises:
        ValueError: ``target_rows_per_fragment`` is not positive.
        UnsupportedFormatError: a data format or blob columns lance_table does not write.
        DatasetNotFoundError: there is no dataset at ``uri``.
        CommitConflictError: a concurrent delete or compaction touched the same fragments.

    Example:
        ```python
        import lance_table.spark as lts

        metrics = lts.compact(spark, uri, target_rows_per_fragment=1_000_000)
        ```
    """
    snap = _open(uri, storage_options)
    planned = plan_compaction(
        snap,
        target_rows_per_fragment=target_rows_per_fragment,
        materialize_deletions=materialize_deletions,
        materialize_deletions_threshold=materialize_deletions_threshold,
        max_bytes_per_file=max_bytes_per_file,
    )
    if planned is None:
        return CompactionMetrics()
    job = new_job(uri, storage_options, snap.version)
    fmt, limit, stable = planned.data_format, planned.max_bytes, planned.stable

    def work(s: Snapshot, ids: list[int]) -> tuple[Any, Sequence[str]]:
        # what the task needs of the plan (the driver's holds its own fragment readers)
        shipped = CompactionJob(s, [], fmt, limit, stable, False)
        frags, files = rewrite_fragments(shipped, s, ids, job.tag)
        return (frags, files), files

    def commit(parts: list[tuple[list[Fragment], list[str]]]) -> CompactionMetrics:
        files = tuple(f for _, fs in parts for f in fs)
        _, metrics = commit_compaction(planned, [frags for frags, _ in parts], files)
        return metrics

    bins = [[f.fragment.id for f in b.fragments] for b in planned.bins]
    return run_job(job, _per_fragment(spark, job, bins, work), commit)


def add_columns(
    spark: Any,
    uri: str,
    columns: Mapping[str, str] | Callable[[pa.RecordBatch], pa.RecordBatch] | BatchUDF | pa.Schema,
    *,
    read_columns: list[str] | None = None,
    batch_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Add columns, as pylance's ``add_columns``, as a Spark job: ``columns`` is a dict of SQL
    expressions or a function over pyarrow batches (a :func:`lance_table.batch_udf`, or a plain
    function whose output schema is found on a sample, as pylance does; backfilling a column a
    model computes is the common case) reading ``read_columns``. One task per fragment writes the
    new columns' data file; the driver commits one ``Merge``. All-null columns (a pyarrow schema)
    change only the schema and need no tasks.

    Raises:
        SchemaChangeError: a new column's name is taken, or the function returned another number
            of rows or other columns.
        FilterError: a SQL expression does not compile.
        TypeError: ``columns`` is of no kind taken (a reader of aligned rows is not: use the
            dataset's ``add_columns``).
        ValueError: the batch UDF has a checkpoint file (a job's tasks cannot share it).
        DatasetNotFoundError: there is no dataset at ``uri``.
        CommitConflictError: a concurrent commit makes the change impossible (nothing changes).

    Example:
        ```python
        import lance_table.spark as lts

        lts.add_columns(spark, uri, {"double_score": "score * 2"})
        ```
    """
    snap = _open(uri, storage_options)
    transform = normalize(snap, columns, read_columns, None)
    if isinstance(transform, pa.Schema):
        snap.commit(plan_null_columns(snap, transform))
        return
    if isinstance(transform, pa.RecordBatchReader):
        raise InputTypeError(
            "lance_table.spark.add_columns takes SQL expressions or a function over batches, not "
            "rows aligned with the dataset's (use the dataset's add_columns)"
        )
    if isinstance(transform, BatchUDF) and transform.cache is not None:
        raise ValueError("lance_table.spark.add_columns cannot use a batch UDF's checkpoint file")
    job = new_job(uri, storage_options, snap.version)

    def work(s: Snapshot, fid: int) -> tuple[Any, Sequence[str]]:
        frags, fields, written = write_transform(
            s, transform, read_columns, batch_size, [fid], write_tag=job.tag
        )
        return (frags[0], fields, written), written

    def commit(parts: list[Any]) -> None:
        frags = [frag for frag, _, _ in parts]
        fields = parts[0][1] if parts else ()
        written = [path for _, _, files in parts for path in files]
        snap.commit(merge_pending(snap, frags, fields, written))

    ids = [f.id for f in snap.manifest.fragments]
    run_job(job, _per_fragment(spark, job, ids, work), commit)


__all__ = ["add_columns", "compact", "delete", "update"]
