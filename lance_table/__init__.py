"""lance_table: the Lance columnar table format in pure Python.

The file codec lives in :mod:`lance_table.file`; errors in :mod:`lance_table.errors`.

``import lance_table`` loads only the errors and the logger: every other public name (the dataset
functions and classes, pylance's submodules ``commit``, ``fragment``, ``optimize``...) is imported
when it is first used (PEP 562), so a process pays only for the parts it uses. ``from lance_table
import X``, ``lance_table.X`` and ``dir(lance_table)`` see every name of :data:`__all__`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lance_table._lazy as _lazy
import lance_table.log as log  # pylance's ``lance.log``: applies ``LANCE_LOG`` on import, as pylance does
from lance_table.errors import (
    AppendSchemaError,
    BasePathError,
    BatchCommitError,
    BlobLocationError,
    BlobOverflowError,
    BlobValueError,
    BranchError,
    CommitConflictError,
    CommitError,
    CommitStateUnknownError,
    CorruptFileError,
    DataFileNotFoundError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    DetachedCommitError,
    EmptyDataError,
    FilterError,
    FilterEvaluationError,
    InputTypeError,
    InvalidURIError,
    LanceFileNotFoundError,
    LanceTableError,
    MergeInsertError,
    MergeSourceError,
    MixedFileVersionsError,
    PackedStructError,
    RowIdOverflowError,
    RowRangeError,
    SchemaChangeError,
    SchemaError,
    StorageCredentialsError,
    StorageOptionsError,
    StorageUnreachableError,
    TagError,
    UnsupportedFormatError,
    UnsupportedOperationError,
    UnsupportedOptionError,
    VersionGoneError,
    VersionNotFoundError,
    WriteAbortedError,
)
from lance_table.log import set_logger

if TYPE_CHECKING:
    import lance_table.commit as commit
    import lance_table.fragment as fragment
    import lance_table.io as io
    import lance_table.optimize as optimize
    import lance_table.progress as progress
    import lance_table.util as util
    from lance_table.blob import (
        DEFAULT_BLOB_BUFFER_SIZE,
        Blob,
        BlobArray,
        BlobColumn,
        BlobType,
        blob_array,
        blob_field,
    )
    from lance_table.blob_descriptors import BlobDescriptor, BlobDescriptorArrayBuilder
    from lance_table.file.blob_writers import DedicatedBlobWriter, PackedBlobWriter
    from lance_table.format.bases import DatasetBasePath
    from lance_table.format.transaction import COMMIT_MESSAGE_KEY as LANCE_COMMIT_MESSAGE_KEY
    from lance_table.schema import json_to_schema, schema_to_json
    from lance_table.storage.io_stats import bytes_read_counter, iops_counter
    from lance_table.table.blobs import BlobFile
    from lance_table.table.branch_refs import Branch
    from lance_table.table.branches import Branches
    from lance_table.table.dataset import Dataset, LanceDataset
    from lance_table.table.entry import dataset, write_dataset
    from lance_table.table.fragment_metadata import FragmentMetadata
    from lance_table.table.lance_fragment import LanceFragment
    from lance_table.table.lance_operation import LanceOperation, Transaction
    from lance_table.table.lance_schema import LanceSchema
    from lance_table.table.maintenance import DataStatistics, FieldStatistics, LanceStats
    from lance_table.table.operations.auto_cleanup import AutoCleanupConfig
    from lance_table.table.operations.cleanup import (
        CleanupCandidateFile,
        CleanupExplanation,
        CleanupReferencedBranch,
        CleanupStats,
    )
    from lance_table.table.operations.merge_insert import MergeInsertBuilder
    from lance_table.table.optimize import DatasetOptimizer
    from lance_table.table.result_types import (
        AlterColumn,
        BulkCommitResult,
        DatasetStats,
        DeleteResult,
        ExecuteResult,
        UpdateResult,
        Version,
    )
    from lance_table.table.row_id_api import serialize_row_addrs
    from lance_table.table.scan_metrics import ScanStatistics
    from lance_table.table.scan_spec import ColumnOrdering
    from lance_table.table.scanner import LanceScanner
    from lance_table.table.scanner_builder import ScannerBuilder
    from lance_table.table.session import Session
    from lance_table.table.sql_query import SqlQuery, SqlQueryBuilder
    from lance_table.table.tags import Tag, Tags
    from lance_table.table.version_delta import DatasetDelta
    from lance_table.udf import BatchUDF, add_columns_udf, batch_udf
    from lance_table.util import sanitize_ts

    __version__: str

#: public name -> (module, attribute in it; None: the module itself), imported on first use
_LAZY: _lazy.Names = {
    "commit": ("lance_table.commit", None),
    "fragment": ("lance_table.fragment", None),
    "io": ("lance_table.io", None),
    "optimize": ("lance_table.optimize", None),
    "progress": ("lance_table.progress", None),
    "util": ("lance_table.util", None),
    "DEFAULT_BLOB_BUFFER_SIZE": ("lance_table.blob", "DEFAULT_BLOB_BUFFER_SIZE"),
    "Blob": ("lance_table.blob", "Blob"),
    "BlobArray": ("lance_table.blob", "BlobArray"),
    "BlobColumn": ("lance_table.blob", "BlobColumn"),
    "BlobType": ("lance_table.blob", "BlobType"),
    "blob_array": ("lance_table.blob", "blob_array"),
    "blob_field": ("lance_table.blob", "blob_field"),
    "BlobDescriptor": ("lance_table.blob_descriptors", "BlobDescriptor"),
    "BlobDescriptorArrayBuilder": ("lance_table.blob_descriptors", "BlobDescriptorArrayBuilder"),
    "DedicatedBlobWriter": ("lance_table.file.blob_writers", "DedicatedBlobWriter"),
    "PackedBlobWriter": ("lance_table.file.blob_writers", "PackedBlobWriter"),
    "DatasetBasePath": ("lance_table.format.bases", "DatasetBasePath"),
    "LANCE_COMMIT_MESSAGE_KEY": ("lance_table.format.transaction", "COMMIT_MESSAGE_KEY"),
    "json_to_schema": ("lance_table.schema", "json_to_schema"),
    "schema_to_json": ("lance_table.schema", "schema_to_json"),
    "bytes_read_counter": ("lance_table.storage.io_stats", "bytes_read_counter"),
    "iops_counter": ("lance_table.storage.io_stats", "iops_counter"),
    "Dataset": ("lance_table.table.dataset", "Dataset"),
    "LanceDataset": ("lance_table.table.dataset", "LanceDataset"),
    "dataset": ("lance_table.table.entry", "dataset"),
    "write_dataset": ("lance_table.table.entry", "write_dataset"),
    "BlobFile": ("lance_table.table.blobs", "BlobFile"),
    "Branch": ("lance_table.table.branch_refs", "Branch"),
    "Branches": ("lance_table.table.branches", "Branches"),
    "FragmentMetadata": ("lance_table.table.fragment_metadata", "FragmentMetadata"),
    "LanceFragment": ("lance_table.table.lance_fragment", "LanceFragment"),
    "LanceOperation": ("lance_table.table.lance_operation", "LanceOperation"),
    "Transaction": ("lance_table.table.lance_operation", "Transaction"),
    "LanceSchema": ("lance_table.table.lance_schema", "LanceSchema"),
    "DataStatistics": ("lance_table.table.maintenance", "DataStatistics"),
    "FieldStatistics": ("lance_table.table.maintenance", "FieldStatistics"),
    "LanceStats": ("lance_table.table.maintenance", "LanceStats"),
    "AutoCleanupConfig": ("lance_table.table.operations.auto_cleanup", "AutoCleanupConfig"),
    "CleanupCandidateFile": ("lance_table.table.operations.cleanup", "CleanupCandidateFile"),
    "CleanupExplanation": ("lance_table.table.operations.cleanup", "CleanupExplanation"),
    "CleanupReferencedBranch": ("lance_table.table.operations.cleanup", "CleanupReferencedBranch"),
    "CleanupStats": ("lance_table.table.operations.cleanup", "CleanupStats"),
    "MergeInsertBuilder": ("lance_table.table.operations.merge_insert", "MergeInsertBuilder"),
    "DatasetOptimizer": ("lance_table.table.optimize", "DatasetOptimizer"),
    "AlterColumn": ("lance_table.table.result_types", "AlterColumn"),
    "BulkCommitResult": ("lance_table.table.result_types", "BulkCommitResult"),
    "DatasetStats": ("lance_table.table.result_types", "DatasetStats"),
    "DeleteResult": ("lance_table.table.result_types", "DeleteResult"),
    "ExecuteResult": ("lance_table.table.result_types", "ExecuteResult"),
    "UpdateResult": ("lance_table.table.result_types", "UpdateResult"),
    "Version": ("lance_table.table.result_types", "Version"),
    "serialize_row_addrs": ("lance_table.table.row_id_api", "serialize_row_addrs"),
    "ScanStatistics": ("lance_table.table.scan_metrics", "ScanStatistics"),
    "ColumnOrdering": ("lance_table.table.scan_spec", "ColumnOrdering"),
    "LanceScanner": ("lance_table.table.scanner", "LanceScanner"),
    "ScannerBuilder": ("lance_table.table.scanner_builder", "ScannerBuilder"),
    "Session": ("lance_table.table.session", "Session"),
    "SqlQuery": ("lance_table.table.sql_query", "SqlQuery"),
    "SqlQueryBuilder": ("lance_table.table.sql_query", "SqlQueryBuilder"),
    "Tag": ("lance_table.table.tags", "Tag"),
    "Tags": ("lance_table.table.tags", "Tags"),
    "DatasetDelta": ("lance_table.table.version_delta", "DatasetDelta"),
    "BatchUDF": ("lance_table.udf", "BatchUDF"),
    "add_columns_udf": ("lance_table.udf", "add_columns_udf"),
    "batch_udf": ("lance_table.udf", "batch_udf"),
    "sanitize_ts": ("lance_table.util", "sanitize_ts"),
}


def __getattr__(name: str) -> Any:
    """A public name, imported on its first use (PEP 562); ``__version__`` read from the installed
    package's metadata (the version is defined once, in pyproject.toml)."""
    if name == "__version__":
        globals()[name] = _version()
        return globals()[name]
    return _lazy.load(__name__, _LAZY, name)


