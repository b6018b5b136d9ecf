"""Filters made only of simple numeric conditions, evaluated with numpy.

A predicate whose top-level ``AND`` terms are all simple conditions (see
:mod:`lance_table.filters.bounds`) over integer or floating-point columns is evaluated here, a few
times faster than through an Arrow plan, with the compiled filter's answers
(:mod:`lance_table.filters`): a literal takes the column's type (``f32 < 0.1`` compares in
float32), NaN sorts above every number (``x > 1`` holds for NaN), a comparison with a null is not a
match, and a literal outside an integer column's range sends the predicate back to Arrow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from lance_table.filters.bounds import Condition


_COMPARE = {
    "=": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def mask(table: pa.Table, conditions: Sequence[Condition]) -> np.ndarray | None:
    """Which rows of ``table`` meet every condition; None when one of them is not evaluated here
    (then the caller evaluates the predicate through Arrow)."""
    out: np.ndarray | None = None
    for cond in conditions:
        got = _condition(table, cond)
        if got is None:
            return None
        out = got if out is None else np.logical_and(out, got, out=out)
    return out


def _condition(table: pa.Table, cond: Condition) -> np.ndarray | None:
    if cond.column not in table.column_names:
        return None
    col = table.column(cond.column)
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)):
        return None
    valid = np.asarray(arr.is_valid()) if arr.null_count else None
    if cond.op in ("is_null", "is_not_null"):
        present = valid if valid is not None else np.ones(len(arr), bool)
        return ~present if cond.op == "is_null" else present.copy()
    dtype = np.dtype(t.to_pandas_dtype())
    # the values as they lie, null slots included (their answers are masked below)
    values = np.frombuffer(arr.buffers()[1], dtype, len(arr), arr.offset * dtype.itemsize)
    literals = cond.value if cond.op in ("between", "in") else (cond.value,)
    found = [_literal(v, dtype) for v in literals]
    typed = [v for v in found if v is not None]
    if len(typed) != len(found):
        return None
    floats = dtype.kind == "f"
    if cond.op == "between":
        got = _compare(">=", values, typed[0], floats)
        got &= _compare("<=", values, typed[1], floats)
    elif cond.op == "in":
        got = _isin(values, typed)
    elif cond.op in _COMPARE:
        got = _compare(cond.op, values, typed[0], floats)
    else:
        return None
    if valid is not None:
        got &= valid
    return got


# up to this many literals, ``x in (...)`` compares with each in turn: a pass per literal costs
# less than ``np.isin``'s lookup table (which spans the literals' range) or sort
_FEW_LITERALS = 8


def _isin(values: np.ndarray, literals: list[np.generic]) -> np.ndarray:
    """Which ``values`` equal one of ``literals`` (of the values' type)."""
    if not literals:
        return np.zeros(values.size, bool)
    if len(literals) > _FEW_LITERALS:
        return np.isin(values, np.array(literals, values.dtype))
    got = values == literals[0]
    if len(literals) > 1:
        scratch = np.empty(values.size, bool)
        for literal in literals[1:]:
            got |= np.equal(values, literal, out=scratch)
    return got


def _compare(op: str, values: np.ndarray, literal: np.generic, floats: bool) -> np.ndarray:
    got = _COMPARE[op](values, literal)
    if floats and op in (">", ">="):  # NaN is above every number
        got |= np.isnan(values)
    return got


def _literal(value: object, dtype: np.dtype) -> np.generic | None:
    """The literal in the column's type, as the filter compiler converts it; None when that
    conversion is not the plain one (out of an integer type's range, past a float's, or NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if dtype.kind == "f":
        if not math.isfinite(value):
            return None
        with np.errstate(over="ignore"):
            typed = dtype.type(value)
        return typed if np.isfinite(typed) else None
    if not isinstance(value, int):
        return None
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        return None
    return dtype.type(value)
