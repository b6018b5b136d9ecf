"""Filters made only of simple numeric conditions, evaluated with numpy.

A predicate whose top-level ``AND`` terms are all simple conditions (see
:mod:`lance_table.filters.bounds`) over integer or floating-point columns is evaluated here, a few
times faster than through an Arrow plan, with the compiled filter's answers
(:mod:`lance_table.filters`): a literal takes the column's type (``f32 < 0.1`` compares in
float32), NaN sorts above every number (``x > 1`` holds for NaN), a comparison with a null is not a
match, and a literal outside an integer column's range sends the predicate back to Arrow.

``x % d <op> k`` over an integer column (a ``mod`` condition) is evaluated without dividing: the
floor division by a constant (numpy divides by a multiplication) gives the remainder, which takes
the dividend's sign as in the compiled filter (``-25 % 10`` is ``-5``). A divisor of 0 (an error),
or one outside the column's type, sends the predicate back to Arrow.
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
    if cond.op == "mod":
        got = _residue_mask(values, *cond.value)
        if got is not None and valid is not None:
            got &= valid
        return got
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


# values evaluated at a time by :func:`_residue_mask` (their scratch stays in cache)
_RESIDUE_BLOCK = 1 << 16


def _residue_mask(values: np.ndarray, divisor: int, op: str, literal: int) -> np.ndarray | None:
    """Which integer ``values`` meet ``values % divisor <op> literal``, the remainder taking the
    dividend's sign; None when it is not evaluated here (a zero divisor, a divisor or literal
    outside the values' type, a float column)."""
    dtype = values.dtype
    if dtype.kind not in "iu" or op not in _COMPARE:
        return None
    info = np.iinfo(dtype)
    c = abs(divisor)  # the remainder's sign is the dividend's: x % -d == x % d
    if not 0 < c <= info.max or not info.min <= literal <= info.max:
        return None
    signed = dtype.kind == "i"
    step = dtype.type(c)
    out = np.empty(values.size, bool)
    if op in ("=", "!="):
        # r == k: the floor remainder f (0 <= f < c) is r for x >= 0; for x < 0, r is f - c
        # unless f is 0. So r == 0 iff f == 0; r == k > 0 iff f == k and x >= 0; r == k < 0
        # iff f == k + c and x < 0; never for |k| >= c.
        if abs(literal) >= c:
            out[...] = op == "!="
            return out
        want = literal if literal >= 0 else literal + c
        sign = None if literal == 0 or not signed else (np.less if literal < 0 else np.greater_equal)
    scratch = np.empty(min(_RESIDUE_BLOCK, values.size), dtype)
    flags = np.empty(scratch.size, bool) if op not in ("=", "!=") or sign is not None else None
    for lo in range(0, values.size, _RESIDUE_BLOCK):
        x = values[lo : lo + _RESIDUE_BLOCK]
        f = scratch[: x.size]
        got = out[lo : lo + x.size]
        np.floor_divide(x, step, out=f)
        np.multiply(f, step, out=f)  # wraps past the type's bottom; the difference is still exact
        if op in ("=", "!="):
            if want == 0:
                np.equal(x, f, out=got)
            else:
                np.subtract(x, f, out=f)
                np.equal(f, dtype.type(want), out=got)
                if sign is not None:
                    assert flags is not None
                    got &= sign(x, 0, out=flags[: x.size])
            continue
        np.subtract(x, f, out=f)
        if signed:  # the floor remainder of a negative x, when not 0, is r + c
            assert flags is not None
            neg = np.less(x, 0, out=flags[: x.size])
            neg &= f != 0
            np.subtract(f, step, out=f, where=neg)
        _COMPARE[op](f, dtype.type(literal), out=got)
    if op == "!=":
        np.logical_not(out, out=out)
    return out
