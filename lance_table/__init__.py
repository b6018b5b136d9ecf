"""lance_table: the Lance columnar table format in pure Python.

The file codec lives in :mod:`lance_table.file`; errors in :mod:`lance_table.errors`.
"""

from __future__ import annotations

from importlib import metadata as _metadata

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

try:  # the version is defined once, in pyproject.toml
    __version__ = _metadata.version("lance_table")
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0.0.0+unknown"

import lance_table.commit as commit  # pylance's ``lance.commit``
import lance_table.fragment as fragment  # pylance's ``lance.fragment``
import lance_table.io as io  # pylance's ``lance.io``
import lance_table.log as log  # pylance's ``lance.log``
import lance_table.optimize as optimize  # pylance's ``lance.optimize``
import lance_table.progress as progress  # pylance's ``lance.progress``
import lance_table.util as util  # pylance's ``lance.util``
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
from lance_table.log import set_logger
from lance_table.schema import json_to_schema, schema_to_json
from lance_table.storage.io_stats import bytes_read_counter, iops_counter
from lance_table.table import Dataset, LanceDataset, dataset, write_dataset
from lance_table.table.blobs import BlobFile
from lance_table.table.branch_refs import Branch
from lance_table.table.branches import Branches
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
