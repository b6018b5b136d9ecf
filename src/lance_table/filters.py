"""SQL filter predicates, as pylance accepts them, compiled to :class:`pyarrow.compute.Expression`.

pylance takes filters as DataFusion SQL text (``dataset.to_table(filter="x > 1 AND s LIKE 'a%'")``,
``dataset.delete("...")``). :func:`parse_filter` parses that text with sqlglot and compiles it, node by
node, into one pyarrow compute expression over a given schema, so filtering runs in Arrow's kernels and
never loops over rows in Python. :func:`filter_columns` names the top-level columns a predicate reads.

The SQL follows Lance's dialect:

* ``'...'`` is a string (``''`` escapes a quote); ```...``` quotes an identifier (````` escapes a
  backtick). Lance reads ``"..."`` as a *string*; here ``"name"`` is a column when the schema has a
  top-level column of exactly that name, or when it is part of a dotted path, and a string otherwise.
* Identifiers are case sensitive and never normalised: ``Id`` names the column ``Id``, not ``id``.
* ``a.b.c`` is field ``b.c`` of the struct column ``a``; table qualifiers are not accepted (pylance
  rejects them too).
* Literals take the type of the column they meet, as in DataFusion: ``d = '2024-01-01'`` compares the
  date column ``d`` with a date, ``tz > timestamp '2024-01-01 10:00:00'`` reads the naive literal as UTC,
  ``f32 = 0.1`` compares in float32.
* Floats compare in DataFusion's total order: NaN equals NaN and sorts above +inf, so ``f > 1``
  selects NaN rows (IEEE 754 comparisons, which Arrow uses, would not). Unlike DataFusion, -0.0 equals
  0.0 also between two columns, and a NaN with its sign bit set (``0.0 / 0`` on x86) still sorts last.
* Three-valued logic: comparisons with NULL are NULL, ``AND``/``OR`` are Kleene, ``NOT NULL`` is NULL,
  ``x IN (1, NULL)`` is NULL (not false) when ``x`` is not 1. A filter selects the rows where the
  predicate is TRUE; :meth:`pyarrow.Table.filter` drops NULLs, which is the same thing.

Not supported (a :class:`~lance_table.errors.FilterError` names the construct): subqueries, aggregates,
CASE, ``IS [NOT] DISTINCT FROM``, TRY_CAST, intervals, table qualifiers, and functions other than
``lower``, ``upper``, ``abs`` and ``length``.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp, parser, tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.parser import IsPredicatePrecedence

from lance_table.errors import FilterError

__all__ = ["filter_columns", "parse_filter"]


class _LanceSQL(Dialect):
    """Lance's SQL: ``'`` strings, backtick identifiers, ``"`` strings, IS below comparisons."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE

    class Tokenizer(tokens.Tokenizer):
        QUOTES = ["'"]  # noqa: RUF012  (sqlglot's own attribute, a plain list)
        IDENTIFIERS = ["`"]  # noqa: RUF012
        # Double-quoted text comes out as exp.RawString; the compiler decides whether it names a
        # column (standard SQL) or is a string (Lance).
        RAW_STRINGS = ['"']  # noqa: RUF012
        STRING_ESCAPES = ["'"]  # noqa: RUF012

    class Parser(parser.Parser):
        # IS binds below comparisons, as in DataFusion: `a > 1 IS TRUE` is `(a > 1) IS TRUE`
        IS_PREDICATE_PRECEDENCE = IsPredicatePrecedence.LOW


@dataclass(frozen=True)
class _Operand:
    """A compiled sub-expression with its Arrow type; ``value`` is set when it is a constant literal."""

    expr: pc.Expression
    type: pa.DataType
    value: pa.Scalar | None = None

    @property
    def is_literal(self) -> bool:
        return self.value is not None

    @property
    def is_null_literal(self) -> bool:
        return self.value is not None and not self.value.is_valid


def _literal(value: pa.Scalar) -> _Operand:
    return _Operand(pc.scalar(value), value.type, value)


_NULL_BOOL = _literal(pa.scalar(None, pa.bool_()))

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_DATE_RE = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*")
_TIMESTAMP_RE = re.compile(
    r"""\s*(\d{4})-(\d{1,2})-(\d{1,2})
        (?:[Tt\s]\s*(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?
        \s*([Zz]|[+-]\d{2}(?::?\d{2})?)?\s*""",
    re.VERBOSE,
)
_EPOCH = dt.datetime(1970, 1, 1)

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
_FUNCTIONS: dict[type[exp.Expr], tuple[str, Callable[..., Any]]] = {
    exp.Lower: ("lower", pc.utf8_lower),
    exp.Upper: ("upper", pc.utf8_upper),
    exp.Abs: ("abs", pc.abs),
    exp.Length: ("length", pc.utf8_length),
}

