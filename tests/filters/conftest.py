"""Every filter test runs twice: with lance_table's own parser, and with the parser it takes when
sqlglot's compiled build (``sqlglotc``) is installed, where a Python subclass of sqlglot's parser
cannot be made (see :func:`lance_table.filters.dialect._parser_class`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlglot.parsers.postgres import PostgresParser

from lance_table.filters import dialect
from lance_table.table import scan_plan


def _clear() -> None:  # compiled filters are kept by their text
    scan_plan._terms_cached.cache_clear()
    scan_plan._compile_cached.cache_clear()


@pytest.fixture(autouse=True, params=["sqlglot", "compiled-sqlglot"])
def filter_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Which parser the filters of the test are read with."""
    if request.param == "compiled-sqlglot":
        monkeypatch.setattr(dialect._LanceSQL, "parser_class", PostgresParser)
    _clear()
    yield request.param
    _clear()
