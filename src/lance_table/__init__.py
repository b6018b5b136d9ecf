"""lance_table: the Lance columnar table format in pure Python.

The file codec lives in :mod:`lance_table.file`; errors in :mod:`lance_table.errors`.
"""

from __future__ import annotations

from lance_table.errors import (
    CorruptFileError,
    LanceTableError,
    SchemaError,
    UnsupportedFormatError,
)

__version__ = "0.1.0"

__all__ = [
    "CorruptFileError",
    "LanceTableError",
    "SchemaError",
    "UnsupportedFormatError",
    "__version__",
]
