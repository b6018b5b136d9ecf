"""Lance's SQL dialect for sqlglot, and parsing filter text with it."""

from __future__ import annotations

import contextlib
import re

import sqlglot
from sqlglot import exp, parser, tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.parser import IsPredicatePrecedence
from sqlglot.tokens import TokenType

from lance_table.errors import FilterError

_STATEMENT_WORDS = {
    TokenType.COMMAND,
    TokenType.SHOW,
    TokenType.GRANT,
    TokenType.EXECUTE,
    TokenType.FETCH,
    TokenType.RENAME,
}


class _LowIsParser(parser.Parser):
    # IS binds below comparisons, as in DataFusion: `a > 1 IS TRUE` is `(a > 1) IS TRUE`
    IS_PREDICATE_PRECEDENCE = IsPredicatePrecedence.LOW


def _parser_class() -> type[parser.Parser]:
    """The parser of filters: sqlglot's own with IS below comparisons.

    sqlglot's compiled build (the ``sqlglotc`` package, ``sqlglot[c]``, which replaces sqlglot's
    modules wherever it is installed) refuses to make objects of a Python subclass of its parser.
    There, PostgreSQL's parser is taken: it also reads IS below comparisons, and it reads every
    filter lance_table supports as the base parser does (the filter tests pass with both).
    """
    try:
        _LowIsParser()
    except TypeError:  # "interpreted classes cannot inherit from compiled"
        from sqlglot.parsers.postgres import PostgresParser

        return PostgresParser
    return _LowIsParser


class _LanceSQL(Dialect):
    """Lance's SQL: ``'`` strings, backtick identifiers, ``"`` strings, IS below comparisons."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE
    # DataFusion's ORDER BY: nulls last ascending, first descending (nulls sort as the largest)
    NULL_ORDERING = "nulls_are_large"

    class Tokenizer(tokens.Tokenizer):
        QUOTES = ["'"]  # noqa: RUF012  (sqlglot's own attribute, a plain list)
        IDENTIFIERS = ["`"]  # noqa: RUF012
        # Double-quoted text comes out as exp.RawString; the compiler decides whether it names a
        # column (standard SQL) or is a string (Lance).
        RAW_STRINGS = ['"']  # noqa: RUF012
        STRING_ESCAPES = ["'"]  # noqa: RUF012
        HEX_STRINGS = [("x'", "'"), ("X'", "'")]  # noqa: RUF012  (binary literals X'0102')
        # words that only start statements (``SHOW``, ``GRANT``, ``CALL``, ``EXPLAIN``...) are
        # names in a filter, as they are to pylance: a column may be called ``show``
        KEYWORDS = {  # noqa: RUF012
            word: kind for word, kind in tokens.Tokenizer.KEYWORDS.items() if kind not in _STATEMENT_WORDS
        }

    # (typed as BaseParser's subclass by sqlglot, whose own dialects assign parser.Parser's too)
    parser_class = _parser_class()  # type: ignore[assignment]


# a typed literal with a double-quoted text (``TIMESTAMP "2021-01-02 00:00:00"``), which Lance reads
# as a string: sqlglot reads ``"..."`` there as nothing it knows
_TYPED_RAW = re.compile(r'\b(TIMESTAMP|DATE|TIME|DATETIME)(\s+)"([^"\']*)"', re.IGNORECASE)


def parse(text: str, *, statement: bool = False) -> exp.Expr:
    """A filter (or, with ``statement``, a whole query such as ``SELECT ...``) as one tree.

    Raises:
        FilterError: the text does not parse, or holds more than one expression.
    """
    try:
        trees = _parse(text, statement)
    except ParseError as e:
        fixed = _TYPED_RAW.sub(r"\1\2'\3'", text)
        if fixed != text:
            with contextlib.suppress(SqlglotError):
                trees = _parse(fixed, statement)
                return _one(trees, text)
        detail = e.errors[0] if e.errors else {}
        description = detail.get("description", str(e))
        where = f" at line {detail['line']}, column {detail['col']}" if "line" in detail else ""
        raise FilterError(f"syntax error in filter {text!r}: {description}{where}") from e
    except SqlglotError as e:
        raise FilterError(f"syntax error in filter {text!r}: {e}") from e
    return _one(trees, text)


def to_text(tree: exp.Expr) -> str:
    """An expression as SQL text in Lance's dialect (what :func:`parse` reads back)."""
    return tree.sql(dialect=_LanceSQL)


def _parse(text: str, statement: bool) -> list[exp.Expr]:
    # a filter is parsed as a condition, not a statement: a filter on a column named like a
    # command (``set``, ``show``, ``use``, ``load``) is a condition, as it is to pylance
    dialect = _DIALECT
    if statement:
        trees = sqlglot.parse(text, dialect=_LanceSQL)
    else:
        try:
            trees = dialect.parser().parse_into(exp.Condition, dialect.tokenize(text), text)
        except ParseError:
            trees = sqlglot.parse(text, dialect=_LanceSQL)  # (its errors say what is wrong)
    return [tree for tree in trees if tree is not None]


_DIALECT = _LanceSQL()


def _one(trees: list[exp.Expr], text: str) -> exp.Expr:
    if len(trees) != 1:
        raise FilterError(f"a filter must be a single expression, got {len(trees)} statements: {text!r}")
    return trees[0]
