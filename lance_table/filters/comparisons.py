"""The comparisons of the filter compiler, as DataFusion evaluates them: literals take the other
side's type, dates meet timestamps as timestamps, floats compare in DataFusion's total order (NaN = NaN),
an integer literal outside a column's range decides by its side, ``IN`` over literals is one hash
lookup; and the plumbing every expression is built with (:meth:`_Comparisons.apply`).

:class:`lance_table.filters.compiler._Compiler` is built on :class:`_Comparisons`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_table.errors import FilterError
from lance_table.filters import forms
from lance_table.filters.literals import (
    _NULL_BOOL,
    _cast,
    _cast_scalar,
    _coerce_literal,
    _is_string,
    _is_temporal,
    _literal,
    _Operand,
)


def _empty(operand: _Operand) -> pa.Array:
    return pa.array([], type=operand.type)


def _balanced(fn: Callable[[_Operand, _Operand], _Operand], operands: Sequence[_Operand]) -> _Operand:
    """``fn`` folded over ``operands`` as a balanced tree (keeps long IN lists shallow)."""
    if len(operands) == 1:
        return operands[0]
    mid = len(operands) // 2
    return fn(_balanced(fn, operands[:mid]), _balanced(fn, operands[mid:]))


class _Comparisons:
    """The compiler's plumbing and comparisons: the base of
    :class:`lance_table.filters.compiler._Compiler`, which compiles the nodes (:meth:`compile`)."""

    # set by the compiler (see :class:`lance_table.filters.compiler._Compiler`)
    regexp_match_as_boolean: bool
    literals_take_column_type: bool

    def compile(self, node: exp.Expr) -> _Operand:
        """The operand a sqlglot node compiles to (the compiler's dispatch)."""
        raise NotImplementedError

    # -- plumbing ----------------------------------------------------------------------------------

    @staticmethod
    def apply(what: str, fn: Callable[..., Any], *operands: _Operand) -> _Operand:
        """``fn`` applied to the operands' expressions; its result type comes from empty arrays."""
        try:
            result_type = fn(*(_empty(o) for o in operands)).type
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            types = ", ".join(str(o.type) for o in operands)
            raise FilterError(f"cannot apply {what} to {types}: {e}") from e
        if operands and all(o.value is not None for o in operands):  # fold constants, as DataFusion
            try:
                folded = fn(*(o.value for o in operands))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise FilterError(f"cannot evaluate {what}: {e}") from e
            if isinstance(folded, pa.Scalar) and folded.type == result_type:
                return _literal(folded)
        return _Operand(fn(*(o.expr for o in operands)), result_type)

    @staticmethod
    def boolean(operand: _Operand, what: str) -> _Operand:
        if operand.is_null_literal:
            return _NULL_BOOL
        if not pa.types.is_boolean(operand.type):
            raise FilterError(f"{what} needs a boolean operand, got {operand.type}")
        return operand

    @staticmethod
    def unsupported(node: exp.Expr) -> FilterError:
        if isinstance(node, exp.AggFunc):
            return FilterError(f"unsupported SQL construct: aggregate function {node.sql_name()}")
        if isinstance(node, exp.Anonymous):
            return FilterError(f"unsupported function '{node.name}'")
        if isinstance(node, exp.Func):  # a function or keyword construct sqlglot knows: CASE, EXISTS, ...
            return FilterError(f"unsupported SQL construct: {type(node).__name__} ({node.sql_name()})")
        return FilterError(f"unsupported SQL construct: {type(node).__name__}")

    # -- comparisons -------------------------------------------------------------------------------

    def coerce_pair(self, a: _Operand, b: _Operand) -> tuple[_Operand, _Operand]:
        """Literals take the other side's type; dates meet timestamps as timestamps; zones agree."""
        if a.is_literal and not b.is_literal:
            a = _coerce_literal(a, b.type)
        elif b.is_literal and not a.is_literal:
            b = _coerce_literal(b, a.type)
        elif a.is_literal and b.is_literal:
            if _is_string(a.type) and not _is_string(b.type):
                a = _coerce_literal(a, b.type)
            elif _is_string(b.type) and not _is_string(a.type):
                b = _coerce_literal(b, a.type)
        return self.unify_temporal(a, b)

    def unify_temporal(self, a: _Operand, b: _Operand) -> tuple[_Operand, _Operand]:
        if not (_is_temporal(a.type) and _is_temporal(b.type)) or a.type == b.type:
            return a, b
        if pa.types.is_date(a.type) and pa.types.is_date(b.type):
            return a, b
        if pa.types.is_date(a.type):
            return self.convert(a, b.type), b
        if pa.types.is_date(b.type):
            return a, self.convert(b, a.type)
        # two timestamps: Arrow refuses to compare a zoned one with a naive one (whose values are
        # UTC, as Lance reads them), or two different zones; the finer unit wins
        units = ["s", "ms", "us", "ns"]
        unit = max(a.type.unit, b.type.unit, key=units.index)
        target = pa.timestamp(unit, a.type.tz or b.type.tz)
        return self.convert(a, target), self.convert(b, target)

    def convert(self, operand: _Operand, target: pa.DataType) -> _Operand:
        if operand.type == target:
            return operand
        if operand.value is not None:
            return _literal(_cast_scalar(operand.value, target))
        return self.apply(f"CAST to {target}", lambda x: _cast(x, operand.type, target), operand)

    def compare(self, op: str, a: _Operand, b: _Operand) -> _Operand:
        if a.is_null_literal or b.is_null_literal:
            return _NULL_BOOL
        outside = self.out_of_range(op, a, b)
        if outside is not None:
            return outside
        a, b = self.coerce_pair(a, b)
        a, b = forms.wide_integers(self, a, b)
        if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
            return self.compare_floats(op, a, b)
        return self.apply(op, _PLAIN_COMPARE[op], a, b)

    def compare_floats(self, op: str, a: _Operand, b: _Operand) -> _Operand:
        """Comparison in DataFusion's total order of floats: NaN = NaN, and NaN > everything else."""
        if a.type != b.type and not (a.is_literal or b.is_literal):
            target = a.type if pa.types.is_floating(a.type) and a.type == b.type else pa.float64()
            a, b = self.convert(a, target), self.convert(b, target)
        if op in (">", ">="):
            return self.compare_floats("<" if op == ">" else "<=", b, a)
        plain = self.apply(op, _PLAIN_COMPARE[op], a, b)
        a_nan, b_nan = _may_be_nan(a), _may_be_nan(b)
        if op in ("=", "<>"):
            if not (a_nan and b_nan):
                return plain
            plain = self.apply("=", pc.equal, a, b)
            both = self.apply("AND", pc.and_kleene, self.is_nan(a), self.is_nan(b))
            equal = self.apply("OR", pc.or_kleene, plain, both)
            return equal if op == "=" else self.apply("NOT", pc.invert, equal)
        if not b_nan:  # x < 5 and x <= 5 are false for a NaN x in both orders
            return plain
        # a < NaN and a <= NaN hold for every non-null a, except NaN < NaN
        below = self.is_nan(b)
        guard: _Operand | None = None
        if op == "<" and a_nan:
            guard = self.apply("NOT", pc.invert, self.is_nan(a))  # NULL when a is NULL
        elif not a.is_literal:
            guard = self.apply("IS NOT NULL", pc.is_valid, a)
        if guard is not None:
            below = self.apply("AND", pc.and_kleene, below, guard)
        return self.apply("OR", pc.or_kleene, plain, below)

    def out_of_range(self, op: str, a: _Operand, b: _Operand) -> _Operand | None:
        """``column <op> literal`` for an integer literal outside the integer column's range (``u > -1``
        on uint64, ``i8 < 200``): decided by which side of the range it lies, NULL for NULL rows."""
        if a.is_literal and not b.is_literal:
            return self.out_of_range(_FLIP[op], b, a)
        value = b.value
        if (
            a.is_literal
            or value is None
            or not pa.types.is_integer(a.type)
            or not pa.types.is_integer(value.type)
        ):
            return None
        number, bits = value.as_py(), a.type.bit_width
        low, high = (
            (0, 2**bits - 1)
            if pa.types.is_unsigned_integer(a.type)
            else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        )
        if low <= number <= high:
            return None
        below = number < low  # the literal is below every value of the column
        answer = {"=": False, "<>": True, "<": not below, "<=": not below, ">": below, ">=": below}[op]
        return self.apply(
            f"{op} {number}",
            lambda x: pc.if_else(pc.is_valid(x), pa.scalar(answer), pa.scalar(None, pa.bool_())),
            a,
        )

    def is_nan(self, operand: _Operand) -> _Operand:
        return self.apply("isnan", pc.is_nan, operand)

    def between(self, node: exp.Between) -> _Operand:
        value = self.compile(node.this)
        low = self.compare(">=", value, self.compile(node.args["low"]))
        high = self.compare("<=", value, self.compile(node.args["high"]))
        return self.apply("BETWEEN", pc.and_kleene, low, high)

    def in_list(self, node: exp.In) -> _Operand:
        for key in ("query", "unnest", "field"):
            if node.args.get(key) is not None:
                raise self.unsupported(node.args[key])
        value = self.compile(node.this)
        items = [self.compile(item) for item in node.expressions]
        if not items:
            raise FilterError("IN needs at least one value")
        if not value.is_literal and all(item.is_literal for item in items):
            coerced = [_coerce_literal(item, value.type) for item in items]
            if all(item.type == value.type for item in coerced):
                return self.in_value_set(value, coerced)
        # general case: x = a OR x = b OR ... has exactly SQL's IN semantics
        equalities = [self.compare("=", value, item) for item in items]
        return _balanced(lambda a, b: self.apply("OR", pc.or_kleene, a, b), equalities)

    def in_value_set(self, value: _Operand, items: list[_Operand]) -> _Operand:
        """``value IN (literals)`` with one hash lookup, NULLs handled as SQL does."""
        scalars = [item.value for item in items if item.value is not None and item.value.is_valid]
        has_null = len(scalars) < len(items)
        if pa.types.is_floating(value.type) and any(s.as_py() == 0 for s in scalars):
            # -0.0 = 0.0 compares true, but the hash lookup tells the two apart
            scalars += [pa.scalar(0.0, value.type), pa.scalar(-0.0, value.type)]
        value_set = pa.array(scalars, type=value.type)
        found = self.apply("IN", lambda x: pc.is_in(x, value_set=value_set), value)
        null = pc.scalar(pa.scalar(None, pa.bool_()))
        # NULL IN (...) is NULL, not false
        result = _Operand(pc.if_else(pc.is_valid(value.expr), found.expr, null), pa.bool_())
        if has_null:  # x IN (1, NULL) is TRUE or NULL, never FALSE
            result = self.apply("OR", pc.or_kleene, result, _NULL_BOOL)
        return result


_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


_PLAIN_COMPARE: dict[str, Callable[..., Any]] = {
    "=": pc.equal,
    "<>": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _may_be_nan(operand: _Operand) -> bool:
    if not pa.types.is_floating(operand.type):
        return False
    if operand.value is not None:
        number = operand.value.as_py()
        return number is not None and math.isnan(number)
    return True
