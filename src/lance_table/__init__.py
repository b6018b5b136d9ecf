"""lance_table: the Lance columnar table format in pure Python.

The file codec lives in :mod:`lance_table.file`; errors in :mod:`lance_table.errors`.
"""

from __future__ import annotations

from lance_table.errors import (
    CommitConflictError,
    CommitError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    FilterError,
    LanceTableError,
    SchemaError,
    TagError,
    UnsupportedFormatError,
    VersionNotFoundError,
    WriteAbortedError,
)

__version__ = "0.1.0"

from lance_table.table import Dataset, dataset, write_dataset

__all__ = [
    "CommitConflictError",
    "CommitError",
    "CorruptFileError",
    "Dataset",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "FilterError",
    "LanceTableError",
    "SchemaError",
    "TagError",
    "UnsupportedFormatError",
    "VersionNotFoundError",
    "WriteAbortedError",
    "__version__",
    "dataset",
    "write_dataset",
]
