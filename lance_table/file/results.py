"""What pylance's file API returns: read results and the metadata of a file (``lance.file``'s
``ReaderResults``, ``LanceFileMetadata``, ``LanceFileStatistics`` and their parts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class LanceBufferDescriptor:
    """Where a buffer lies in the file."""

    position: int
    size: int


@dataclass(frozen=True)
class LancePageMetadata:
    """A page: its buffers and its encoding (the protobuf message, as text)."""

    buffers: list[LanceBufferDescriptor]
    encoding: str


@dataclass(frozen=True)
class LanceColumnMetadata:
    """A column: its own buffers and its pages."""

    column_buffers: list[LanceBufferDescriptor]
    pages: list[LancePageMetadata]


@dataclass(frozen=True)
class LanceFileMetadata:
    """What a file's footer region says (pylance's ``LanceFileMetadata``)."""

    schema: pa.Schema
    num_rows: int
    num_data_bytes: int
    num_column_metadata_bytes: int
    num_global_buffer_bytes: int
    global_buffers: list[LanceBufferDescriptor]
    columns: list[LanceColumnMetadata]
    major_version: int
    minor_version: int


@dataclass(frozen=True)
class LanceColumnStatistics:
    """A column's page count and the bytes of its pages."""

    num_pages: int
    size_bytes: int


@dataclass(frozen=True)
class LanceFileStatistics:
    """Per-column statistics of a file."""

    columns: list[LanceColumnStatistics]


def buffers_of(offsets: Sequence[int], sizes: Sequence[int]) -> list[LanceBufferDescriptor]:
    """Buffer descriptors of parallel offset and size lists (as a column or page stores them)."""
    return [LanceBufferDescriptor(int(p), int(s)) for p, s in zip(offsets, sizes)]


class ReaderResults:
    """The rows a read returns, as batches or as a table (pylance's ``ReaderResults``)."""

    def __init__(self, reader: pa.RecordBatchReader) -> None:
        self.reader = reader

    def to_batches(self) -> pa.RecordBatchReader:
        """The rows as a RecordBatchReader (batches of the read's ``batch_size``)."""
        return self.reader

    def to_table(self) -> pa.Table:
        """All the rows as one table."""
        return self.reader.read_all()
