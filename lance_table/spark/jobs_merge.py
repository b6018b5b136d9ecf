"""merge_insert as a Spark job: the key match is a Spark join, the rewrite runs in Spark tasks.

The target's key columns and row addresses are read through the ``lance_table`` source at the
planned version and left-joined to the source DataFrame on the keys (``=``: null keys never match,
as in pylance). The joined rows that matter (matched rows, and source rows to insert) are
shuffled so that one task gets all matched rows of a target fragment, sorted by position, and
source rows to insert are spread over the tasks by a hash of their values. Each task merges its
fragments with the single-machine code (:func:`~lance_table.table.operations.merge_plan.merge_fragment`:
updated rows into new data files, a new deletion file for the fragment) and writes its rows to
insert into new fragments. With ``when_not_matched_by_source="delete"`` every target fragment
gets a task (a marker row per fragment joins the shuffle), which deletes its rows no source row
matched. The driver commits the tasks' fragments as one ``Update`` on the planned version.
"""

from __future__ import annotations

import functools
import json
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import MergeInsertError, MergeSourceError, UnsupportedOperationError
from lance_table.file.arrow_take import filter_rows, take
from lance_table.file.fields import BLOB_KEY
from lance_table.file.v2_1.blob_v2 import has_blob_v2
from lance_table.format.manifest import Fragment
from lance_table.format.operations import REWRITE_ROWS, Update
from lance_table.spark.jobs import JobSpec, TaskOutput, commit_transaction, new_job, run_job
from lance_table.spark.types import cast_batch
from lance_table.spark.write import _plain_types
from lance_table.table.operations.merge_insert import join_keys
from lance_table.table.operations.merge_plan import (
    UPDATE,
    WRITE_BATCH_ROWS,
    MergeOutput,
    MergeSpec,
    MergeStats,
    full_rows,
    merge_fragment,
)
from lance_table.table.snapshot import Snapshot

WHEN_MATCHED = ("update_all", "do_nothing")
WHEN_NOT_MATCHED = ("insert_all", "do_nothing")
WHEN_NOT_MATCHED_BY_SOURCE = ("keep", "delete")

# Columns the job adds to the joined rows (prefixed so as not to meet the source's).
ADDR = "__lt_rowaddr"
PART = "__lt_part"
POS = "__lt_pos"
MARK = "__lt_marker"
# Partition keys of rows to insert start here (fragment ids are below 2**32).
INSERT_BASE = 1 << 40
_POSITION_MASK = (1 << 32) - 1


@dataclass
class MergePart:
    """One task's share of the merge: fragments written, removed, given deletion files; counts."""

    new: list[Fragment] = field(default_factory=list)
    inserted: list[Fragment] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    updated: list[Fragment] = field(default_factory=list)
    stats: MergeStats = field(default_factory=MergeStats)


