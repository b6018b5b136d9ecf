"""Filtered reads of a filter that only bounds one integer column (``id = 5``,
``id >= 10 AND id < 20``): its rows are found from the column's packed values
(:meth:`FragmentReader.rows_in_interval`), so no predicate column is decoded, and only the
projection is read."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lance_table.file.arrow_take import filter_rows
from lance_table.file.runs import Runs
from lance_table.table.fragment import FragmentReader

if TYPE_CHECKING:
    from lance_table.filters.interval import Interval


def interval_rows(frag: FragmentReader, bounds: Interval, live: Runs) -> np.ndarray | None:
    """The rows among ``live`` (not empty) whose value lies in one of the ``bounds``, sorted; None
    when the column's file cannot tell without decoding it (the caller then evaluates the filter).

    Raises:
        CorruptFileError: a page of the column is damaged.
    """
    if bounds.empty:
        return np.zeros(0, np.int64)
    return frag.rows_in_interval(bounds.column, live, bounds.ranges)


def rows_read(
    frag: FragmentReader, columns: list[str], live: Runs, rows: np.ndarray, runs: Runs, dense: float
) -> pa.Table:
    """The ``columns`` of the ``rows`` (sorted, not empty, among ``live``; ``runs`` of them):
    read for every live row and masked when at least ``dense`` of them match, else only the
    matching rows' bytes."""
    if rows.size < dense * live.total:
        return frag.read(columns, runs)
    mask = np.zeros(live.total, bool)
    mask[rows - int(live.starts[0]) if live.count == 1 else np.searchsorted(live.positions(), rows)] = True
    chosen = pa.array(mask)
    table = frag.read(columns, live)
    return pa.table({n: filter_rows(table.column(n), chosen) for n in columns})
