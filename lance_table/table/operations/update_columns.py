"""``LanceFragment.update_columns``: new values for existing columns of one fragment, joined by a
key (``_rowid`` by default), written as a new data file of that fragment; the old files' copies
of those columns are tombstoned. Nothing is committed: the caller commits the fragment with
``LanceOperation.Update(updated_fragments=..., fields_modified=...)``, as with pylance."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_table.errors import SchemaError
from lance_table.file.arrow_take import take
from lance_table.format.manifest import Fragment
from lance_table.table.fragment import FragmentReader
from lance_table.table.operations import schema_add as add
from lance_table.table.operations.check_fragments import TOMBSTONE
from lance_table.table.operations.inputs import coerce_reader
from lance_table.table.snapshot import Snapshot

_SYSTEM = (add.ROW_ID, add.ROW_ADDR)


def _check(ds: Snapshot, right: pa.Schema, left_on: str, right_on: str) -> list[str]:
    """The dataset columns to update, in dataset order.

    Raises:
        SchemaError: a key column is missing; a column to update is a system column, is not in
            the dataset, or has another type there (pylance's messages).
    """
    if left_on not in ds.roots and left_on not in _SYSTEM:
        raise SchemaError(f"Column {left_on} does not exist in the left side fragment")
    if right_on not in right.names:
        raise SchemaError(f"Column {right_on} does not exist in the right side fragment")
    names = [n for n in right.names if n != right_on]
    for name in names:
        if name in _SYSTEM:
            raise SchemaError(f"Column {name} is a reserved metadata column and cannot be updated")
        if name not in ds.roots:
            raise SchemaError(f"Column {name} in right side fragment does not exist in left side fragment")
        have, given = ds.schema.field(name).type, right.field(name).type
        if have != given:
            raise SchemaError(f"Column {name} is {have} in the dataset, not {given}: cannot update it")
    left_type = pa.uint64() if left_on in _SYSTEM else ds.schema.field(left_on).type
    if right.field(right_on).type != left_type:
        raise SchemaError(
            f"Index column type mismatch: expected {left_type}, got {right.field(right_on).type}"
        )
    return [n for n in ds.schema.names if n in names]


def update_fragment_columns(
    ds: Snapshot,
    fragment_id: int,
    data: Any,
    left_on: str = add.ROW_ID,
    right_on: str | None = None,
    schema: pa.Schema | None = None,
) -> tuple[Fragment, list[int], bytes]:
    """The fragment with ``data``'s columns (but the key) replaced where its key ``right_on``
    matches the fragment's ``left_on``; rows without a match keep their values, and of several
    rows with one key the last wins. Returns the fragment, the ids of the fields rewritten and the
    matched physical offsets (a portable Roaring bitmap).

    Raises:
        SchemaError: as :func:`_check`.
        TypeError: ``data`` is of no kind a write takes.
        ValueError: the version has no such fragment.
    """
    right_on = left_on if right_on is None else right_on
    right = coerce_reader(data, schema).read_all()
    names = _check(ds, right.schema, left_on, right_on)
    (frag,) = ds.fragment_readers([fragment_id])
    # last row of a key wins: look keys up in the reversed data (index_in finds the first)
    right = take(right, pa.array(np.arange(right.num_rows - 1, -1, -1, dtype=np.int64)))
    keys = right.column(right_on).combine_chunks()
    values = right.select(names).combine_chunks()
    matched: list[np.ndarray] = []

    def compute(reader: FragmentReader, lo: int, rows: np.ndarray, index: int) -> pa.Table:
        left = add.read_live(reader, [*names, left_on], rows)
        at = pc.index_in(left.column(left_on), value_set=keys, skip_nulls=True).to_numpy(zero_copy_only=False)
        hit = ~np.isnan(at) if at.dtype.kind == "f" else np.ones(at.size, bool)
        if not hit.any():
            return left.select(names)
        live = np.zeros(rows.size, bool)
        live[np.searchsorted(rows, reader.live_positions(int(rows[0]), int(rows[-1]) + 1))] = True
        hit &= live  # deleted rows keep their values
        matched.append(rows[hit])
        # pick from [left values..., right values...]: a take works for every type
        pick = np.arange(rows.size, dtype=np.int64)
        pick[hit] = rows.size + at[hit].astype(np.int64)
        columns = [
            take(
                pa.concat_arrays([left.column(n).combine_chunks(), values.column(n).combine_chunks()]),
                pa.array(pick),
            )
            for n in names
        ]
        return pa.Table.from_arrays(columns, schema=values.schema)

    fields = [node.field for n in names for node in ds.roots[n].walk()]
    write_schema = pa.schema([ds.schema.field(n) for n in names])
    frags, _, written = add.write_columns(
        ds,
        write_schema,
        compute,
        add.SQL_CHUNK_ROWS,
        [fragment_id],
        parallel=False,
        live_only=False,
        fields=fields,
    )
    new = frags[0]
    if len(new.files) == len(frag.fragment.files):  # (a fragment without rows)
        return new, [], BitMap().serialize()
    rewritten = set(new.files[-1].fields)
    old = [
        replace(d, fields=tuple(TOMBSTONE if i in rewritten else i for i in d.fields)) for d in new.files[:-1]
    ]
    kept = [d for d in old if any(i != TOMBSTONE for i in d.fields)]
    offsets = np.concatenate(matched) if matched else np.zeros(0, np.int64)
    bitmap = BitMap(offsets.astype(np.uint32))
    del written  # the caller's commit references them; an uncommitted file goes with cleanup
    return (
        replace(new, files=(*kept, new.files[-1])),
        sorted(i for i in rewritten if i >= 0),
        bitmap.serialize(),
    )
