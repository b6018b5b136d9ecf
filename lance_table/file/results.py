"""What pylance's file API returns: read results and the metadata of a file (``lance.file``'s
``ReaderResults``, ``LanceFileMetadata``, ``LanceFileStatistics`` and their parts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class LanceBufferDescriptor:
    """Where a buffer lies in the file.

    Example:
        ```python
        from lance_table.file import LanceFileReader, LanceFileWriter

        with LanceFileWriter(f"{tmp}/buffers.lance") as writer:
            writer.write_batch(table)
        buffer = LanceFileReader(f"{tmp}/buffers.lance").metadata().columns[0].pages[0].buffers[0]
        print(buffer.position, buffer.size)
        ```
    """

    position: int
    size: int


@dataclass(frozen=True)
class LancePageMetadata:
    """A page: its buffers and its encoding (the protobuf message, as text in pylance's form:
    see :mod:`lance_table.file.encoding_text`).

    Example:
        ```python
        from lance_table.file import LanceFileReader, LanceFileWriter

        with LanceFileWriter(f"{tmp}/pages.lance") as writer:
            writer.write_batch(table)
        page = LanceFileReader(f"{tmp}/pages.lance").metadata().columns[0].pages[0]
        print(page.encoding, [(b.position, b.size) for b in page.buffers])
        ```
    """

    buffers: list[LanceBufferDescriptor]
    encoding: str


@dataclass(frozen=True)
class LanceColumnMetadata:
    """A column: its own buffers and its pages.

    Example:
        ```python
        from lance_table.file import LanceFileReader, LanceFileWriter

        with LanceFileWriter(f"{tmp}/cols.lance") as writer:
            writer.write_batch(table)
        column = LanceFileReader(f"{tmp}/cols.lance").metadata().columns[0]
        print(len(column.pages), column.pages[0].encoding)
        ```
    """

    column_buffers: list[LanceBufferDescriptor]
    pages: list[LancePageMetadata]


@dataclass(frozen=True)
class LanceFileMetadata:
    """What a file's footer region says (pylance's ``LanceFileMetadata``).

    Example:
        ```python
        from lance_table.file import LanceFileReader, LanceFileWriter

        with LanceFileWriter(f"{tmp}/meta.lance") as writer:
            writer.write_batch(table)
        meta = LanceFileReader(f"{tmp}/meta.lance").metadata()
        print(meta.num_rows, meta.major_version, meta.minor_version, len(meta.columns))
        ```
    """

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
    """A column's page count and the bytes of its pages.

    Example:
        ```python
        from lance_table.file import LanceFileReader, LanceFileWriter

        with LanceFileWriter(f"{tmp}/colstats.lance") as writer:
            writer.write_batch(table)
        column = LanceFileReader(f"{tmp}/colstats.lance").file_statistics().columns[0]
        print(column.num_pages, column.size_bytes)
        ```
    """

    num_pages: int
    size_bytes: int


@dataclass(frozen=True)
class LanceFileStatistics:
    """Per-column statistics of a file.

    Example:
        ```python
        from lance_table.file import LanceFileReader, LanceFileWriter

        with LanceFileWriter(f"{tmp}/stats.lance") as writer:
            writer.write_batch(table)
        stats = LanceFileReader(f"{tmp}/stats.lance").file_statistics()
        print([(c.num_pages, c.size_bytes) for c in stats.columns])
        ```
    """

    columns: list[LanceColumnStatistics]


def buffers_of(offsets: Sequence[int], sizes: Sequence[int]) -> list[LanceBufferDescriptor]:
    """Buffer descriptors of parallel offset and size lists (as a column or page stores them)."""
    return [LanceBufferDescriptor(int(p), int(s)) for p, s in zip(offsets, sizes)]


class ReaderResults:
    """The rows a read returns, as batches or as a table (pylance's ``ReaderResults``).

    Example:
        ```python
        from lance_table.file import LanceFileReader, LanceFileWriter

        with LanceFileWriter(f"{tmp}/results.lance") as writer:
            writer.write_batch(table)
        results = LanceFileReader(f"{tmp}/results.lance").read_range(0, 2)
        print(results.to_table())
        ```
    """

    def __init__(self, reader: pa.RecordBatchReader) -> None:
        self.reader = reader

    def to_batches(self) -> pa.RecordBatchReader:
        """The rows as a RecordBatchReader (batches of the read's ``batch_size``)."""
        return self.reader

    def to_table(self) -> pa.Table:
        """All the rows as one table."""
        return self.reader.read_all()
