"""SQL filter predicates, as pylance accepts them, compiled to :class:`pyarrow.compute.Expression`.

pylance takes filters as DataFusion SQL text (``dataset.to_table(filter="x > 1 AND s LIKE 'a%'")``,
``dataset.delete("...")``). :func:`parse_filter` parses that text with sqlglot and compiles it, node by
node, into one pyarrow compute expression over a given schema, so filtering runs in Arrow's kernels and
never loops over rows in Python. :func:`filter_columns` names the top-level columns a predicate reads.

The SQL follows Lance's dialect:

* ``'...'`` is a string (``''`` escapes a quote); ```...``` quotes an identifier (````` escapes a
  backtick). Lance reads ``"..."`` as a *string*; here ``"name"`` is a column when the schema has a
  top-level column of exactly that name, or when it is part of a dotted path, and a string otherwise.
* Names resolve as pylance resolves them (:mod:`lance_table.filters.names`): an unquoted name is
  the column of exactly that name, else the first column equal to it ignoring case; quoted names and
  struct fields match exactly. An unknown name is a :class:`~lance_table.errors.ColumnNotFoundError`
  that lists the columns and suggests the nearest.
* Literals take the type of the column they meet, as in DataFusion: ``d = '2024-01-01'`` compares the
  date column ``d`` with a date, ``ts > timestamp '2024-01-01 10:00:00'`` compares in the column's unit,
  ``f32 = 0.1`` compares in float32. A naive timestamp (column or literal) meeting a zoned one is
  wall-clock time in that zone (a literal with an offset is converted to UTC first), as in pylance.
  An integer literal outside an integer column's range is answered (``u > -1`` on uint64 holds for
  every non-NULL row), where pylance refuses it.
* Floats compare in DataFusion's total order: NaN equals NaN and sorts above +inf, so ``f > 1``
  selects NaN rows (IEEE 754 comparisons, which Arrow uses, would not). Unlike DataFusion, -0.0 equals
  0.0 also between two columns, and a NaN with its sign bit set (``0.0 / 0`` on x86) still sorts last.
* Three-valued logic: comparisons with NULL are NULL, ``AND``/``OR`` are Kleene, ``NOT NULL`` is NULL,
  ``x IN (1, NULL)`` is NULL (not false) when ``x`` is not 1. A filter selects the rows where the
  predicate is TRUE; :meth:`pyarrow.Table.filter` drops NULLs, which is the same thing.

Functions: see :mod:`lance_table.filters.functions` (``starts_with``, ``regexp_like``, ``coalesce``,
``array_has`` and others); value expressions (projections, ``update``, ``add_columns``): see
:mod:`lance_table.filters.values`.

Not supported (a :class:`~lance_table.errors.FilterError` names the construct): subqueries, aggregates,
TRY_CAST, intervals, table qualifiers, functions other than those listed, and patterns that are
columns rather than literals (``name LIKE other``, ``contains(a, b)``, ``array_has(l, x)``), which
pylance accepts.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lance_table.errors import FilterError
from lance_table.filters.columns import expression_columns
from lance_table.filters.compiler import _Compiler
from lance_table.filters.dialect import parse
from lance_table.filters.values import CompiledValue, analyze_value, compile_value, evaluate

__all__ = [
    "CompiledValue",
    "analyze_value",
    "compile_filter",
    "compile_value",
    "evaluate",
    "filter_columns",
    "parse_filter",
]


def parse_filter(predicate: str | pc.Expression, schema: pa.Schema) -> pc.Expression:
    """Compile a SQL predicate into a pyarrow Expression over ``schema``.

    ``predicate`` is SQL as pylance accepts it in ``to_table(filter=...)`` and ``delete(...)``, e.g.
    ``"id > 10 AND name LIKE 'a%' AND s.b.c IS NOT NULL"``. An Expression is returned as is.

    Supported: comparisons (``= == != <> < <= > >=``), ``AND``/``OR``/``NOT``, parentheses,
    ``[NOT] IN (...)``, ``[NOT] BETWEEN``, ``IS [NOT] NULL``, ``IS [NOT] TRUE/FALSE``,
    ``[NOT] LIKE``/``ILIKE`` (with ``ESCAPE``), ``+ - * / %`` and unary minus, ``CAST(x AS type)`` and
    ``x::type``, ``IS [NOT] DISTINCT FROM``, ``CASE``, ``||``, the functions of
    :mod:`lance_table.filters.functions`; literals: integers, floats, strings, ``X'..'``,
    ``TRUE``/``FALSE``/``NULL``, ``date '...'``, ``timestamp '...'``, ``CURRENT_DATE``.

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
        return expression_columns(predicate, schema)
    _, columns = _compile(predicate, schema)
    return [name for name in schema.names if name in columns]


def compile_filter(predicate: str | pc.Expression, schema: pa.Schema) -> tuple[pc.Expression, list[str]]:
    """:func:`parse_filter` and :func:`filter_columns` at once: SQL text is compiled once.

    Raises:
        FilterError: as :func:`parse_filter`.
        TypeError: ``predicate`` is neither a string nor an Expression.
    """
    if isinstance(predicate, pc.Expression):
        return predicate, expression_columns(predicate, schema)
    expr, columns = _compile(predicate, schema)
    return expr, [name for name in schema.names if name in columns]


def _compile(predicate: str, schema: pa.Schema) -> tuple[pc.Expression, set[str]]:
    if not isinstance(predicate, str):
        raise TypeError(f"a filter must be SQL text or a pyarrow Expression, not {type(predicate).__name__}")
    if not predicate.strip():
        raise FilterError("empty filter predicate")
    compiler = _Compiler(schema)
    try:
        result = compiler.compile(parse(predicate))
    except RecursionError:
        raise FilterError("filter is nested too deeply") from None
    if not pa.types.is_boolean(result.type):
        raise FilterError(f"The filter {predicate} does not return a boolean (it is of type {result.type})")
    try:  # a last check that the expression binds against the schema
        schema.empty_table().filter(result.expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise FilterError(f"filter {predicate!r} cannot be evaluated: {e}") from e
    return result.expr, compiler.columns