def __dir__() -> list[str]:
    """The module's names, the not yet imported public ones included."""
    return sorted({*_lazy.names(__name__, _LAZY), "__version__"})


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("lance_table")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "0.0.0+unknown"


__all__ = [
    "DEFAULT_BLOB_BUFFER_SIZE",
    "LANCE_COMMIT_MESSAGE_KEY",
    "AlterColumn",
    "AppendSchemaError",
    "AutoCleanupConfig",
    "BasePathError",
    "BatchCommitError",
    "BatchUDF",
    "Blob",
    "BlobArray",
    "BlobColumn",
    "BlobDescriptor",
    "BlobDescriptorArrayBuilder",
    "BlobFile",
    "BlobLocationError",
    "BlobOverflowError",
    "BlobType",
    "BlobValueError",
    "Branch",
    "BranchError",
    "Branches",
    "BulkCommitResult",
    "CleanupCandidateFile",
    "CleanupExplanation",
    "CleanupReferencedBranch",
    "CleanupStats",
    "ColumnOrdering",
    "CommitConflictError",
    "CommitError",
    "CommitStateUnknownError",
    "CorruptFileError",
    "DataFileNotFoundError",
    "DataStatistics",
    "Dataset",
    "DatasetAlreadyExistsError",
    "DatasetBasePath",
    "DatasetDelta",
    "DatasetNotFoundError",
    "DatasetOptimizer",
    "DatasetStats",
    "DedicatedBlobWriter",
    "DeleteResult",
    "DetachedCommitError",
    "EmptyDataError",
    "ExecuteResult",
    "FieldStatistics",
    "FilterError",
    "FilterEvaluationError",
    "FragmentMetadata",
    "InputTypeError",
    "InvalidURIError",
    "LanceDataset",
    "LanceFileNotFoundError",
    "LanceFragment",
    "LanceOperation",
    "LanceScanner",
    "LanceSchema",
    "LanceStats",
    "LanceTableError",
    "MergeInsertBuilder",
    "MergeInsertError",
    "MergeSourceError",
    "MixedFileVersionsError",
    "PackedBlobWriter",
    "PackedStructError",
    "RowIdOverflowError",
    "RowRangeError",
    "ScanStatistics",
    "ScannerBuilder",
    "SchemaChangeError",
    "SchemaError",
    "Session",
    "SqlQuery",
    "SqlQueryBuilder",
    "StorageCredentialsError",
    "StorageOptionsError",
    "StorageUnreachableError",
    "Tag",
    "TagError",
    "Tags",
    "Transaction",
    "UnsupportedFormatError",
    "UnsupportedOperationError",
    "UnsupportedOptionError",
    "UpdateResult",
    "Version",
    "VersionGoneError",
    "VersionNotFoundError",
    "WriteAbortedError",
    "__version__",
    "add_columns_udf",
    "batch_udf",
    "blob_array",
    "blob_field",
    "bytes_read_counter",
    "commit",
    "dataset",
    "fragment",
    "io",
    "iops_counter",
    "json_to_schema",
    "log",
    "optimize",
    "progress",
    "sanitize_ts",
    "schema_to_json",
    "serialize_row_addrs",
    "set_logger",
    "util",
    "write_dataset",
]
