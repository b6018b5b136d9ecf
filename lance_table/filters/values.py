"""SQL value expressions, as pylance takes them in projections, ``update`` and ``add_columns``.

``to_table(columns={"y": "x * 2 + 1"})``, ``update({"c": "upper(name)"})`` and
``add_columns({"c": "a * 2"})`` each give SQL that computes a value per row. :func:`compile_value`
compiles it, with the filter compiler, into one pyarrow compute expression; :func:`evaluate` runs it
over a batch. The SQL is the filter SQL (see :mod:`lance_table.filters`) plus the value forms:

* arithmetic ``+ - * / %`` with DataFusion's semantics as pylance applies them: a numeric literal takes
  the other operand's type (``i8 * 2`` is int8 and wraps around on overflow, ``f32 + 0.5`` is
  float32), integer division truncates toward zero, ``%`` takes the dividend's sign, division of an
  integer by zero is an error; two columns meet in their common type (int8 + int32 is int32, uint8 +
  int8 is int16, int64 + float32 is float32, uint64 + int64 is decimal128(21, 0));
* ``||`` and ``concat(...)``, ``CASE [x] WHEN ... THEN ... [ELSE ...] END``, ``CAST``, literals
  (``NULL`` alone is of type null, as in pylance) and the functions the filters take.

Beyond pylance (which refuses these): ``CASE``, and a literal that does not fit the other operand's
type (``x * 2.5`` for an integer ``x``, ``i8 + 200``) -- here Arrow's promotion applies (float64,
int64), never a wrong or wrapped value. ``regexp_match`` (a list in pylance) is refused; use
``regexp_like``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from lance_table.errors import FilterError
from lance_table.filters.columns import expression_columns
from lance_table.filters.compiler import _Compiler
from lance_table.filters.dialect import parse
from lance_table.filters.literals import _cast, _cast_scalar, _coerce_literal, _literal, _Operand

__all__ = ["CompiledValue", "analyze_value", "compile_value", "evaluate", "project"]

_BIND_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError)


@dataclass(frozen=True)
class CompiledValue:
    """A compiled value expression.

    Attributes:
        expression: the pyarrow compute expression.
        type: the Arrow type of its values.
        columns: the top-level columns it reads, in schema order.
        null_literal: whether it is a constant NULL (``NULL``, ``CAST(NULL AS INT)``): its values are
            all null, so a column of it is nullable.
    """

    expression: pc.Expression
    type: pa.DataType
    columns: tuple[str, ...]
    null_literal: bool = False


def compile_value(
    sql: str | pc.Expression, schema: pa.Schema, *, to: pa.DataType | None = None
) -> pc.Expression:
    """Compile a SQL value expression (``"x * 2 + 1"``, ``"upper(name)"``) over ``schema``.

    Args:
        sql: the SQL text, or an already built Expression (returned as is unless ``to`` casts it).
        schema: the schema of the rows it is computed from.
        to: the type the values must have (the column an ``update`` writes): the result is cast to
            it as pylance casts (a literal is converted once; ``'5'`` into an integer column is 5).

    Returns:
        The expression; see :func:`analyze_value` for its type and the columns it reads.

    Raises:
        FilterError: the text is not valid SQL, names an unknown column (a
            :class:`~lance_table.errors.ColumnNotFoundError`), uses an unsupported construct, mixes
            types that do not combine, or cannot be cast to ``to``.
        TypeError: ``sql`` is neither a string nor an Expression.
    """
    return analyze_value(sql, schema, to=to).expression


def analyze_value(
    sql: str | pc.Expression, schema: pa.Schema, *, to: pa.DataType | None = None
) -> CompiledValue:
    """:func:`compile_value`, with the result's type and the columns it reads.

    Raises:
        FilterError: as :func:`compile_value`.
        TypeError: ``sql`` is neither a string nor an Expression.
    """
    if isinstance(sql, pc.Expression):
        operand = _Operand(sql, _bound_type(sql, schema, str(sql)))
        columns = expression_columns(pc.is_valid(sql), schema)  # (found by binding a boolean)
    elif isinstance(sql, str):
        if not sql.strip():
            raise FilterError("empty value expression")
        compiler = _Compiler(schema, values=True)
        try:
            operand = compiler.compile(parse(sql))
        except RecursionError:
            raise FilterError("value expression is nested too deeply") from None
        columns = [n for n in schema.names if n in compiler.columns]
    else:
        raise TypeError(
            f"a value expression must be SQL text or a pyarrow Expression, not {type(sql).__name__}"
        )
    if to is not None and operand.type != to:
        operand = _converted(operand, to, sql)
    _bound_type(operand.expr, schema, sql)  # a last check that it evaluates over the schema
    return CompiledValue(operand.expr, operand.type, tuple(columns), operand.is_null_literal)


def evaluate(sql: str | pc.Expression, data: pa.RecordBatch | pa.Table) -> pa.Array:
    """The values of ``sql`` for every row of ``data``, one array as long as ``data``.

    Raises:
        FilterError: as :func:`compile_value`.
        pyarrow.ArrowInvalid: evaluating failed on the data (an integer division by zero, a string
            that does not convert in a CAST), as pylance fails on the same rows.
    """
    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    value = analyze_value(sql, table.schema)
    result = _project(table, value.expression)
    if result.type != value.type:
        result = result.cast(value.type)
    return result.combine_chunks() if isinstance(result, pa.ChunkedArray) else result


def project(table: pa.Table, exprs: list[pc.Expression], names: list[str]) -> pa.Table:
    """The expressions evaluated over ``table``, as columns ``names`` (rows keep their order)."""
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("project", acero.ProjectNodeOptions(exprs, names)),
        ]
    )
    return plan.to_table(use_threads=False)


def _project(table: pa.Table, expr: pc.Expression) -> pa.ChunkedArray:
    return project(table, [expr], ["value"]).column(0)


def _bound_type(expr: pc.Expression, schema: pa.Schema, text: object) -> pa.DataType:
    try:
        return _project(schema.empty_table(), expr).type
    except _BIND_ERRORS as e:
        raise FilterError(f"value expression {text!r} cannot be evaluated: {e}") from e


def _converted(operand: _Operand, to: pa.DataType, text: object) -> _Operand:
    if operand.value is not None:
        coerced = _coerce_literal(operand, to)
        return coerced if coerced.type == to else _literal(_cast_scalar(operand.value, to))
    try:
        return _Operand(_cast(operand.expr, operand.type, to), to)
    except _BIND_ERRORS as e:
        raise FilterError(
            f"value expression {text!r} of type {operand.type} cannot be cast to {to}: {e}"
        ) from e