_DT = exp.DataType.Type
_CAST_TYPES: dict[Any, pa.DataType] = {
    _DT.TINYINT: pa.int8(),
    _DT.SMALLINT: pa.int16(),
    _DT.INT: pa.int32(),
    _DT.BIGINT: pa.int64(),
    _DT.UTINYINT: pa.uint8(),
    _DT.USMALLINT: pa.uint16(),
    _DT.UINT: pa.uint32(),
    _DT.UBIGINT: pa.uint64(),
    _DT.FLOAT: pa.float32(),
    _DT.DOUBLE: pa.float64(),
    _DT.TEXT: pa.string(),
    _DT.VARCHAR: pa.string(),
    _DT.CHAR: pa.string(),
    _DT.NVARCHAR: pa.string(),
    _DT.NCHAR: pa.string(),
    _DT.BINARY: pa.binary(),
    _DT.VARBINARY: pa.binary(),
    _DT.DATE: pa.date32(),
    _DT.BOOLEAN: pa.bool_(),
}
_TIMESTAMP_UNITS = {0: "s", 3: "ms", 6: "us", 9: "ns"}


def parse_filter(predicate: str | pc.Expression, schema: pa.Schema) -> pc.Expression:
    """Compile a SQL predicate into a pyarrow Expression over ``schema``.

    ``predicate`` is SQL as pylance accepts it in ``to_table(filter=...)`` and ``delete(...)``, e.g.
    ``"id > 10 AND name LIKE 'a%' AND s.b.c IS NOT NULL"``. An Expression is returned as is.

    Supported: comparisons (``= == != <> < <= > >=``), ``AND``/``OR``/``NOT``, parentheses,
    ``[NOT] IN (...)``, ``[NOT] BETWEEN``, ``IS [NOT] NULL``, ``IS [NOT] TRUE/FALSE``,
    ``[NOT] LIKE``/``ILIKE`` (with ``ESCAPE``), ``+ - * / %`` and unary minus, ``CAST(x AS type)`` and
    ``x::type``, the functions ``lower``, ``upper``, ``abs``, ``length``; literals: integers, floats,
    strings, ``TRUE``/``FALSE``/``NULL``, ``date '...'``, ``timestamp '...'``.

    Args:
        predicate: the SQL text, or an already built Expression.
        schema: the schema of the data the predicate will filter.

    Returns:
        A boolean Expression; ``table.filter(expr)`` keeps the rows where the predicate is TRUE.

    Raises:
        FilterError: the text is empty or not valid SQL, names an unknown column or struct field, uses
            a construct that is not supported (subqueries, aggregates, unknown functions, ...), mixes
            types that cannot be compared or combined, or is not a boolean expression.
        TypeError: ``predicate`` is neither a string nor an Expression.
    """
    if isinstance(predicate, pc.Expression):
        return predicate
    expr, _ = _compile(predicate, schema)
    return expr


def filter_columns(predicate: str | pc.Expression, schema: pa.Schema) -> list[str]:
    """The top-level columns of ``schema`` that ``predicate`` reads, in schema order.

    A scan needs only these columns to decide which rows match. A nested reference such as ``s.a``
    counts as its top-level column ``s``.

    For an Expression the columns are found by binding it against sub-schemas (a reference to a
    missing column fails to bind), which is exact; if the Expression does not bind against ``schema``
    at all, every column is returned.

    Args:
        predicate: the SQL text, or an Expression.
        schema: the schema of the data the predicate will filter.

    Returns:
        The referenced top-level column names, each once, in the order of ``schema``.

    Raises:
        FilterError: ``predicate`` is SQL text that :func:`parse_filter` rejects.
        TypeError: ``predicate`` is neither a string nor an Expression.
    """
    if isinstance(predicate, pc.Expression):
        return _expression_columns(predicate, schema)
    _, columns = _compile(predicate, schema)
    return [name for name in schema.names if name in columns]


# --------------------------------------------------------------------------------------------------
# Parsing


