"""Simple conditions a predicate implies, for skipping data by statistics.

A filter ``id >= 10 AND x < 0.5 AND s IS NOT NULL AND id IN (1, 2)`` holds only for rows where
each of its top-level ``AND`` terms holds. :func:`conjuncts` returns the terms of the form
``column <op> literal`` (and ``IS [NOT] NULL``, ``BETWEEN``, ``IN``) over plain top-level columns
of integer, float, boolean or string type; any other term is left out, which only makes the
conditions weaker. A reader may then skip a page whose statistics prove that one condition fails
for every row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlglot import exp

from lance_table.errors import FilterError
from lance_table.filters.dialect import parse
from lance_table.filters.names import resolve_column

_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_OPS = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


@dataclass(frozen=True)
class Condition:
    """``column <op> value``; ops as :func:`lance_table.file.legacy.prune.may_match` takes them,
    and ``mod`` (``value`` is ``(divisor, op, literal)``: ``column % divisor <op> literal`` over
    an integer column), which only :mod:`lance_table.filters.vectorized` evaluates: statistics
    never prune by it (see :func:`stats_conditions`)."""

    column: str
    op: str
    value: Any = None


def conjuncts(predicate: str, schema: pa.Schema) -> list[Condition]:
    """The simple conditions among the top-level ``AND`` terms of ``predicate`` (see the module).

    Never raises for a predicate the filter compiler accepts; a predicate that does not parse gives
    no conditions (the compiler reports the error). ``mod`` conditions, which no statistics can
    decide, are left out.
    """
    return list(stats_conditions(terms(predicate, schema)[0]))


def stats_conditions(conditions: Sequence[Condition]) -> tuple[Condition, ...]:
    """The ``conditions`` that page statistics may decide (all but ``mod`` ones)."""
    return tuple(c for c in conditions if c.op != "mod")


def terms(predicate: str, schema: pa.Schema) -> tuple[list[Condition], bool]:
    """:func:`conjuncts` and the ``mod`` conditions, and whether they are the whole predicate
    (every top-level ``AND`` term is a simple condition), so that rows meeting all of them are
    exactly the matching rows."""
    try:
        tree = parse(predicate)
    except FilterError:
        return [], False
    out: list[Condition] = []
    whole = True
    for term in _and_terms(tree):
        cond = _condition(term, schema)
        if cond is None:
            whole = False
        else:
            out.append(cond)
    return out, whole


def _and_terms(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _and_terms(node.this) + _and_terms(node.expression)
    return [node]


def _condition(node: exp.Expr, schema: pa.Schema) -> Condition | None:
    for cls, op in _OPS.items():
        if isinstance(node, cls):
            left, right = node.this, node.expression
            column, t = _column(left, schema)
            if column is None:
                column, t = _column(right, schema)
                left, right, op = right, left, _FLIP[op]
            if column is None or t is None:
                found = _residue(node.this, node.expression, _OPS[cls], schema)
                return found or _residue(node.expression, node.this, _FLIP[_OPS[cls]], schema)
            value = _literal(right, t)
            return None if value is _NO else Condition(column, op, value)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        column, _ = _column(node.this, schema)
        return None if column is None else Condition(column, "is_null")
    if isinstance(node, exp.Not):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            column, _ = _column(inner.this, schema)
            return None if column is None else Condition(column, "is_not_null")
        return None
    if isinstance(node, exp.Between):
        column, t = _column(node.this, schema)
        if column is None or t is None:
            return None
        low, high = _literal(node.args.get("low"), t), _literal(node.args.get("high"), t)
        if low is _NO or high is _NO:
            return None
        return Condition(column, "between", (low, high))
    if isinstance(node, exp.In) and not node.args.get("query"):
        column, t = _column(node.this, schema)
        if column is None or t is None:
            return None
        values = [_literal(v, t) for v in node.expressions]
        if not values or any(v is _NO for v in values):
            return None
        return Condition(column, "in", tuple(values))
    return None


def _residue(node: exp.Expr, other: exp.Expr, op: str, schema: pa.Schema) -> Condition | None:
    """``column % divisor <op> value`` over an integer column, with integer literals, as a
    ``mod`` condition (None for anything else)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Mod):
        return None
    column, t = _column(node.this, schema)
    if column is None or t is None or not pa.types.is_integer(t):
        return None
    divisor, value = _literal(node.expression, t), _literal(other, t)
    if divisor is _NO or value is _NO:
        return None
    return Condition(column, "mod", (divisor, op, value))


def _column(node: exp.Expr | None, schema: pa.Schema) -> tuple[str | None, pa.DataType | None]:
    """A plain top-level column (one that appears once in the schema) and its type."""
    if not isinstance(node, exp.Column) or node.table or isinstance(node.this, exp.Star):
        return None, None
    quoted = isinstance(node.this, exp.Identifier) and bool(node.this.quoted)
    written = str(node.this.this) if isinstance(node.this, exp.Identifier) else str(node.name)
    try:  # the column the compiler reads for this name
        name = resolve_column(written, schema, quoted=quoted)
    except FilterError:  # unknown or ambiguous
        return None, None
    return name, schema.field(name).type


class _Missing:
    pass


_NO: Any = _Missing()


def _literal(node: exp.Expr | None, t: pa.DataType) -> Any:
    """The literal's Python value when it compares with type ``t`` as is, else ``_NO``."""
    negative = False
    while isinstance(node, (exp.Neg, exp.Paren)):
        if isinstance(node, exp.Neg):
            negative = not negative
        node = node.this
    if isinstance(node, exp.Literal):
        text = str(node.this)
        if node.is_string:
            if negative or not (pa.types.is_string(t) or pa.types.is_large_string(t)):
                return _NO
            return text
        if pa.types.is_integer(t):
            try:
                value: int | float = int(text)
            except ValueError:
                return _NO  # a fractional literal against integers: compared as floats
            return -value if negative else value
        if pa.types.is_floating(t):
            try:
                value = float(text)
            except ValueError:
                return _NO
            return -value if negative else value
        return _NO
    if isinstance(node, exp.Boolean) and pa.types.is_boolean(t) and not negative:
        return bool(node.this)
    return _NO
