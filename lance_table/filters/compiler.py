"""The compiler: a sqlglot tree to one pyarrow compute expression, node by node."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_table.errors import FilterError
from lance_table.filters import forms, functions
from lance_table.filters.literals import (
    _NULL_BOOL,
    _arrow_type,
    _cast,
    _cast_scalar,
    _coerce_literal,
    _integer_literal,
    _is_string,
    _is_temporal,
    _like_pattern,
    _literal,
    _number_literal,
    _Operand,
)
from lance_table.filters.names import resolve_column, resolve_field

_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_ARITHMETIC: dict[type[exp.Expr], tuple[str, Callable[..., Any]]] = {
    exp.Add: ("+", pc.add),
    exp.Sub: ("-", pc.subtract),
    exp.Mul: ("*", pc.multiply),
    # Integer division truncates toward zero and % takes the dividend's sign, as in DataFusion.
    exp.Div: ("/", pc.divide),
    exp.Mod: ("%", pc.remainder),
}


def _empty(operand: _Operand) -> pa.Array:
    return pa.array([], type=operand.type)


def _balanced(fn: Callable[[_Operand, _Operand], _Operand], operands: Sequence[_Operand]) -> _Operand:
    """``fn`` folded over ``operands`` as a balanced tree (keeps long IN lists shallow)."""
    if len(operands) == 1:
        return operands[0]
    mid = len(operands) // 2
    return fn(_balanced(fn, operands[:mid]), _balanced(fn, operands[mid:]))


class _Compiler:
    """Turns a sqlglot tree into an :class:`_Operand`, recording the top-level columns it reads."""

    def __init__(self, schema: pa.Schema, *, values: bool = False) -> None:
        self.schema = schema
        self.columns: set[str] = set()
        # pylance plans filters and value expressions apart: in a filter, regexp_match(s, p) tests
        # whether s matches, and arithmetic promotes as DataFusion does (i8 * 2 is int64); in a value
        # expression a numeric literal takes the other operand's type (i8 * 2 is int8, and wraps)
        self.regexp_match_as_boolean = not values
        self.literals_take_column_type = values

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

    # -- dispatch ----------------------------------------------------------------------------------

    def compile(self, node: exp.Expr) -> _Operand:
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, (exp.And, exp.Or)):
            return self.logical(node)
        if isinstance(node, exp.Not):
            inner = self.boolean(self.compile(node.this), "NOT")
            return self.apply("NOT", pc.invert, inner)
        if type(node) in _COMPARISONS:
            return self.compare(
                _COMPARISONS[type(node)], self.compile(node.this), self.compile(node.expression)
            )
        if isinstance(node, exp.Between):
            return self.negated(node, self.between(node))
        if isinstance(node, exp.In):
            return self.negated(node, self.in_list(node))
        if isinstance(node, exp.Is):
            return self.is_(node)
        if isinstance(node, (exp.Like, exp.ILike, exp.Escape)):
            return self.like(node)
        if type(node) in _ARITHMETIC:
            symbol, fn = _ARITHMETIC[type(node)]
            a, b = forms.arithmetic_pair(self, self.compile(node.this), self.compile(node.expression))
            if symbol == "-" and pa.types.is_date32(a.type) and pa.types.is_date32(b.type):
                a, b = (self.apply("days", forms.days, o) for o in (a, b))  # date - date is days, int64
            return forms.arithmetic(self, symbol, fn, a, b)
        if isinstance(node, exp.Neg):
            return self.negate(self.compile(node.this))
        if functions.is_function(node):
            return functions.compile_function(self, node)
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            return forms.distinct(self, node)
        if isinstance(node, exp.Case):
            return forms.case(self, node)
        if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
            return self.cast(node)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return _literal(pa.scalar(node.this, pa.string()))
            return _number_literal(node.this)
        if isinstance(node, exp.HexString):
            return _binary_literal(str(node.this))
        if isinstance(node, exp.Boolean):
            return _literal(pa.scalar(bool(node.this), pa.bool_()))
        if isinstance(node, exp.Null):
            return _literal(pa.scalar(None))
        if isinstance(node, exp.RawString):
            # "..." is a column when it names one (standard SQL), else a string (Lance)
            if node.this in self.schema.names:
                return self.column([(node.this, True)])
            return _literal(pa.scalar(node.this, pa.string()))
        if isinstance(node, exp.Bracket) and not self.is_field_access(node):
            return self.list_element(node)
        if isinstance(node, exp.Bracket) and isinstance(node.this, exp.Bracket):
            return self.field_of(node)  # l[1]['x']: a field of a computed struct
        if isinstance(node, (exp.Column, exp.Dot, exp.Identifier, exp.Var, exp.Bracket)):
            return self.column(self.column_path(node))
        raise self.unsupported(node)

    def negated(self, node: exp.Expr, result: _Operand) -> _Operand:
        if node.args.get("negate"):
            return self.apply("NOT", pc.invert, result)
        return result

    # -- columns -----------------------------------------------------------------------------------

    def column_path(self, node: exp.Expr) -> list[tuple[str, bool]]:
        """The parts of a column reference, each with whether it was quoted."""
        if isinstance(node, exp.Identifier):
            return [(str(node.this), bool(node.quoted))]
        if isinstance(node, exp.Var):
            return [(str(node.this), False)]
        if isinstance(node, exp.RawString):
            return [(str(node.this), True)]
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise self.unsupported(node.this)
            return [part for p in node.parts for part in self.column_path(p)]
        if isinstance(node, exp.Dot):
            return self.column_path(node.this) + self.column_path(node.expression)
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and self.is_field_access(node):
            key = node.expressions[0]
            if isinstance(key, exp.Literal) and key.is_string:  # s['x'] is the field x of s
                return [*self.column_path(node.this), (str(key.this), True)]
        raise self.unsupported(node)

    @staticmethod
    def is_field_access(node: exp.Bracket) -> bool:
        keys = node.expressions
        return len(keys) == 1 and isinstance(keys[0], exp.Literal) and keys[0].is_string

    def field_of(self, node: exp.Bracket) -> _Operand:
        """``v['x']`` of a computed struct value ``v`` (a list element, say): its field ``x``."""
        value = self.compile(node.this)
        name = str(node.expressions[0].this)
        if not pa.types.is_struct(value.type):
            raise FilterError(f"cannot take field '{name}' of {value.type}: it is not a struct")
        index = resolve_field(value.type, name, node.this.sql())
        return _Operand(pc.struct_field(value.expr, [index]), value.type.field(index).type)

    def list_element(self, node: exp.Bracket) -> _Operand:
        """``l[i]``: the i-th element (from 1) of a list, NULL where the list is shorter or NULL."""
        keys = node.expressions
        index = self.compile(keys[0]) if len(keys) == 1 else None
        if index is None or index.value is None or not pa.types.is_integer(index.type):
            raise FilterError("a list index must be one integer literal, as in l[1]")
        lists = self.compile(node.this)
        if not (pa.types.is_list(lists.type) or pa.types.is_large_list(lists.type)):
            raise FilterError(f"cannot index {lists.type} with [{index.value}]: it is not a list")
        position = index.value.as_py()
        if position is None or position < 1:  # DataFusion counts from 1; 0 and below find nothing
            return _literal(pa.scalar(None, lists.type.value_type))

        def element(x: Any) -> Any:
            one = pc.list_slice(x, position - 1, position, return_fixed_size_list=True)
            return pc.list_element(one, 0)

        return self.apply(f"[{position}]", element, lists)

    def column(self, path: list[tuple[str, bool]]) -> _Operand:
        """The column (or struct field) a reference names, resolved as pylance resolves names."""
        # a quoted name alone matches exactly; the first part of a dotted path resolves as unquoted
        name = resolve_column(path[0][0], self.schema, quoted=path[0][1] and len(path) == 1)
        field_type = self.schema.field(name).type
        names = [name]
        for child, _ in path[1:]:
            parent = ".".join(names)
            if not pa.types.is_struct(field_type):
                raise FilterError(
                    f"column '{parent}' is of type {field_type}, not a struct with field '{child}'"
                )
            field_type = field_type.field(resolve_field(field_type, child, parent)).type
            names.append(child)
        self.columns.add(name)
        operand = _Operand(pc.field(*names) if len(names) > 1 else pc.field(name), field_type)
        if pa.types.is_dictionary(field_type):  # compare dictionary-encoded columns by their values
            operand = self.convert(operand, field_type.value_type)
        return operand

    # -- boolean logic -----------------------------------------------------------------------------

    def logical(self, node: exp.Expr) -> _Operand:
        # flatten long AND/OR chains (sqlglot nests them to the left) into balanced trees
        cls, keyword = (exp.And, "AND") if isinstance(node, exp.And) else (exp.Or, "OR")
        fn = pc.and_kleene if keyword == "AND" else pc.or_kleene
        leaves: list[exp.Expr] = []
        stack = [node]
        while stack:
            current = stack.pop()
            if type(current) is cls:
                stack.extend([current.expression, current.this])
            else:
                leaves.append(current)
        operands = [self.boolean(self.compile(leaf), keyword) for leaf in leaves]
        return _balanced(lambda a, b: self.apply(keyword, fn, a, b), operands)

    def is_(self, node: exp.Is) -> _Operand:
        operand = functions.regexp_match_nulls(self, node.this) or self.compile(node.this)
        test = node.expression
        if isinstance(test, exp.Null):  # IS NULL (and IS UNKNOWN, which sqlglot reads the same)
            return self.apply("IS NULL", pc.is_null, operand)
        if isinstance(test, exp.Boolean):
            operand = self.boolean(operand, "IS TRUE/FALSE")
            if test.this:
                return self.apply("IS TRUE", lambda x: pc.coalesce(x, False), operand)
            return self.apply("IS FALSE", lambda x: pc.coalesce(pc.invert(x), False), operand)
        raise FilterError(f"unsupported SQL construct: IS {test.sql()}")

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

    # -- LIKE ----------------------------------------------------------------------------------------

    def like(self, node: exp.Expr) -> _Operand:
        escape: str | None = None
        if isinstance(node, exp.Escape):
            escape_operand = self.compile(node.expression)
            if escape_operand.value is None or not _is_string(escape_operand.type):
                raise FilterError("ESCAPE needs a one-character string literal")
            escape = escape_operand.value.as_py()
            if escape is None or len(escape) != 1:
                raise FilterError(f"ESCAPE needs a one-character string literal, got {escape!r}")
            node = node.this
            if not isinstance(node, (exp.Like, exp.ILike)):
                raise self.unsupported(node)
        ignore_case = isinstance(node, exp.ILike)
        keyword = "ILIKE" if ignore_case else "LIKE"
        value = self.compile(node.this)
        pattern = self.compile(node.expression)
        if value.is_null_literal or pattern.is_null_literal:
            return _NULL_BOOL
        if pattern.value is None or not _is_string(pattern.type):
            raise FilterError(f"the pattern of {keyword} must be a string literal")
        text = _like_pattern(pattern.value.as_py(), escape)
        result = self.apply(keyword, lambda x: pc.match_like(x, pattern=text, ignore_case=ignore_case), value)
        return self.negated(node, result)

    # -- arithmetic, casts ---------------------------------------------------------------------------

    def negate(self, operand: _Operand) -> _Operand:
        value = operand.value
        if (
            value is not None
            and value.is_valid
            and (pa.types.is_integer(value.type) or pa.types.is_floating(value.type))
        ):
            number = -value.as_py()
            if isinstance(number, int):
                return _integer_literal(number)
            return _literal(pa.scalar(number, value.type))
        if pa.types.is_unsigned_integer(operand.type):
            raise FilterError(f"cannot negate {operand.type}: negation needs a signed type")
        return self.apply("unary -", pc.negate, operand)

    def cast(self, node: exp.Cast) -> _Operand:
        target = _arrow_type(node.to)
        operand = self.compile(node.this)
        if operand.value is not None:
            return _literal(_cast_scalar(operand.value, target))
        return self.apply(f"CAST AS {node.to.sql()}", lambda x: _cast(x, operand.type, target), operand)


_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _binary_literal(digits: str) -> _Operand:
    try:
        return _literal(pa.scalar(bytes.fromhex(digits), pa.binary()))
    except ValueError:
        raise FilterError(
            f"invalid binary literal X'{digits}' (needs an even number of hex digits)"
        ) from None


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
