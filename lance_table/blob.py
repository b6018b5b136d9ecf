"""Blob values, at pylance's module path (``lance.blob``): the builders of blob v2 columns to
write (:class:`Blob`, :class:`BlobType`, :class:`BlobArray`, :func:`blob_array`,
:func:`blob_field`, from :mod:`lance_table.blob_values`; pylance's writers of blobs stored
before their data file, :class:`PackedBlobWriter`, :class:`DedicatedBlobWriter` and
:class:`BlobDescriptorArrayBuilder`), and blobs as file objects:
:class:`BlobColumn` over a binary column in memory, and :class:`~lance_table.table.blobs.BlobFile`
(from :meth:`~lance_table.LanceDataset.take_blobs`) over blob columns stored in a dataset."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pyarrow as pa

from lance_table.blob_descriptors import BlobDescriptor, BlobDescriptorArrayBuilder
from lance_table.blob_values import (
    DEFAULT_BLOB_BUFFER_SIZE,
    Blob,
    BlobArray,
    BlobIterator,
    BlobType,
    blob_array,
    blob_field,
)
from lance_table.file.blob_writers import DedicatedBlobWriter, PackedBlobWriter
from lance_table.table.blobs import BlobFile

__all__ = [
    "DEFAULT_BLOB_BUFFER_SIZE",
    "Blob",
    "BlobArray",
    "BlobColumn",
    "BlobDescriptor",
    "BlobDescriptorArrayBuilder",
    "BlobFile",
    "BlobIterator",
    "BlobType",
    "DedicatedBlobWriter",
    "PackedBlobWriter",
    "blob_array",
    "blob_field",
]


class BlobColumn:
    """A binary column (pyarrow ``binary`` or ``large_binary``, an Array or a ChunkedArray) whose
    rows iterate as file objects, for APIs that read files (pylance's ``lance.BlobColumn``). A null
    row reads as an empty file, as in pylance. For large values stored in a dataset, use
    :meth:`~lance_table.LanceDataset.take_blobs`, which reads lazily.

    Raises:
        ValueError: the column is not a pyarrow array, or not binary.

    Example:
        ```python
        import pyarrow as pa
        from lance_table import BlobColumn

        for f in BlobColumn(pa.array([b"foo", None, b"baz"], pa.large_binary())):
            print(f.read())
        ```
    """

    def __init__(self, blob_column: pa.Array | pa.ChunkedArray) -> None:
        if not isinstance(blob_column, (pa.Array, pa.ChunkedArray)):
            raise ValueError(f"Expected a pyarrow.Array or pyarrow.ChunkedArray, got {type(blob_column)}")
        if not (pa.types.is_binary(blob_column.type) or pa.types.is_large_binary(blob_column.type)):
            raise ValueError(f"Expected a binary array, got {blob_column.type}")
        self.blob_column = blob_column

    def __iter__(self) -> Iterator[io.BytesIO]:
        """One file object per row (empty for a null row), over the column's own bytes."""
        for value in self.blob_column:
            yield io.BytesIO(value.as_py() or b"")
