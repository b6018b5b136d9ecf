"""Scans: stream the rows of a dataset version, with projection, filter, offset/limit and row ids.

A filtered scan reads only the columns the predicate needs to decide which rows match, then
fetches the projected columns of the matching rows alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.table.fragment import FragmentReader
from lance_table.errors import SchemaError
from lance_table.file.runs import Runs

ROW_ID = "_rowid"
DEFAULT_BATCH_SIZE = 8192
# Rows read from a fragment at a time; output batches are sliced from these.
READ_CHUNK_ROWS = 256 * 1024
_POS = "__lance_table_position"

Predicate = str | pc.Expression


@dataclass
class ScanSpec:
    columns: list[str]
    filter: pc.Expression | None
    filter_columns: list[str]
    with_row_id: bool
    batch_size: int
    offset: int
    limit: int | None


def make_spec(
    schema: pa.Schema,
    columns: Sequence[str] | None,
    filter: Predicate | None,
    with_row_id: bool,
    batch_size: int | None,
    offset: int | None,
    limit: int | None,
) -> ScanSpec:
    """Validate scan options against the schema.

    Raises:
        SchemaError: an unknown column.
        FilterError: the predicate does not parse.
        ValueError: a negative offset, limit or batch size.
    """
    names = schema.names
    if columns is None:
        cols = list(names)
    else:
        if isinstance(columns, str):
            raise TypeError("columns must be a list of column names")
        cols = list(columns)
        for c in cols:
            if c not in names:
                raise SchemaError(f"column {c!r} is not in the dataset; columns are {names}")
    expr = None
    fcols: list[str] = []
    if filter is not None:
        from lance_table.filters import filter_columns, parse_filter

        expr = parse_filter(filter, schema)
        fcols = filter_columns(filter, schema)
    if (offset or 0) < 0 or (limit is not None and limit < 0):
        raise ValueError("offset and limit must not be negative")
    size = batch_size or DEFAULT_BATCH_SIZE
    if size <= 0:
        raise ValueError("batch_size must be positive")
    return ScanSpec(cols, expr, fcols, with_row_id, size, offset or 0, limit)


def output_schema(schema: pa.Schema, spec: ScanSpec) -> pa.Schema:
    fields = [schema.field(c) for c in spec.columns]
    if spec.with_row_id:
        fields.append(pa.field(ROW_ID, pa.uint64()))
    return pa.schema(fields, metadata=schema.metadata)


def matching_positions(frag: FragmentReader, spec: ScanSpec, lo: int, hi: int) -> Runs:
    """Live rows of ``[lo, hi)`` that pass the filter (all live rows without a filter)."""
    live = frag.live_runs(lo, hi)
    if spec.filter is None or not live.total:
        return live
    table = frag.read(spec.filter_columns, live) if spec.filter_columns else pa.table({})
    positions = pa.array(live.positions())
    table = table.append_column(_POS, positions) if table.num_columns else pa.table({_POS: positions})
    kept = table.filter(spec.filter).column(_POS).to_numpy()
    return Runs.from_sorted_unique(kept)


def scan_fragment(frag: FragmentReader, spec: ScanSpec, out_schema: pa.Schema) -> Iterator[pa.Table]:
    """Tables of matching rows of one fragment, ``READ_CHUNK_ROWS`` physical rows at a time."""
    step = max(READ_CHUNK_ROWS, spec.batch_size)
    for lo in range(0, frag.physical_rows, step):
        hi = min(lo + step, frag.physical_rows)
        runs = matching_positions(frag, spec, lo, hi)
        if not runs.total:
            continue
        table = frag.read(spec.columns, runs) if spec.columns else _empty_rows(runs.total)
        if spec.with_row_id:
            row_ids = (np.uint64(frag.fragment.id) << np.uint64(32)) | runs.positions().astype(np.uint64)
            table = table.append_column(pa.field(ROW_ID, pa.uint64()), pa.array(row_ids, pa.uint64()))
        yield pa.Table.from_arrays(table.columns, schema=out_schema)


def _empty_rows(n: int) -> pa.Table:
    """A table with ``n`` rows and no columns."""
    return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])


def scan(frags: Sequence[FragmentReader], spec: ScanSpec, out_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Batches of at most ``spec.batch_size`` rows, honouring offset and limit."""
    skip = spec.offset
    remaining = spec.limit
    if remaining == 0:
        return
    for frag in frags:
        for table in scan_fragment(frag, spec, out_schema):
            if skip:
                if skip >= table.num_rows:
                    skip -= table.num_rows
                    continue
                table = table.slice(skip)
                skip = 0
            if remaining is not None:
                table = table.slice(0, remaining)
                remaining -= table.num_rows
            for batch in table.combine_chunks().to_batches(max_chunksize=spec.batch_size):
                if batch.num_rows:
                    yield batch
            if remaining == 0:
                return


def count_matching(frags: Sequence[FragmentReader], spec: ScanSpec) -> int:
    total = 0
    for frag in frags:
        if spec.filter is None:
            total += frag.physical_rows - int(frag.deleted.size)
            continue
        for lo in range(0, frag.physical_rows, READ_CHUNK_ROWS):
            total += matching_positions(frag, spec, lo, min(lo + READ_CHUNK_ROWS, frag.physical_rows)).total
    return total
