"""Runtime support of the ``lance`` shim that runs pylance's upstream tests against lance_table.

``scripts/upstream_tests.py`` generates a package named ``lance`` with one small module per pylance
module (``lance.dataset``, ``lance.fragment``, ``lance.file``, ...). Each calls :func:`install`, which
resolves a name the tests ask for in the lance_table modules mapped to that pylance module. A name
lance_table does not have resolves to a placeholder: importing it works (so one missing name does not
fail a whole test module at collection), using it raises :class:`MissingInLanceTable` naming it, so
every test that needs it fails, and says why.

The same placeholders stand in for optional third-party modules that are not installed (``polars``,
``ml_dtypes``): they raise ``ModuleNotFoundError`` when used, with pylance as with lance_table.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any, NoReturn

# pylance module -> the lance_table modules that hold its names, tried in order. A pylance module
# not listed maps to the lance_table module of the same name, when there is one.
SOURCES: dict[str, tuple[str, ...]] = {
    "lance": ("lance_table",),
    "lance.dataset": ("lance_table",),
    "lance.commit": ("lance_table.commit", "lance_table.errors"),
    # pylance's native module: the names its tests import from it
    "lance.lance": ("lance_table.optimize", "lance_table.migration"),
}


class MissingInLanceTable(Exception):
    """A pylance name that has no counterpart in lance_table (raised when the test uses it)."""


# While pytest imports the test modules, a placeholder used at module level (``stable_version()``
# in a constant, a parametrize list) hands back an inert value and is noted here, rather than
# failing the import of every test in the module; the tests that use the value then fail on it.
# The harness's plugin ends this when collection ends, and reports the names.
COLLECTING = True
IMPORT_TIME_USES: list[str] = []


class _Inert:
    """A value that stands for a missing name's result: fails on use, with ``error`` naming it.

    While the test modules are imported, what a module-level expression does with it (``.split``,
    ``[0]``, ``int(...)``) gives more inert values, so the import finishes.
    """

    def __init__(self, name: str, error: type[Exception]) -> None:
        self._lt_name = name
        self._lt_error = error

    def _lt_raise(self) -> NoReturn:
        raise self._lt_error(self._lt_name)

    def _lt_derived(self) -> _Inert:
        if not COLLECTING:
            self._lt_raise()
        return _Inert(self._lt_name, self._lt_error)

    def __getattr__(self, attr: str) -> _Inert:
        if attr.startswith("__") or attr.startswith("_pytest") or attr == "pytestmark":
            raise AttributeError(attr)
        return self._lt_derived()

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return self._lt_derived()

    def __getitem__(self, key: Any) -> _Inert:
        return self._lt_derived()

    def __int__(self) -> int:
        if not COLLECTING:
            self._lt_raise()
        return _InertInt(self._lt_name, self._lt_error)

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        self._lt_raise()

    def __ne__(self, other: object) -> bool:
        self._lt_raise()

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        self._lt_raise()

    def __iter__(self) -> NoReturn:
        self._lt_raise()

    def __str__(self) -> str:
        self._lt_raise()

    def __repr__(self) -> str:
        return f"<unavailable {self._lt_name}>"


class _InertInt(int):
    """``int()`` of an inert value at import time: comparing it raises ``error`` naming the name."""

    _lt_name: str
    _lt_error: type[Exception]

    def __new__(cls, name: str, error: type[Exception]) -> _InertInt:
        value = super().__new__(cls, -1)
        value._lt_name, value._lt_error = name, error
        return value

    def __eq__(self, other: object) -> bool:
        raise self._lt_error(self._lt_name)

    def __ne__(self, other: object) -> bool:
        raise self._lt_error(self._lt_name)

    __hash__ = int.__hash__


def _importing_module() -> str:
    frame = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name.startswith("test_") or name in ("helper", "conftest"):
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return ""


class _Placeholder(type):
    """Metaclass of placeholders: a class, so tests may subclass it; any use raises."""

    _lt_name: str
    _lt_error: type[Exception]

    def _lt_raise(cls, suffix: str = "") -> NoReturn:
        used = f" (used as {cls._lt_name}{suffix})" if suffix else ""
        raise cls._lt_error(f"{cls._lt_name}{used}")

    def _lt_lenient(cls) -> bool:
        # A missing optional module is missing for pylance too: always lenient, the test fails later.
        if cls._lt_error is ModuleNotFoundError:
            return True
        if COLLECTING:
            module = _importing_module()
            if module:
                IMPORT_TIME_USES.append(f"{cls._lt_name} (in {module})")
        return COLLECTING

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls._lt_lenient():
            return _Inert(cls._lt_name, cls._lt_error)
        cls._lt_raise()

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__") or attr.startswith("_pytest") or attr == "pytestmark":
            raise AttributeError(attr)
        if cls._lt_lenient():
            return placeholder(cls._lt_name, cls._lt_error)
        cls._lt_raise(f".{attr}")

    def __instancecheck__(cls, obj: Any) -> bool:
        cls._lt_raise()

    def __subclasscheck__(cls, sub: Any) -> bool:
        cls._lt_raise()

    def __iter__(cls) -> NoReturn:
        cls._lt_raise()


def placeholder(qualname: str, error: type[Exception] = MissingInLanceTable) -> type:
    """A stand-in for ``qualname`` that raises ``error`` naming it on any use."""
    module, _, name = qualname.rpartition(".")
    return _Placeholder(name, (), {"_lt_name": qualname, "_lt_error": error, "__module__": module})


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _sources(shim_name: str) -> list[types.ModuleType]:
    default = "lance_table" + shim_name[len("lance") :]
    names = SOURCES.get(shim_name, (default,))
    return [importlib.import_module(n) for n in names if _module_exists(n)]


def install(shim_name: str) -> None:
    """Give the shim module ``shim_name`` a module ``__getattr__`` that looks names up in lance_table."""
    module = sys.modules[shim_name]
    resolved: list[types.ModuleType] | None = None

    def __getattr__(name: str) -> Any:
        nonlocal resolved
        if name.startswith("__"):
            raise AttributeError(name)
        if resolved is None:
            resolved = _sources(shim_name)
        for source in resolved:
            if hasattr(source, name):
                value = getattr(source, name)
                break
        else:
            value = placeholder(f"{shim_name}.{name}")
        setattr(module, name, value)
        return value

    module.__getattr__ = __getattr__  # type: ignore[method-assign]


def install_package(submodules: list[str]) -> None:
    """Set up the top-level ``lance`` shim: import its submodules, then lay lance_table's names over.

    pylance's ``lance.dataset`` is both a function (the attribute) and a module (``sys.modules``); the
    submodules are imported first so lance_table's top-level names win the attributes, as in pylance.
    """
    for name in submodules:
        importlib.import_module(name)
    package = sys.modules["lance"]
    import lance_table

    for name in dir(lance_table):
        value = getattr(lance_table, name)
        if not name.startswith("_") and not isinstance(value, types.ModuleType):
            setattr(package, name, value)
    package.__version__ = lance_table.__version__  # type: ignore[attr-defined]
    install("lance")


def install_stub(dependency: str) -> None:
    """Make the stub module ``dependency`` hand out placeholders that raise ``ModuleNotFoundError``."""
    module = sys.modules[dependency]

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return placeholder(f"{dependency} is not installed: {dependency}.{name}", ModuleNotFoundError)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