def merge_insert(
    df: Any,
    uri: str,
    on: str | Iterable[str],
    *,
    when_matched: str = "update_all",
    when_not_matched: str = "insert_all",
    when_not_matched_by_source: str = "keep",
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Merge the rows of the Spark DataFrame ``df`` into the dataset at ``uri`` on the key columns
    ``on``, as pylance's ``merge_insert(on)`` with the chosen clauses, as one Spark job: the key
    match is a Spark join and the rewrite runs in Spark tasks, so no machine holds the whole
    source or target. The driver commits once (an ``Update`` on the version the job read).

    Returns pylance's counts: ``num_inserted_rows``, ``num_updated_rows``, ``num_deleted_rows``.

    Raises:
        ValueError: a clause value that is not one of the choices (naming the choices).
        MergeInsertError: no key columns, a key the dataset lacks, or clauses that change nothing.
        MergeSourceError: ``df`` has a column the dataset lacks or lacks a key column; several
            source rows match one target row (when matched rows are updated).
        SchemaError: a source column's values do not fit the dataset column's type.
        UnsupportedOperationError: the dataset has blob columns.
        DatasetNotFoundError: there is no dataset at ``uri``.
        CommitConflictError: a concurrent commit makes the merge impossible (nothing changes).

    Example:
        ```python
        import lance_table.spark as lts

        rows = [(1, 0.5, "buy"), (5000, 0.1, "view")]
        updates = spark.createDataFrame(rows, "id long, score double, kind string")
        counts = lts.merge_insert(updates, uri, "id")  # {'num_inserted_rows': 1, 'num_updated_rows': 1, ...}
        ```
    """
    import lance_table as lt

    for name, value, choices in (
        ("when_matched", when_matched, WHEN_MATCHED),
        ("when_not_matched", when_not_matched, WHEN_NOT_MATCHED),
        ("when_not_matched_by_source", when_not_matched_by_source, WHEN_NOT_MATCHED_BY_SOURCE),
    ):
        if value not in choices:
            raise ValueError(f"{name} must be one of {choices}, not {value!r}")
    snap = lt.dataset(uri, storage_options=storage_options)._snapshot
    keys = join_keys(snap, on)
    spec = MergeSpec(
        keys,
        matched=UPDATE if when_matched == "update_all" else None,
        insert=when_not_matched == "insert_all",
        by_source_delete=when_not_matched_by_source == "delete",
    )
    if spec.matched is None and not spec.insert and not spec.by_source_delete:
        raise MergeInsertError("the merge insert job is not configured to change the data in any way")
    fields = snap.manifest.fields
    if has_blob_v2(fields) or any(BLOB_KEY in (f.metadata or {}) for f in fields):
        raise UnsupportedOperationError("merge_insert on a dataset with blob columns is not supported")
    names = list(df.columns)
    extra = [n for n in names if n not in snap.schema.names]
    missing = [k for k in keys if k not in names]
    if extra or missing:
        raise MergeSourceError(
            f"{uri}: the merge_insert source's fields do not match the dataset's: "
            f"unexpected={extra}, missing join keys={missing}"
        )
    job = new_job(uri, storage_options, snap.version)
    source_schema = pa.schema([snap.read_schema.field(n) for n in names])
    shuffled = _plan(df, job, snap, spec, names)
    ids = [f.id for f in snap.manifest.fields]

    def launch() -> list[TaskOutput]:
        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            out = job.run_task(lambda s: _merge_partition(s, job.tag, spec, source_schema, batches))
            yield pa.RecordBatch.from_pydict({"out": [pickle.dumps(out)]}, pa.schema([("out", pa.binary())]))

        rows = shuffled.mapInArrow(task, "out binary").collect()
        return [pickle.loads(bytes(r.out)) for r in rows]

    def commit(parts: list[MergePart]) -> dict[str, int]:
        stats = MergeStats()
        for p in parts:
            stats.inserted += p.stats.inserted
            stats.updated += p.stats.updated
            stats.deleted += p.stats.deleted
        op = Update(
            tuple(sorted(i for p in parts for i in p.removed)),
            tuple(f for p in parts for f in p.updated),
            # updated rows first, as the single-machine merge writes them
            tuple(f for p in parts for f in p.new) + tuple(f for p in parts for f in p.inserted),
            fields_modified=(),
            fields_for_preserving_frag_bitmap=tuple(ids),
            update_mode=REWRITE_ROWS,
        )
        commit_transaction(job, op)
        return stats.as_dict()

    return run_job(job, launch, commit)


def _plan(df: Any, job: JobSpec, snap: Snapshot, spec: MergeSpec, names: Sequence[str]) -> Any:
    """The joined rows each task gets: partitioned by target fragment (or insert bucket) and
    sorted by position within it."""
    from pyspark.sql import functions as F

    spark = df.sparkSession
    reader = (
        spark.read.format("lance_table")
        .option("version", str(job.version))
        .option("columns", ",".join([*spec.on, "_rowaddr"]))
    )
    if job.storage_options:
        reader = reader.option("storage_options", json.dumps(job.storage_options))
    target = reader.load(job.uri)
    tkeys = [f"__lt_key{i}" for i in range(len(spec.on))]
    target = target.select(
        *[F.col(k).alias(t) for k, t in zip(spec.on, tkeys)], F.col("_rowaddr").alias(ADDR)
    )
    cond = [df[k] == target[t] for k, t in zip(spec.on, tkeys)]
    joined = df.join(target, cond, "left")
    matched = F.col(ADDR).isNotNull()
    wanted = F.lit(False)
    if spec.matched is not None or spec.by_source_delete:
        wanted = wanted | matched
    if spec.insert:
        wanted = wanted | ~matched
    parts = max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))
    bucket = F.pmod(F.xxhash64(*[F.col(n) for n in names]), F.lit(parts)) + F.lit(INSERT_BASE)
    rows = joined.filter(wanted).select(
        *[F.col(n) for n in names],
        F.col(ADDR),
        F.when(matched, F.shiftright(F.col(ADDR), 32)).otherwise(bucket).alias(PART),
        (F.col(ADDR).bitwiseAND(F.lit(_POSITION_MASK))).alias(POS),
        F.lit(False).alias(MARK),
    )
    if spec.by_source_delete:  # every fragment gets a task: one marker row each
        ids = [(f.id,) for f in snap.manifest.fragments]
        markers = spark.createDataFrame(ids, f"{PART} long").select(
            *[F.lit(None).cast(df.schema[n].dataType).alias(n) for n in names],
            F.lit(None).cast("long").alias(ADDR),
            F.col(PART),
            F.lit(None).cast("long").alias(POS),
            F.lit(True).alias(MARK),
        )
        rows = rows.unionByName(markers)
    return rows.repartition(parts, F.col(PART)).sortWithinPartitions(PART, POS)


def _groups(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.Table]]:
    """Consecutive rows with the same partition key, as (key, rows); rows to insert come in
    pieces (they need no grouping), a fragment's rows in one table."""
    pending: list[pa.RecordBatch] = []
    current: int | None = None
    for batch in batches:
        if not batch.num_rows:
            continue
        part = batch.column(PART).to_numpy()
        cuts = np.flatnonzero(part[1:] != part[:-1]) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(part)]):
            key = int(part[lo])
            piece = batch.slice(lo, hi - lo)
            if key != current and pending:
                assert current is not None
                yield current, pa.Table.from_batches(pending)
                pending = []
            current = key
            if key >= INSERT_BASE:
                yield key, pa.Table.from_batches([piece])
            else:
                pending.append(piece)
    if pending:
        assert current is not None
        yield current, pa.Table.from_batches(pending)


