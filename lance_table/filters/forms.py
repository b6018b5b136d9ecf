"""The forms of value expressions: arithmetic with pylance's type promotion, common types of
several operands (``coalesce``, ``CASE``), ``IS [NOT] DISTINCT FROM`` and ``CASE``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_table.errors import FilterError
from lance_table.filters.literals import (
    _coerce_literal,
    _exact_numeric,
    _integer_as_decimal,
    _is_string,
    _literal,
    _Operand,
)


class _Compiler(Protocol):
    """What these forms use of the compiler (:class:`lance_table.filters.compiler._Compiler`)."""

    literals_take_column_type: bool
    regexp_match_as_boolean: bool

    def apply(self, what: str, fn: Callable[..., Any], *operands: _Operand) -> _Operand: ...
    def compile(self, node: exp.Expr) -> _Operand: ...
    def compare(self, op: str, a: _Operand, b: _Operand) -> _Operand: ...
    def convert(self, operand: _Operand, target: pa.DataType) -> _Operand: ...
    def boolean(self, operand: _Operand, what: str) -> _Operand: ...
    def unsupported(self, node: exp.Expr) -> FilterError: ...


def arithmetic_pair(c: _Compiler, a: _Operand, b: _Operand) -> tuple[_Operand, _Operand]:
    """A numeric literal takes the other side's numeric type where it fits exactly (``i8 * 2`` is
    int8, ``f32 + 0.5`` float32, as in pylance); otherwise Arrow's promotion applies (pylance
    refuses ``x * 2.5`` for an integer ``x``; here it is float64)."""
    if c.literals_take_column_type and a.is_literal != b.is_literal:
        literal, other = (a, b) if a.is_literal else (b, a)
        coerced = _exact_numeric(literal, other.type)
        if coerced is not None:
            return (coerced, b) if a.is_literal else (a, coerced)
    return wide_integers(c, a, b)


def arithmetic(c: _Compiler, symbol: str, fn: Callable[..., Any], a: _Operand, b: _Operand) -> _Operand:
    """``a <symbol> b`` with both numbers in the result's type first: Arrow, binding an expression,
    would rather narrow a literal to a column's type (and wrap ``i8 * 2`` in int8)."""
    result = c.apply(symbol, fn, a, b)
    target = result.type
    if not (pa.types.is_integer(target) or pa.types.is_floating(target)) or a.type == b.type == target:
        return result
    if not all(pa.types.is_integer(o.type) or pa.types.is_floating(o.type) for o in (a, b)):
        return result
    return c.apply(symbol, fn, c.convert(a, target), c.convert(b, target))


def unify(c: _Compiler, operands: list[_Operand], what: str) -> list[_Operand]:
    """Literals among ``operands`` take the type of the first non-literal (else of the first non-NULL
    literal), where they fit."""
    target = next((o.type for o in operands if not o.is_literal), None)
    if target is None:  # only literals: the first that is not NULL sets the type
        target = next((o.type for o in operands if not o.is_null_literal), None)
    if target is None:
        return operands
    out = []
    for o in operands:
        if o.is_null_literal:
            o = _literal(pa.scalar(None, target))
        elif o.is_literal:
            o = _exact_numeric(o, target) or (_coerce_literal(o, target) if _is_string(o.type) else o)
        out.append(o)
    return out


def distinct(c: _Compiler, node: exp.Expr) -> _Operand:
    """``a IS [NOT] DISTINCT FROM b``: NULLs compare as equal values, never NULL."""
    a, b = c.compile(node.this), c.compile(node.expression)
    if a.is_null_literal and b.is_null_literal:
        same = _literal(pa.scalar(True))
    else:
        equal = c.compare("=", a, b)
        null_a = c.apply("IS NULL", pc.is_null, a)
        null_b = c.apply("IS NULL", pc.is_null, b)
        same = c.apply(
            "IS NOT DISTINCT FROM",
            lambda e, x, y: pc.if_else(
                pc.or_kleene(x, y), pc.and_kleene(x, y), pc.coalesce(e, pa.scalar(False))
            ),
            equal,
            null_a,
            null_b,
        )
    if isinstance(node, exp.NullSafeNEQ):
        return c.apply("IS DISTINCT FROM", pc.invert, same)
    return same


def case(c: _Compiler, node: exp.Case) -> _Operand:
    """``CASE [x] WHEN c THEN v ... [ELSE d] END``: the first branch whose condition is TRUE."""
    subject = node.this
    conditions, values = [], []
    for branch in node.args.get("ifs") or []:
        if subject is not None:
            test = c.compare("=", c.compile(subject), c.compile(branch.this))
        else:
            test = c.boolean(c.compile(branch.this), "CASE WHEN")
        conditions.append(test)
        values.append(c.compile(branch.args["true"]))
    if not conditions:
        raise FilterError("CASE needs at least one WHEN branch")
    default = node.args.get("default")
    values.append(c.compile(default) if default is not None else _literal(pa.scalar(None)))
    values = unify(c, values, "CASE")
    known = [v.type for v in values if not v.is_null_literal]
    target = known[0] if known else pa.null()
    if any(t != target for t in known):
        target = pc.coalesce(*(pa.array([], type=t) for t in known)).type  # Arrow's common type
    values = [
        _literal(pa.scalar(None, target)) if v.is_null_literal else c.convert(v, target) for v in values
    ]
    n = len(conditions)

    def pick(*xs: Any) -> Any:
        tests = [pc.coalesce(x, pa.scalar(False)) for x in xs[:n]]
        return pc.case_when(pc.make_struct(*tests, field_names=[str(i) for i in range(n)]), *xs[n:])

    return c.apply("CASE", pick, *conditions, *values)


def days(x: Any) -> Any:
    return x.cast(pa.int32()).cast(pa.int64())


def wide_integers(c: _Compiler, a: _Operand, b: _Operand) -> tuple[_Operand, _Operand]:
    """A uint64 meets a signed integer: both as decimal128(20, 0), which holds either; an integer
    meets a decimal: the integer as the decimal DataFusion widens its type to."""
    ta, tb = a.type, b.type
    if pa.types.is_integer(ta) and pa.types.is_decimal(tb):
        return c.convert(a, _integer_as_decimal(ta)), b
    if pa.types.is_decimal(ta) and pa.types.is_integer(tb):
        return a, c.convert(b, _integer_as_decimal(tb))
    if not (pa.types.is_integer(ta) and pa.types.is_integer(tb)):
        return a, b
    if (ta == pa.uint64() and pa.types.is_signed_integer(tb)) or (
        tb == pa.uint64() and pa.types.is_signed_integer(ta)
    ):
        wide = pa.decimal128(20, 0)
        return c.convert(a, wide), c.convert(b, wide)
    return a, b
