"""The public API is documented: every name a user imports (``__all__`` of the public modules) and
every public method or property of those classes has a docstring (the API reference site is built
from them by ``mkdocs build --strict`` in CI)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

PUBLIC = [
    "lance_table",
    "lance_table.fragment",
    "lance_table.optimize",
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