def _source_rows(rows: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """The source columns of ``rows`` (marker rows dropped), with the dataset's types."""
    rows = filter_rows(rows, pc.invert(rows.column(MARK)))
    target = _plain_types(schema)
    batches = [cast_batch(b, target, where) for b in rows.select(schema.names).to_batches()]
    return pa.Table.from_batches(batches, target).cast(schema)


def _take(table: pa.Table, indices: np.ndarray) -> pa.Table:
    return take(table, pa.array(indices, pa.int64()))


def _merge_partition(
    snap: Snapshot, tag: str, spec: MergeSpec, schema: pa.Schema, batches: Iterator[pa.RecordBatch]
) -> tuple[MergePart, list[str]]:
    """Merge one task's rows; what it did and the files it wrote (deleted again if it raises)."""
    part = MergePart()
    updates = MergeOutput(snap, None, write_tag=tag)
    inserts = MergeOutput(snap, None, write_tag=tag)
    written: list[str] = []
    try:
        for key, rows in _groups(batches):
            where = f"merging into {snap.uri}"
            if key >= INSERT_BASE:
                source = _source_rows(rows, schema, where)
                for lo in range(0, source.num_rows, WRITE_BATCH_ROWS):
                    inserts.write(full_rows(inserts.schema, source.slice(lo, WRITE_BATCH_ROWS), None))
                part.stats.inserted += source.num_rows
                continue
            live = filter_rows(rows, pc.invert(rows.column(MARK)))
            pos = live.column(POS).to_numpy().astype(np.int64)
            source = _source_rows(rows, schema, where)
            (frag,) = snap.fragment_readers([key])
            change = merge_fragment(
                snap,
                spec,
                frag,
                pos,
                np.arange(pos.size, dtype=np.int64),
                functools.partial(_take, source),
                schema.names,
                updates,
                part.stats,
                tag=tag,
            )
            if change.removed is not None:
                part.removed.append(change.removed)
            if change.updated is not None and change.written is not None:
                part.updated.append(change.updated)
                written.append(change.written)
        part.new = updates.finish()
        part.inserted = inserts.finish()
    except BaseException:
        updates.writer.abort()
        inserts.writer.abort()
        for path in written:
            snap.storage.delete(path)
        raise
    return part, [*written, *updates.writer.paths, *inserts.writer.paths]
