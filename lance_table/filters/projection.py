"""SQL value expressions, as pylance takes them in ``columns={"name": "SQL expression"}``.

An expression is compiled with the filter compiler (:mod:`lance_table.filters`), so it has the
same columns, literals, operators and functions as a filter; it may be of any type.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import acero

from lance_table.errors import FilterError
from lance_table.filters.compiler import _Compiler
from lance_table.filters.dialect import parse

__all__ = ["compile_value", "project"]


def compile_value(sql: str, schema: pa.Schema) -> tuple[pc.Expression, pa.DataType, list[str]]:
    """Compile a SQL value expression (``"a * 2"``, ``"upper(s.name)"``) over ``schema``.

    Returns:
        The expression, its Arrow type, and the top-level columns of ``schema`` it reads (in schema
        order).

    Raises:
        FilterError: the text is empty or not valid SQL, names an unknown column, uses a construct
            that is not supported, or cannot be evaluated.
        TypeError: ``sql`` is not a string.
    """
    if not isinstance(sql, str):
        raise TypeError(f"a column expression must be SQL text, not {type(sql).__name__}")
    if not sql.strip():
        raise FilterError("empty column expression")
    compiler = _Compiler(schema)
    try:
        result = compiler.compile(parse(sql))
    except RecursionError:
        raise FilterError("column expression is nested too deeply") from None
    expr = result.expr
    try:  # a last check that the expression binds against the schema
        project(schema.empty_table(), [expr], ["_"])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise FilterError(f"column expression {sql!r} cannot be evaluated: {e}") from e
    return expr, result.type, [n for n in schema.names if n in compiler.columns]


def project(table: pa.Table, exprs: list[pc.Expression], names: list[str]) -> pa.Table:
    """The expressions evaluated over ``table``, as columns ``names`` (rows keep their order)."""
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("project", acero.ProjectNodeOptions(exprs, names)),
        ]
    )
    return plan.to_table(use_threads=False)
