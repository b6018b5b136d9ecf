"""Names of a package imported on their first use (PEP 562).

A package lists its public names with the module that defines each, and takes its module-level
``__getattr__`` and ``__dir__`` from :func:`hooks` (they call :func:`load` and :func:`names`):
``import`` of the package then costs only what the package itself runs, while ``package.X``,
``from package import X`` and ``dir(package)`` see every name. The names are imported under
``if TYPE_CHECKING:`` too, for the type checker and the documentation.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

#: public name -> (module defining it, its name there; None when the name is that module)
Names = Mapping[str, tuple[str, str | None]]


def load(package: str, lazy: Names, name: str) -> Any:
    """The value of ``package.name``, imported now and kept in the package's namespace.

    Raises:
        AttributeError: the package has no such name.
    """
    try:
        module_name, attribute = lazy[name]
    except KeyError:
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    value: Any = importlib.import_module(module_name)
    if attribute is not None:
        value = getattr(value, attribute)
    setattr(sys.modules[package], name, value)  # later uses find it without ``__getattr__``
    return value


def names(package: str, lazy: Names) -> list[str]:
    """The package's names, the ones not imported yet included."""
    return sorted({*vars(sys.modules[package]), *lazy})


def hooks(package: str, lazy: Names) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's module-level ``__getattr__`` (:func:`load`) and ``__dir__`` (:func:`names`)."""

    def __getattr__(name: str) -> Any:
        return load(package, lazy, name)

    def __dir__() -> list[str]:
        return names(package, lazy)

    return __getattr__, __dir__


def version() -> str:
    """lance_table's version (``lance_table.__version__``), read from the package metadata on its
    first use: the modules that write it into manifests and files import it without that cost."""
    from lance_table import __version__

    return __version__
