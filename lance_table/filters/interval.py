"""A filter that only bounds one integer column: ``id = 5``, ``id >= 10 AND id < 20``,
``id BETWEEN 3 AND 9``, ``id IN (1, 7, 9)`` (a few values), as closed intervals of that column's
values.

Readers answer such a filter from the packed values (see ``FragmentReader.rows_in_interval``),
with the compiled filter's answers: a null is never in the interval, and a literal outside the
column's type is left to the filter's ordinary evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from lance_table.filters.bounds import Condition

_BOUNDS = {"=": (0, 0), ">=": (0, None), ">": (1, None), "<=": (None, 0), "<": (None, -1)}


#: an ``IN`` list of at most this many values is read as that many one-value intervals
FEW_VALUES = 8


@dataclass(frozen=True)
class Interval:
    """The values of the integer column ``column`` in one of ``ranges``: sorted, disjoint closed
    intervals ``(low, high)`` (none: no value)."""

    column: str
    ranges: tuple[tuple[int, int], ...]

    @property
    def empty(self) -> bool:
        return not self.ranges


def interval(conditions: Sequence[Condition], schema: pa.Schema) -> Interval | None:
    """The interval that ``conditions`` (all of a filter: rows match when they meet each) make,
    or None when they are not all comparisons, ``BETWEEN``\\ s or one-value ``IN``\\ s of one integer
    column of ``schema`` with integer literals inside the column's type."""
    if not conditions:
        return None
    column = conditions[0].column
    if column not in schema.names:
        return None
    t = schema.field(column).type
    if not pa.types.is_integer(t):
        return None
    info = np.iinfo(np.dtype(t.to_pandas_dtype()))
    low, high = int(info.min), int(info.max)
    points: set[int] | None = None  # the values an IN list allows (those of every IN list)
    for cond in conditions:
        if cond.column != column:
            return None
        if cond.op == "between":
            pairs = [(cond.value[0], ">="), (cond.value[1], "<=")]
        elif cond.op == "in" and 0 < len(cond.value) <= FEW_VALUES:
            pairs = []
            if any(type(v) is not int or not info.min <= v <= info.max for v in cond.value):
                return None
            points = set(cond.value) if points is None else points & set(cond.value)
        elif cond.op in _BOUNDS:
            pairs = [(cond.value, cond.op)]
        else:
            return None
        for value, op in pairs:
            if type(value) is not int or not info.min <= value <= info.max:
                return None
            above, below = _BOUNDS[op]
            if above is not None:
                low = max(low, value + above)
            if below is not None:
                high = min(high, value + below)
    if points is not None:
        return Interval(column, tuple((v, v) for v in sorted(points) if low <= v <= high))
    return Interval(column, ((low, high),) if low <= high else ())
