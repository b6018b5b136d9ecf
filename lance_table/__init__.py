"""lance_table: the Lance columnar table format in pure Python.

The file codec lives in :mod:`lance_table.file`; errors in :mod:`lance_table.errors`.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from lance_table.errors import (
    BatchCommitError,
    BlobLocationError,
    CommitConflictError,
    CommitError,
    CommitStateUnknownError,
    CorruptFileError,
    DataFileNotFoundError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    FilterError,
    InputTypeError,
    InvalidURIError,
    LanceFileNotFoundError,
    LanceTableError,
    MergeInsertError,
    MergeSourceError,
    RowRangeError,
    SchemaError,
    StorageCredentialsError,
    StorageOptionsError,
    StorageUnreachableError,
    TagError,
    UnsupportedFormatError,
    UnsupportedOperationError,
    VersionGoneError,
    VersionNotFoundError,
    WriteAbortedError,
)

try:  # the version is defined once, in pyproject.toml
    __version__ = _metadata.version("lance_table")
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0.0.0+unknown"

import lance_table.fragment as fragment  # pylance's ``lance.fragment``
from lance_table.table import Dataset, dataset, write_dataset
from lance_table.table.lance_operation import LanceOperation, Transaction
from lance_table.table.lance_schema import LanceSchema
from lance_table.table.scanner import LanceScanner

LanceDataset = Dataset  # pylance's name of the dataset class (``LanceDataset.commit(...)``)

__all__ = [
    "BatchCommitError",
    "BlobLocationError",
    "CommitConflictError",
    "CommitError",
    "CommitStateUnknownError",
    "CorruptFileError",
    "DataFileNotFoundError",
    "Dataset",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "FilterError",
    "InputTypeError",
    "InvalidURIError",
    "LanceDataset",
    "LanceFileNotFoundError",
    "LanceOperation",
    "LanceScanner",
    "LanceSchema",
    "LanceTableError",
    "MergeInsertError",
    "MergeSourceError",
    "RowRangeError",
    "SchemaError",
    "StorageCredentialsError",
    "StorageOptionsError",
    "StorageUnreachableError",
    "TagError",
    "Transaction",
    "UnsupportedFormatError",
    "UnsupportedOperationError",
    "VersionGoneError",
    "VersionNotFoundError",
    "WriteAbortedError",
    "__version__",
    "dataset",
    "fragment",
    "write_dataset",
]