def _compile(predicate: str, schema: pa.Schema) -> tuple[pc.Expression, set[str]]:
    if not isinstance(predicate, str):
        raise TypeError(f"a filter must be SQL text or a pyarrow Expression, not {type(predicate).__name__}")
    if not predicate.strip():
        raise FilterError("empty filter predicate")
    compiler = _Compiler(schema)
    try:
        result = compiler.compile(_parse(predicate))
    except RecursionError:
        raise FilterError("filter is nested too deeply") from None
    if not pa.types.is_boolean(result.type):
        raise FilterError(f"filter {predicate!r} is not a boolean expression (it is of type {result.type})")
    try:  # a last check that the expression binds against the schema
        schema.empty_table().filter(result.expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise FilterError(f"filter {predicate!r} cannot be evaluated: {e}") from e
    return result.expr, compiler.columns


def _parse(text: str) -> exp.Expr:
    try:
        trees = [tree for tree in sqlglot.parse(text, dialect=_LanceSQL) if tree is not None]
    except ParseError as e:
        detail = e.errors[0] if e.errors else {}
        description = detail.get("description", str(e))
        where = f" at line {detail['line']}, column {detail['col']}" if "line" in detail else ""
        raise FilterError(f"syntax error in filter {text!r}: {description}{where}") from e
    except SqlglotError as e:
        raise FilterError(f"syntax error in filter {text!r}: {e}") from e
    if len(trees) != 1:
        raise FilterError(f"a filter must be a single expression, got {len(trees)} statements: {text!r}")
    return trees[0]


# --------------------------------------------------------------------------------------------------
# Literals


def _integer_literal(value: int) -> _Operand:
    if _INT64_MIN <= value <= _INT64_MAX:
        return _literal(pa.scalar(value, pa.int64()))
    if 0 <= value < 2**64:
        return _literal(pa.scalar(value, pa.uint64()))
    raise FilterError(f"integer literal {value} is out of range")


def _number_literal(text: str) -> _Operand:
    if text.isdigit():
        return _integer_literal(int(text))
    try:
        return _literal(pa.scalar(float(text), pa.float64()))
    except ValueError as e:
        raise FilterError(f"invalid number {text!r}") from e


def _parse_date(text: str) -> dt.date:
    m = _DATE_RE.fullmatch(text)
    try:
        if m is None:
            raise ValueError
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        raise FilterError(f"cannot read {text!r} as a date (expected YYYY-MM-DD)") from None


def _parse_timestamp(text: str) -> pa.Scalar:
    """``text`` as a naive timestamp[ns] (timestamp[us] outside ns range); an offset converts to UTC."""
    m = _TIMESTAMP_RE.fullmatch(text)
    try:
        if m is None:
            raise ValueError
        year, month, day = int(m[1]), int(m[2]), int(m[3])
        hour, minute, second = int(m[4] or 0), int(m[5] or 0), int(m[6] or 0)
        wall = dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        raise FilterError(
            f"cannot read {text!r} as a timestamp (expected YYYY-MM-DD[ HH:MM[:SS[.fff]]][Z|+HH:MM])"
        ) from None
    nanos = (wall - _EPOCH) // dt.timedelta(microseconds=1) * 1000 + int((m[7] or "").ljust(9, "0"))
    zone = m[8]
    if zone and zone not in "Zz":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset_minutes = int(digits[:2]) * 60 + int(digits[2:] or 0)
        nanos -= sign * offset_minutes * 60 * 1_000_000_000
    if _INT64_MIN <= nanos <= _INT64_MAX:
        return pa.scalar(nanos, pa.timestamp("ns"))
    return pa.scalar(nanos // 1000, pa.timestamp("us"))


def _is_temporal(t: pa.DataType) -> bool:
    return bool(pa.types.is_date(t) or pa.types.is_timestamp(t))


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _cast_options(source: pa.DataType, target: pa.DataType) -> pc.CastOptions:
    """DataFusion's CAST: floats truncate to integers, times truncate to coarser units and to dates;
    everything else (overflow, unparsable strings) is an error."""
    from_float = pa.types.is_floating(source)
    return pc.CastOptions(
        target,
        allow_float_truncate=from_float and (pa.types.is_integer(target) or pa.types.is_decimal(target)),
        allow_time_truncate=_is_temporal(source) and _is_temporal(target),
        allow_decimal_truncate=pa.types.is_decimal(source) and not pa.types.is_decimal(target),
    )


def _cast(x: Any, source: pa.DataType, target: pa.DataType) -> Any:
    """``x`` (an Array, Scalar or Expression of type ``source``) cast to ``target`` as DataFusion casts."""
    if pa.types.is_integer(source) and pa.types.is_date32(target) and source != pa.int32():
        x = x.cast(pa.int32())  # Arrow casts only int32 to date32 (a count of days)
        source = pa.int32()
    return x.cast(options=_cast_options(source, target))


def _cast_scalar(value: pa.Scalar, target: pa.DataType) -> pa.Scalar:
    if value.type == target:
        return value
    if not value.is_valid:
        return pa.scalar(None, target)
    if _is_string(value.type) and (pa.types.is_date(target) or pa.types.is_timestamp(target)):
        text = value.as_py()
        if pa.types.is_date(target):
            return pa.scalar(_parse_date(text), pa.date32()).cast(target)
        return _cast(_parse_timestamp(text), pa.timestamp("ns"), target)
    try:
        return _cast(value, value.type, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise FilterError(f"cannot convert {value.as_py()!r} to {target}: {e}") from e


def _coerce_literal(literal: _Operand, target: pa.DataType) -> _Operand:
    """``literal`` converted to ``target``, the type of the operand it meets, as DataFusion does.

    Only conversions that keep the comparison's meaning are made; anything else is left to Arrow's
    implicit casts (an int64 column against 1.5 compares in float64, say).
    """
    value = literal.value
    assert value is not None
    source = value.type
    if source == target:
        return literal
    if not value.is_valid:
        return _literal(pa.scalar(None, target))
    convert = False
    if _is_string(source):
        # A string meets a date, timestamp, number or boolean: read the string as that type.
        convert = (
            _is_temporal(target)
            or pa.types.is_integer(target)
            or pa.types.is_floating(target)
            or pa.types.is_boolean(target)
            or _is_string(target)
        )
    elif pa.types.is_date(source) and _is_temporal(target):
        convert = True
    elif pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        convert = True  # naive literals are UTC; the unit is the column's (DataFusion truncates)
    elif pa.types.is_floating(target) and (pa.types.is_integer(source) or pa.types.is_floating(source)):
        convert = True  # f32 = 0.1 compares in float32
    elif pa.types.is_integer(source) and pa.types.is_integer(target):
        try:
            return _literal(value.cast(target))  # only when it fits; otherwise compare in int64
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return literal
    if not convert:
        return literal
    return _literal(_cast_scalar(value, target))


def _like_pattern(pattern: str, escape: str | None) -> str:
    """``pattern`` with ``escape`` as its escape character, rewritten for Arrow (which uses ``\\``)."""
    if escape is None or escape == "\\":
        return pattern
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if ch == escape:
            escaped = next(chars, None)
            if escaped is None:
                raise FilterError(f"LIKE pattern {pattern!r} ends with its escape character {escape!r}")
            out.append("\\" + escaped)
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


# --------------------------------------------------------------------------------------------------
# The compiler


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

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.columns: set[str] = set()

    # -- plumbing ----------------------------------------------------------------------------------

    @staticmethod
    def apply(what: str, fn: Callable[..., Any], *operands: _Operand) -> _Operand:
        """``fn`` applied to the operands' expressions; its result type comes from empty arrays."""
        try:
            result_type = fn(*(_empty(o) for o in operands)).type
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            types = ", ".join(str(o.type) for o in operands)
            raise FilterError(f"cannot apply {what} to {types}: {e}") from e
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
            return self.apply(symbol, fn, self.compile(node.this), self.compile(node.expression))
        if isinstance(node, exp.Neg):
            return self.negate(self.compile(node.this))
        if type(node) in _FUNCTIONS:
            name, fn = _FUNCTIONS[type(node)]
            if any(v for k, v in node.args.items() if k != "this"):
                raise FilterError(f"{name}() takes exactly one argument")
            return self.apply(f"{name}()", fn, self.compile(node.this))
        if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
            return self.cast(node)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return _literal(pa.scalar(node.this, pa.string()))
            return _number_literal(node.this)
        if isinstance(node, exp.Boolean):
            return _literal(pa.scalar(bool(node.this), pa.bool_()))
        if isinstance(node, exp.Null):
            return _literal(pa.scalar(None))
        if isinstance(node, exp.RawString):
            # "..." is a column when it names one (standard SQL), else a string (Lance)
            if node.this in self.schema.names:
                return self.column([node.this])
            return _literal(pa.scalar(node.this, pa.string()))
        if isinstance(node, (exp.Column, exp.Dot, exp.Identifier, exp.Var)):
            return self.column(self.column_path(node))
        raise self.unsupported(node)

    def negated(self, node: exp.Expr, result: _Operand) -> _Operand:
        if node.args.get("negate"):
            return self.apply("NOT", pc.invert, result)
        return result

    # -- columns -----------------------------------------------------------------------------------

    def column_path(self, node: exp.Expr) -> list[str]:
        if isinstance(node, (exp.Identifier, exp.Var, exp.RawString)):
            return [str(node.this)]
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise self.unsupported(node.this)
            return [str(part.this) for part in node.parts]
        if isinstance(node, exp.Dot):
            return self.column_path(node.this) + self.column_path(node.expression)
        raise self.unsupported(node)

    def column(self, path: list[str]) -> _Operand:
        name = path[0]
        index = self.schema.get_field_index(name)
        if index < 0:
            if name in self.schema.names:
                raise FilterError(f"ambiguous column '{name}': the schema has it more than once")
            raise FilterError(f"unknown column '{name}'")
        field_type = self.schema.field(index).type
        for depth, child in enumerate(path[1:], start=1):
            parent = ".".join(path[:depth])
            if not pa.types.is_struct(field_type):
                raise FilterError(
                    f"column '{parent}' is of type {field_type}, not a struct with field '{child}'"
                )
            child_index = field_type.get_field_index(child)
            if child_index < 0:
                raise FilterError(f"unknown field '{child}' in struct column '{parent}'")
            field_type = field_type.field(child_index).type
        self.columns.add(name)
        operand = _Operand(pc.field(*path) if len(path) > 1 else pc.field(name), field_type)
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
        operand = self.compile(node.this)
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
        a, b = self.coerce_pair(a, b)
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
        return self.apply("unary -", pc.negate, operand)

    def cast(self, node: exp.Cast) -> _Operand:
        target = _arrow_type(node.to)
        operand = self.compile(node.this)
        if operand.value is not None:
            return _literal(_cast_scalar(operand.value, target))
        return self.apply(f"CAST AS {node.to.sql()}", lambda x: _cast(x, operand.type, target), operand)


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


def _arrow_type(data_type: exp.DataType) -> pa.DataType:
    kind = data_type.this
    params = [p.this for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
    numbers: list[int] = []
    for p in params:
        if not (isinstance(p, exp.Literal) and not p.is_string and p.this.isdigit()):
            raise FilterError(f"unsupported CAST target type {data_type.sql()}")
        numbers.append(int(p.this))
    if kind in (_DT.TIMESTAMP, _DT.DATETIME):
        precision = numbers[0] if numbers else 6
        if precision not in _TIMESTAMP_UNITS:
            raise FilterError(f"unsupported timestamp precision {precision} (use 0, 3, 6 or 9)")
        return pa.timestamp(_TIMESTAMP_UNITS[precision])
    if kind == _DT.DECIMAL:
        if len(numbers) != 2:
            raise FilterError("DECIMAL needs a precision and a scale: DECIMAL(p, s)")
        precision, scale = numbers
        try:
            return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        except ValueError as e:
            raise FilterError(f"invalid type {data_type.sql()}: {e}") from e
    if kind in _CAST_TYPES:
        return _CAST_TYPES[kind]
    raise FilterError(f"unsupported CAST target type {data_type.sql()}")


# --------------------------------------------------------------------------------------------------
# Columns of a pyarrow Expression


def _binds(expr: pc.Expression, schema: pa.Schema, names: Sequence[str]) -> bool:
    """Whether ``expr`` can be evaluated with only the columns ``names`` of ``schema``."""
    wanted = set(names)
    sub = pa.schema([f for f in schema if f.name in wanted])
    try:
        sub.empty_table().filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
        return False
    return True


def _expression_columns(expr: pc.Expression, schema: pa.Schema) -> list[str]:
    """The top-level columns ``expr`` reads, found by group testing: binding fails iff one is missing."""
    names = list(schema.names)
    if len(set(names)) != len(names) or not _binds(expr, schema, names):
        return names

    @functools.cache
    def binds(kept: frozenset[str]) -> bool:
        return _binds(expr, schema, [n for n in names if n in kept])

    def needed(candidates: list[str], base: frozenset[str]) -> list[str]:
        # invariant: the expression binds with base + candidates; find the candidates it reads
        if binds(base):
            return []
        if len(candidates) == 1:
            return candidates
        mid = len(candidates) // 2
        left, right = candidates[:mid], candidates[mid:]
        from_left = needed(left, base | frozenset(right))
        return from_left + needed(right, base | frozenset(from_left))

    # The columns named in the expression's text are a likely superset; when they suffice (the binding
    # says so, exactly), search only among them.
    text = str(expr)
    candidates = [n for n in names if n in text]
    if not binds(frozenset(candidates)):
        candidates = names
    found = set(needed(candidates, frozenset())) if candidates else set()
    return [n for n in names if n in found]
