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
from collections.abc import Callable, Sequence
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


#: rows evaluated at a time: every condition's scratch and the values it reads stay in cache
#: while the conditions are evaluated and joined over them
BLOCK = 1 << 16

#: a condition's answers for rows ``[lo, hi)`` written into the given array
_Plan = Callable[[int, int, np.ndarray], None]


def mask(table: pa.Table, conditions: Sequence[Condition]) -> np.ndarray | None:
    """Which rows of ``table`` meet every condition; None when one of them is not evaluated here
    (then the caller evaluates the predicate through Arrow)."""
    plans = []
    for cond in conditions:
        plan = _plan(table, cond)
        if plan is None:
            return None
        plans.append(plan)
    n = table.num_rows
    out = np.empty(n, bool)
    if not plans:
        out[...] = True
        return out
    scratch = np.empty(min(BLOCK, n), bool)
    for lo in range(0, n, BLOCK):
        hi = min(lo + BLOCK, n)
        got = out[lo:hi]
        plans[0](lo, hi, got)
        for plan in plans[1:]:
            part = scratch[: hi - lo]
            plan(lo, hi, part)
            got &= part
    return out


def _plan(table: pa.Table, cond: Condition) -> _Plan | None:
    """How to evaluate ``cond`` over ``table`` a block of rows at a time; None when it is not
    evaluated here."""
    if cond.column not in table.column_names:
        return None
    col = table.column(cond.column)
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)):
        return None
    valid = np.asarray(arr.is_valid()) if arr.null_count else None
    if cond.op in ("is_null", "is_not_null"):
        if valid is None:
            constant = cond.op == "is_not_null"
            return lambda lo, hi, out: out.fill(constant)
        present = valid
        if cond.op == "is_null":
            return lambda lo, hi, out: np.logical_not(present[lo:hi], out=out)
        return lambda lo, hi, out: np.copyto(out, present[lo:hi])
    dtype = np.dtype(t.to_pandas_dtype())
    # the values as they lie, null slots included (their answers are masked below)
    values = np.frombuffer(arr.buffers()[1], dtype, len(arr), arr.offset * dtype.itemsize)
    plan = _residue_plan(values, *cond.value) if cond.op == "mod" else _value_plan(values, cond)
    if plan is None or valid is None:
        return plan
    return _masked(plan, valid)


def _masked(plan: _Plan, valid: np.ndarray) -> _Plan:
    """``plan``, no row with a null value matching."""

    def run(lo: int, hi: int, out: np.ndarray) -> None:
        plan(lo, hi, out)
        out &= valid[lo:hi]

    return run


def _value_plan(values: np.ndarray, cond: Condition) -> _Plan | None:
    """A comparison, ``between`` or ``in`` with literals of the values' type."""
    dtype = values.dtype
    literals = cond.value if cond.op in ("between", "in") else (cond.value,)
    found = [_literal(v, dtype) for v in literals]
    typed = [v for v in found if v is not None]
    if len(typed) != len(found):
        return None
    floats = dtype.kind == "f"
    scratch = np.empty(min(BLOCK, values.size), bool)
    if cond.op == "between":
        low, high = typed

        def between(lo: int, hi: int, out: np.ndarray) -> None:
            part = scratch[: hi - lo]
            _compare(">=", values[lo:hi], low, floats, out)
            _compare("<=", values[lo:hi], high, floats, part)
            out &= part

        return between
    if cond.op == "in":
        if len(typed) > _FEW_LITERALS:  # np.isin's lookup, over all the values at once
            whole = np.isin(values, np.array(typed, dtype))
            return lambda lo, hi, out: np.copyto(out, whole[lo:hi])
        return lambda lo, hi, out: _few(values[lo:hi], typed, out, scratch)
    if cond.op not in _COMPARE:
        return None
    op, literal = cond.op, typed[0]
    return lambda lo, hi, out: _compare(op, values[lo:hi], literal, floats, out)


# up to this many literals, ``x in (...)`` compares with each in turn (see :func:`_few`)
_FEW_LITERALS = 8


def _few(values: np.ndarray, literals: list[np.generic], out: np.ndarray, scratch: np.ndarray) -> None:
    """Which ``values`` equal one of a few ``literals``, into ``out``: a pass per literal costs
    less than ``np.isin``'s lookup table (which spans the literals' range) or sort."""
    if not literals:
        out.fill(False)
        return
    np.equal(values, literals[0], out=out)
    for literal in literals[1:]:
        out |= np.equal(values, literal, out=scratch[: values.size])


def _compare(op: str, values: np.ndarray, literal: np.generic, floats: bool, out: np.ndarray) -> None:
    """``values <op> literal`` into ``out``."""
    _COMPARE[op](values, literal, out=out)
    if floats and op in (">", ">="):  # NaN is above every number
        out |= np.isnan(values)


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


def _residue_plan(values: np.ndarray, divisor: int, op: str, literal: int) -> _Plan | None:
    """``values % divisor <op> literal`` over integer ``values``, the remainder taking the
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
    step, k = dtype.type(c), dtype.type(literal)
    floor = np.empty(min(BLOCK, values.size), dtype)  # x // c * c, then the floor remainder
    flags = np.empty(floor.size, bool)
    if op in ("=", "!="):
        # r == k: the floor remainder f (0 <= f < c) is r for x >= 0; for x < 0, r is f - c
        # unless f is 0. So r == 0 iff f == 0; r == k > 0 iff f == k and x >= 0; r == k < 0
        # iff f == k + c and x < 0; never for |k| >= c.
        negate = op == "!="
        if abs(literal) >= c:
            return lambda lo, hi, out: out.fill(negate)
        want = dtype.type(literal if literal >= 0 else literal + c)
        sign = None if literal == 0 or not signed else (np.less if literal < 0 else np.greater_equal)

        def equal(lo: int, hi: int, out: np.ndarray) -> None:
            x, f = values[lo:hi], floor[: hi - lo]
            np.floor_divide(x, step, out=f)  # by a multiplication: no hardware division
            np.multiply(f, step, out=f)  # wraps past the type's bottom; x - f is still exact
            if not want:
                np.equal(x, f, out=out)
            else:
                np.subtract(x, f, out=f)
                np.equal(f, want, out=out)
                if sign is not None:
                    out &= sign(x, 0, out=flags[: hi - lo])
            if negate:
                np.logical_not(out, out=out)

        return equal

    def compare(lo: int, hi: int, out: np.ndarray) -> None:
        x, f = values[lo:hi], floor[: hi - lo]
        np.floor_divide(x, step, out=f)
        np.multiply(f, step, out=f)
        np.subtract(x, f, out=f)
        if signed:  # a negative x's remainder is its floor remainder - c, unless that is 0
            negative = np.less(x, 0, out=flags[: hi - lo])
            negative &= f != 0
            np.subtract(f, step, out=f, where=negative)
        _COMPARE[op](f, k, out=out)

    return compare
