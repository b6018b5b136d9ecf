"""Lance's SQL dialect for sqlglot, and parsing filter text with it."""

from __future__ import annotations

import sqlglot
from sqlglot import exp, parser, tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.parser import IsPredicatePrecedence

from lance_table.errors import FilterError


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
        HEX_STRINGS = [("x'", "'"), ("X'", "'")]  # noqa: RUF012  (binary literals X'0102')

    class Parser(parser.Parser):
        # IS binds below comparisons, as in DataFusion: `a > 1 IS TRUE` is `(a > 1) IS TRUE`
        IS_PREDICATE_PRECEDENCE = IsPredicatePrecedence.LOW


def parse(text: str) -> exp.Expr:
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
