"""The compiler: a sqlglot tree to one pyarrow compute expression, node by node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_table.errors import FilterError
from lance_table.filters import forms, functions
from lance_table.filters.comparisons import _balanced, _Comparisons
from lance_table.filters.literals import (
    _NULL_BOOL,
    _arrow_type,
    _cast,
    _cast_scalar,
    _integer_literal,
    _is_string,
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


class _Compiler(_Comparisons):
    """Turns a sqlglot tree into an :class:`_Operand`, recording the top-level columns it reads."""

    def __init__(self, schema: pa.Schema, *, values: bool = False) -> None:
        self.schema = schema
        self.columns: set[str] = set()
        # pylance plans filters and value expressions apart: in a filter, regexp_match(s, p) tests
        # whether s matches, and arithmetic promotes as DataFusion does (i8 * 2 is int64); in a value
        # expression a numeric literal takes the other operand's type (i8 * 2 is int8, and wraps)
        self.regexp_match_as_boolean = not values
        self.literals_take_column_type = values

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


def _binary_literal(digits: str) -> _Operand:
    try:
        return _literal(pa.scalar(bytes.fromhex(digits), pa.binary()))
    except ValueError:
        raise FilterError(
            f"invalid binary literal X'{digits}' (needs an even number of hex digits)"
        ) from None
