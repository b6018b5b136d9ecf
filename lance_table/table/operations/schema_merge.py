"""``merge``: new columns joined onto every fragment of a dataset by a key column, as pylance's
``LanceDataset.merge`` and ``LanceFragment.merge`` write them (see :mod:`schema_add`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import SchemaChangeError
from lance_table.file.arrow_take import take
from lance_table.format.manifest import Fragment
from lance_table.schema import LanceField
from lance_table.table.commit import Pending
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations.schema_add import (
    ROW_ADDR,
    ROW_ID,
    SQL_CHUNK_ROWS,
    Compute,
    ComputeMany,
    check_new_names,
    merge_pending,
    read_live,
    read_live_many,
    write_columns,
)
from lance_table.table.snapshot import Snapshot


def plan_merge(ds: Snapshot, data: pa.RecordBatchReader, left_on: str, right_on: str) -> Pending:
    """A left join of ``data``'s columns (but ``right_on``) onto the dataset by key; rows without a
    match get nulls, and of several source rows with one key the last wins (as in pylance).

    Raises:
        SchemaChangeError: a key column is missing, or a new column's name is taken.
    """
    schema, compute, many = merge_compute(ds, data, left_on, right_on)
    frags, fields, written = write_columns(
        ds, schema, compute, SQL_CHUNK_ROWS, live_only=False, compute_many=many
    )
    return merge_pending(ds, frags, fields, written)


def merge_fragment(
    ds: Snapshot, fragment_id: int, data: pa.RecordBatchReader, left_on: str, right_on: str
) -> tuple[Fragment, tuple[LanceField, ...]]:
    """:func:`plan_merge` of one fragment (``left_on`` may be ``_rowid`` or ``_rowaddr``): the
    fragment with the new columns in a new data file, and the schema (old and new fields) for a
    ``LanceOperation.Merge`` commit; nothing is committed.

    Raises:
        SchemaChangeError: as :func:`plan_merge`.
    """
    schema, compute, _ = merge_compute(ds, data, left_on, right_on)
    frags, fields, _ = write_columns(ds, schema, compute, SQL_CHUNK_ROWS, [fragment_id], live_only=False)
    return frags[0], ds.manifest.fields + fields


def merge_compute(
    ds: Snapshot, data: pa.RecordBatchReader, left_on: str, right_on: str
) -> tuple[pa.Schema, Compute, ComputeMany]:
    """The new columns of a merge by key and how to compute them (per fragment, and of a group
    of small fragments).

    Raises:
        SchemaChangeError: a key column is missing, or a new column's name is taken.
    """
    right = data.read_all()
    if left_on not in ds.schema.names and left_on not in (ROW_ID, ROW_ADDR):
        raise SchemaChangeError(f"Column {left_on} does not exist in the left side (the dataset)")
    if right_on not in right.schema.names:
        raise SchemaChangeError(f"Column {right_on} does not exist in the right side (the data)")
    new_names = [n for n in right.schema.names if n != right_on]
    check_new_names(ds, new_names)
    # last row of a key wins: look keys up in the reversed source (index_in finds the first)
    right = take(right, pa.array(np.arange(right.num_rows - 1, -1, -1, dtype=np.int64)))
    keys = right.column(right_on).combine_chunks()
    key_type = pa.uint64() if left_on in (ROW_ID, ROW_ADDR) else ds.schema.field(left_on).type
    if keys.type != key_type:
        keys = keys.cast(key_type)
    values = right.select(new_names).combine_chunks()

    def joined(left: pa.ChunkedArray) -> pa.Table:
        return take(values, pc.index_in(left.combine_chunks(), value_set=keys, skip_nulls=True))

    def compute(frag: FragmentReader, lo: int, live: np.ndarray, index: int) -> pa.Table:
        return joined(read_live(frag, [left_on], live).column(0))

    def compute_many(frags: Sequence[FragmentReader], lives: Sequence[np.ndarray]) -> pa.Table:
        return joined(read_live_many(frags, [left_on], lives).column(0))

    return values.schema, compute, compute_many
