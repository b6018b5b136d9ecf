"""``add_columns`` and ``LanceFragment.merge_columns``: what kind of transform was given (SQL
expressions, a batch UDF, a plain function, new data aligned by row, or all-null fields) and the
plan that writes it, as pylance's ``normalize_transform`` and ``add_columns`` decide."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_table.errors import InputTypeError
from lance_table.format.manifest import Fragment
from lance_table.schema import LanceField
from lance_table.table.commit import Pending
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations import schema_add as add
from lance_table.table.operations.inputs import coerce_reader
from lance_table.table.progress import SILENT, Progress, Reporter, reporter
from lance_table.table.snapshot import Snapshot
from lance_table.udf import BatchUDF, BatchUDFCheckpoint, _as_batch


def split_read_columns(read_columns: Sequence[str] | None) -> tuple[list[str] | None, list[str]]:
    """Data columns (None: all) and the system columns (``_rowid``, ``_rowaddr``) asked for."""
    if read_columns is None:
        return None, []
    data = [c for c in read_columns if c not in (add.ROW_ID, add.ROW_ADDR)]
    system = [c for c in (add.ROW_ID, add.ROW_ADDR) if c in read_columns]
    return data, system


def _sample(
    ds: Snapshot, read_columns: Sequence[str] | None, fragment_ids: Sequence[int] | None
) -> pa.RecordBatch:
    """The first live row, with the columns a UDF reads (to learn its output schema)."""
    data, system = split_read_columns(read_columns)
    names = list(ds.schema.names) if data is None else data
    for frag in ds.fragment_readers(fragment_ids):
        live = frag.live_positions(0, min(frag.physical_rows, add.DEFAULT_UDF_BATCH_ROWS))[:1]
        if live.size:
            return add.read_live(frag, names + system, live).to_batches()[0]
    raise ValueError("the dataset has no rows to learn the UDF's output schema from")


def normalize(
    ds: Snapshot,
    transforms: Any,
    read_columns: Sequence[str] | None,
    reader_schema: pa.Schema | None,
    fragment_ids: Sequence[int] | None = None,
) -> dict[str, str] | BatchUDF | pa.RecordBatchReader | pa.Schema:
    """The transform as one of the kinds ``add_columns`` writes.

    Raises:
        TypeError: SQL names or expressions are not strings; a function fails on a sample batch;
            the value is none of the kinds taken (an InputTypeError).
    """
    if isinstance(transforms, pa.Field):
        transforms = [transforms]
    if isinstance(transforms, list) and transforms and isinstance(transforms[0], pa.Field):
        transforms = pa.schema(transforms)
    if isinstance(transforms, pa.Schema):
        return transforms
    if isinstance(transforms, BatchUDF):
        if transforms.output_schema is None:
            transforms.output_schema = _as_batch(transforms(_sample(ds, read_columns, fragment_ids))).schema
        return transforms
    if isinstance(transforms, dict):
        for k, v in transforms.items():
            if not isinstance(k, str):
                raise TypeError(f"Column names must be a string. Got {type(k)}")
            if not isinstance(v, str):
                raise TypeError(f"Column expressions must be a string. Got {type(v)}")
        return transforms
    if callable(transforms):
        try:
            schema = _as_batch(transforms(_sample(ds, read_columns, fragment_ids))).schema
        except Exception as exc:
            raise InputTypeError(
                "transforms must be a BatchUDF, dict, map function, or ReaderLike value.  Received "
                f"{type(transforms)}, which is callable, but gave an error when called with a batch "
                f"of data: {exc}"
            ) from exc
        return BatchUDF(transforms, output_schema=schema)
    try:
        return coerce_reader(transforms, reader_schema)
    except TypeError as exc:
        raise InputTypeError(
            "transforms must be a BatchUDF, dict, map function, or ReaderLike value.  "
            f"Received {type(transforms)}.  Could not coerce to a reader: {exc}"
        ) from exc


def udf_compute(
    ds: Snapshot, udf: BatchUDF, read_columns: Sequence[str] | None
) -> tuple[pa.Schema, add.Compute, add.ComputeMany]:
    """The UDF's output schema and how to compute a batch (from its checkpoint when saved there),
    and the batches of a group of small fragments (their inputs read at once, the UDF called
    with each fragment's rows as its batch 0, as it is called fragment by fragment)."""
    schema = udf.output_schema
    assert schema is not None
    add.check_new_names(ds, schema.names)
    data, system = split_read_columns(read_columns)
    names = (list(ds.schema.names) if data is None else data) + system
    cache = udf.cache

    def saved(frag: FragmentReader, index: int) -> pa.Table | None:
        if cache is None:
            return None
        batch = cache.get_batch(BatchUDFCheckpoint.BatchInfo(frag.fragment.id, index))
        return None if batch is None else pa.Table.from_batches([batch])

    def call(frag: FragmentReader, index: int, batch: pa.Table) -> pa.Table:
        batch = batch.combine_chunks()
        result = udf._call(
            batch.to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist([], schema=batch.schema)
        )
        if cache is not None:
            cache.insert_batch(BatchUDFCheckpoint.BatchInfo(frag.fragment.id, index), result)
        return pa.Table.from_batches([result])

    def compute(frag: FragmentReader, lo: int, live: np.ndarray, index: int) -> pa.Table:
        found = saved(frag, index)
        return found if found is not None else call(frag, index, add.read_live(frag, names, live))

    def compute_many(frags: Sequence[FragmentReader], lives: Sequence[np.ndarray]) -> pa.Table:
        found = [saved(f, 0) for f in frags]
        todo = [k for k, hit in enumerate(found) if hit is None]
        if todo:
            inputs = add.read_live_many([frags[k] for k in todo], names, [lives[k] for k in todo])
            at = 0
            for k in todo:
                found[k] = call(frags[k], 0, inputs.slice(at, lives[k].size))
                at += lives[k].size
        # each fragment's batch checked on its own (a wrong count names its fragment)
        parts = []
        for table, frag, live in zip(found, frags, lives):
            assert table is not None
            parts.append(add.checked(table, schema, live.size, frag.fragment.id))
        return pa.concat_tables(parts)

    return schema, compute, compute_many


def write_transform(
    ds: Snapshot,
    transform: dict[str, str] | BatchUDF | pa.RecordBatchReader,
    read_columns: Sequence[str] | None,
    batch_size: int | None,
    fragment_ids: Sequence[int] | None = None,
    report: Reporter = SILENT,
    write_tag: str = "",
) -> tuple[list[Fragment], tuple[LanceField, ...], list[str]]:
    """Write the new columns of a transform into new data files of the fragments (named with
    ``write_tag``; ``report`` hears of the rows and files written)."""
    if isinstance(transform, pa.RecordBatchReader):
        schema, compute, done = add.reader_compute(transform)
        add.check_new_names(ds, schema.names)
        rows = batch_size or add.SQL_CHUNK_ROWS
        out = add.write_columns(
            ds,
            schema,
            compute,
            rows,
            fragment_ids,
            parallel=False,
            report=report,
            compute_many=lambda frags, lives: compute(frags[0], 0, np.concatenate(lives), 0),
        )
        try:
            done()
        except BaseException:
            for path in out[2]:
                with contextlib.suppress(OSError):
                    ds.storage.delete(path)
            raise
        return out
    if isinstance(transform, dict):
        schema, compute, many = add.sql_compute(ds, transform)
        rows = batch_size or add.SQL_CHUNK_ROWS
        return add.write_columns(
            ds,
            schema,
            compute,
            rows,
            fragment_ids,
            live_only=False,
            report=report,
            write_tag=write_tag,
            compute_many=many,
        )
    schema, compute, many = udf_compute(ds, transform, read_columns)
    # a UDF is called batch after batch, fragment after fragment, as pylance calls it
    # (legacy datasets: batch_size is ignored, as pylance ignores it)
    legacy = add.writable_data_format(ds.manifest, ds.uri) == add.LEGACY_FORMAT
    rows = add.DEFAULT_UDF_BATCH_ROWS if legacy or batch_size is None else batch_size
    return add.write_columns(
        ds,
        schema,
        compute,
        rows,
        fragment_ids,
        parallel=False,
        report=report,
        write_tag=write_tag,
        compute_many=many,
    )


def plan_add_columns(
    ds: Snapshot,
    transforms: Any,
    read_columns: Sequence[str] | None = None,
    reader_schema: pa.Schema | None = None,
    batch_size: int | None = None,
    progress: Progress = None,
) -> tuple[Pending, BatchUDF | None]:
    """The Merge adding the columns ``transforms`` describes (files written), and the UDF whose
    checkpoint to remove once it is committed. ``progress``: see :mod:`lance_table.table.progress`
    (all-null columns write nothing and report nothing).

    Raises:
        SchemaChangeError: a new column's name is taken; the aligned data has another row count.
        FilterError: a SQL expression does not compile.
        TypeError: the transform is of no kind taken (InputTypeError also for ``progress``).
        UnsupportedFormatError: all-null columns on a legacy dataset.
    """
    report = reporter("add_columns", progress)
    transform = normalize(ds, transforms, read_columns, reader_schema)
    if isinstance(transform, pa.Schema):
        return add.plan_null_columns(ds, transform), None
    if isinstance(transform, dict) and (nulls := add.null_cast_schema(ds, transform)) is not None:
        return add.plan_null_columns(ds, nulls), None
    with report:
        frags, fields, written = write_transform(ds, transform, read_columns, batch_size, report=report)
    return add.merge_pending(ds, frags, fields, written), transform if isinstance(
        transform, BatchUDF
    ) else None


def merge_fragment_columns(
    ds: Snapshot,
    fragment_id: int,
    value_func: Any,
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    reader_schema: pa.Schema | None = None,
) -> tuple[Fragment, tuple[LanceField, ...]]:
    """One fragment with the new columns in a new data file, and the schema (old and new fields)
    for a ``LanceOperation.Merge`` commit; nothing is committed.

    Raises:
        ValueError: the UDF has a checkpoint file (pylance refuses it here too).
        As :func:`plan_add_columns` otherwise.
    """
    transform = normalize(ds, value_func, columns, reader_schema, [fragment_id])
    if isinstance(transform, BatchUDF) and transform.cache is not None:
        raise ValueError(
            "A checkpoint file cannot be used when applying a UDF with LanceFragment.merge_columns.  "
            "You must apply your own checkpointing for fragment-level operations."
        )
    if isinstance(transform, pa.Schema):
        raise InputTypeError("LanceFragment.merge_columns does not add all-null columns: use add_columns")
    frags, fields, _ = write_transform(ds, transform, columns, batch_size, [fragment_id])
    return frags[0], ds.manifest.fields + fields
