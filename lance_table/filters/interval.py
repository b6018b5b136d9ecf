"""A filter that only bounds one integer column: ``id = 5``, ``id >= 10 AND id < 20``,
``id BETWEEN 3 AND 9``, as one closed interval of that column's values.

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


@dataclass(frozen=True)
class Interval:
    """The values ``[low, high]`` of the integer column ``column`` (empty when low > high)."""

    column: str
    low: int
    high: int

    @property
    def empty(self) -> bool:
        return self.low > self.high


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
    for cond in conditions:
        if cond.column != column:
            return None
        if cond.op == "between":
            pairs = [(cond.value[0], ">="), (cond.value[1], "<=")]
        elif cond.op == "in" and len(cond.value) == 1:
            pairs = [(cond.value[0], "=")]
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
    return Interval(column, low, high)
