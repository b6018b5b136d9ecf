"""Takes: rows of a dataset version by position among its live rows, or by physical position in
its fragments, read through the batched reads of :mod:`lance_table.table.scan_groups`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lance_table._numpy import sorted_unique
from lance_table._parallel import map_grouped, map_groups
from lance_table.file.arrow_take import take
from lance_table.file.runs import Runs
from lance_table.table.fragment import FragmentReader
from lance_table.table.fragment_readers import FragmentReaders
from lance_table.table.scan import ROW_READS, ScanPlan, empty_rows, in_flight
from lance_table.table.scan_groups import take_batch


def take_rows(
    frags: Sequence[FragmentReader], spec: ScanPlan, out_schema: pa.Schema, indices: np.ndarray
) -> pa.Table:
    """Rows by position among the live rows of ``frags``, in the order of ``indices``.

    Raises:
        IndexError: an index is outside ``[0, live rows)``.
    """
    if isinstance(frags, FragmentReaders):  # only the fragments holding rows asked for get a reader
        live_counts = frags.live_counts()
    else:
        live_counts = np.array([f.fragment.num_rows for f in frags], np.int64)
    total = int(live_counts.sum())
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= total):
        raise IndexError(f"row index out of range for {total} rows")
    starts = np.concatenate([[0], np.cumsum(live_counts)])
    which = np.searchsorted(starts, indices, side="right") - 1
    local = indices - starts[which]
    physical = local.copy()
    touched = sorted_unique(which).tolist()
    # only fragments with deleted rows map live positions; their deletions (and the footers that
    # check them) are read at once, not one fragment's requests after another's
    with_deletions = [k for k in touched if frags[k].fragment.deletion_file is not None]
    map_grouped(
        lambda k: frags[k].deleted, with_deletions, [1] * len(with_deletions), in_flight=in_flight(frags)
    )
    for k in with_deletions:
        if frags[k].deleted.size:
            at = which == k
            physical[at] = frags[k].live_positions()[local[at]]
    return read_positions(frags, spec, out_schema, which, physical)


def read_positions(
    frags: Sequence[FragmentReader],
    spec: ScanPlan,
    out_schema: pa.Schema,
    which: np.ndarray,
    positions: np.ndarray,
) -> pa.Table:
    """The rows at physical ``positions`` of the fragments ``frags[which]``, in that order.

    Each fragment reads only the rows asked of it, once however often they are asked.
    """
    if not out_schema.names:
        return empty_rows(int(which.size))
    key = (which.astype(np.int64) << 32) | positions.astype(np.int64)
    unique, inverse = np.unique(key, return_inverse=True)
    owner, offsets = unique >> 32, unique & 0xFFFFFFFF
    touched = sorted_unique(owner).tolist()

    runs_of = dict(zip(touched, Runs.by_owner(owner, offsets, touched)))  # ``owner`` is sorted

    def read(group: list[int]) -> list[pa.Table]:
        runs = [runs_of[k] for k in group]
        return [
            take_batch([frags[k] for k in group], runs, spec, out_schema, ROW_READS)
        ]  # small ones batched

    parts = map_groups(read, touched, [1] * len(touched), in_flight=in_flight(frags))
    result = pa.concat_tables(parts) if parts else out_schema.empty_table()
    return take(result, pa.array(inverse.reshape(-1)))


__all__ = ["read_positions", "take_rows"]
