"""The public API is documented: every name a user imports (``__all__`` of the public modules) and
every public method or property of those classes has a docstring (the API reference site is built
from them by ``mkdocs build --strict`` in CI)."""

from __future__ import annotations

import datetime
import importlib
import inspect
import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_table as lt

PUBLIC = [
    "lance_table",
    "lance_table.fragment",
    "lance_table.optimize",
    "lance_table.progress",
    "lance_table.pydantic",
    "lance_table.file",
    "lance_table.spark",
]


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    for klass in cls.__mro__:
        if not klass.__module__.startswith("lance_table"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (classmethod, staticmethod)):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property):
                yield f"{cls.__name__}.{name}", value


def _public(module_name: str) -> Iterator[tuple[str, Any]]:
    module = importlib.import_module(module_name)
    for name in module.__all__:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        yield f"{module_name}.{name}", obj
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for member, value in _members(obj):
                yield f"{module_name}.{member}", value


@pytest.mark.parametrize("module_name", PUBLIC)
def test_public_api_has_docstrings(module_name: str) -> None:
    missing = sorted(name for name, obj in _public(module_name) if not inspect.getdoc(obj))
    assert not missing, f"public names without a docstring: {missing}"


EXAMPLE = re.compile(r"Example:\n\s*```python\n(.*?)\n\s*```", re.S)


def _examples() -> list[tuple[str, str]]:
    found = []
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue  # the errors page has one example for them all
            if inspect.isclass(obj) or inspect.isfunction(obj):
                match = EXAMPLE.search(inspect.getdoc(obj) or "")
                found.append((f"{module_name}.{name}", textwrap.dedent(match.group(1)) if match else ""))
    return found


def test_public_classes_and_functions_have_an_example() -> None:
    missing = sorted(name for name, code in _examples() if not code)
    assert not missing, f"public names without an 'Example:' section: {missing}"


@pytest.mark.parametrize(
    ("name", "code"), [e for e in _examples() if e[1]], ids=[e[0] for e in _examples() if e[1]]
)
def test_docstring_example_runs(
    name: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each example runs as written, on a small dataset of ``id``, ``score`` and ``kind`` (``uri``,
    ``ds``), with ``table`` new rows of the same schema and ``tmp`` a folder of its own. Spark's
    examples need a session: they are compiled only (tests/spark run the same calls)."""
    if name.startswith("lance_table.spark."):
        compile(code, name, "exec")
        return
    monkeypatch.chdir(tmp_path)
    rows = pa.table(
        {
            "id": pa.array(range(300), pa.int64()),
            "score": pa.array([(i * 37 % 100) / 100 for i in range(300)]),
            "kind": pa.array([("click", "view", "buy")[i % 3] for i in range(300)]),
        }
    )
    uri = str(tmp_path / "events")
    ds = lt.write_dataset(rows, uri, max_rows_per_file=100)
    namespace = {
        "__name__": "docstring_example",  # (class statements, pydantic's models, need a module name)
        "lt": lt,
        "pa": pa,
        "pc": pc,
        "json": json,
        "datetime": datetime,
        "uri": uri,
        "ds": ds,
        "table": rows.slice(0, 10),
        "tmp": str(tmp_path),
    }
    # the docstring's own code, without this module's ``from __future__`` (as a user's script runs)
    exec(compile(code, name, "exec", dont_inherit=True), namespace)
